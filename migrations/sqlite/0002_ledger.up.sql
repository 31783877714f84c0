-- The token ledger: every change of a bucket's tokens, with its reason and
-- reference. The rowid follows insertion order, which follows time: pruning
-- deletes the oldest rowids in bounded batches and needs no index on `at`
-- (see docs/decisions/0003-ledger-layout.md).
-- reason: 1 take, 2 penalty, 3 refund, 4 credit, 5 reset, 6 refused-empty,
-- 7 refused-cooldown, 8 refused-blocked, 9 sync, 10 takes of one minute
-- (aggregated, n events).
CREATE TABLE token_ledger (
    id         INTEGER PRIMARY KEY,
    policy_id  INTEGER NOT NULL,
    env        TEXT    NOT NULL,
    identifier TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    reason     INTEGER NOT NULL,
    delta      INTEGER NOT NULL,
    balance    INTEGER NOT NULL,
    n          INTEGER NOT NULL DEFAULT 1,
    ref        TEXT
) STRICT;

-- The latest entries of one bucket (the rowid is implicitly the last column).
CREATE INDEX token_ledger_bucket ON token_ledger (policy_id, env, identifier);
-- A credit is applied once per (bucket, reference).
CREATE UNIQUE INDEX token_ledger_credit ON token_ledger (policy_id, env, identifier, ref) WHERE reason = 4;
-- Aggregated takes: one row per bucket and minute.
CREATE UNIQUE INDEX token_ledger_minute ON token_ledger (policy_id, env, identifier, at) WHERE reason = 10;
-- Everything but routine takes, by time: refusals in the last hour, credits.
CREATE INDEX token_ledger_events ON token_ledger (reason, at) WHERE reason NOT IN (1, 10);
