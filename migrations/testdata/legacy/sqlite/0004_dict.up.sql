-- DICT lookups and participants (package dict).
-- dict_lookups has one row per getEntry, keyed by its EndToEndId: which payer
-- and participant buckets it was charged to and how it ended. A payment
-- order (pacs.008) with the same EndToEndId credits those buckets once, and
-- the anti-scan monitors (404 share per participant and per payer, lookups
-- per payment) read it by time. The looked-up key itself is not stored.
-- Times are integer nanoseconds since the Unix epoch, as in the engine.
CREATE TABLE dict_lookups (
    end_to_end_id TEXT    PRIMARY KEY,
    env           TEXT    NOT NULL,
    payer_id      TEXT    NOT NULL,           -- CPF (PF) or CNPJ (PJ)
    key_type      TEXT    NOT NULL,           -- CPF, CNPJ, PHONE, EMAIL, EVP
    policy        TEXT    NOT NULL,           -- the USER anti-scan policy charged
    participant   TEXT    NOT NULL,           -- ISPB of the requesting participant
    status        INTEGER NOT NULL,           -- HTTP status; 0 when no response arrived
    looked_up_at  INTEGER NOT NULL,
    paid_at       INTEGER                     -- NULL until a payment order is credited
) STRICT, WITHOUT ROWID;

-- The monitors scan a time window; pruning deletes the oldest rows.
CREATE INDEX dict_lookups_time ON dict_lookups (looked_up_at);
-- Payments in a window.
CREATE INDEX dict_lookups_paid ON dict_lookups (paid_at) WHERE paid_at IS NOT NULL;

-- The category (A..H, kept as a free string) the DICT reports for a
-- participant, learned by reconciliation; it sizes the participant's
-- ENTRIES_READ_PARTICIPANT_ANTISCAN and ENTRIES_STATISTICS_READ buckets.
CREATE TABLE dict_participants (
    env         TEXT    NOT NULL,
    participant TEXT    NOT NULL,
    category    TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (env, participant)
) STRICT;
