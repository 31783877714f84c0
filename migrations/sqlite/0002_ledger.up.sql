-- The token ledger: every change of a bucket's tokens, with its reason and
-- reference. Each row points to the previous row of its bucket (prev) and the
-- bucket's row points to its latest (buckets.last_entry): the latest N rows of
-- one bucket are a walk by primary key, and writing a row updates no
-- secondary index (measured: a (policy_id, env, identifier) index made a
-- decision ~40 % slower; docs/decisions/0003-ledger-layout.md). Ids follow
-- insertion order, which follows time: pruning deletes the oldest ids in
-- bounded batches and needs no index on `at`.
-- reason: 1 take, 2 penalty, 3 refund, 4 credit, 5 reset, 6 refused-empty,
-- 7 refused-cooldown, 8 refused-blocked, 9 sync, 10 takes of one minute
-- (aggregated, n events).
CREATE TABLE balde_token_ledger (
    id         INTEGER PRIMARY KEY,
    policy_id  INTEGER NOT NULL,
    env        TEXT    NOT NULL,
    identifier TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    reason     INTEGER NOT NULL,
    delta      INTEGER NOT NULL,
    balance    INTEGER NOT NULL,
    n          INTEGER NOT NULL DEFAULT 1,
    prev       INTEGER,
    ref        TEXT
) STRICT;

-- A credit is applied once per (bucket, reference).
CREATE UNIQUE INDEX balde_token_ledger_credit ON balde_token_ledger (policy_id, env, identifier, ref) WHERE reason = 4;
-- Everything but routine takes, by time: refusals in the last hour, credits.
CREATE INDEX balde_token_ledger_events ON balde_token_ledger (reason, at) WHERE reason NOT IN (1, 10);
