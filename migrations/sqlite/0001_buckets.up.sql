-- Buckets: one row per (policy, env, identifier). A key with no row is a full
-- bucket, so idle rows may be deleted (balde prune). The policy name is
-- interned in `policies` and the table is WITHOUT ROWID (the primary key is
-- the row) to keep a row small: see docs/BENCHMARKS.md for bytes per row.
-- Times are integer nanoseconds since the Unix epoch; nothing is a float.
CREATE TABLE balde_policies (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
) STRICT;

CREATE TABLE balde_buckets (
    policy_id     INTEGER NOT NULL REFERENCES balde_policies (id),
    env           TEXT    NOT NULL,
    identifier    TEXT    NOT NULL,
    tokens        INTEGER NOT NULL,           -- whole tokens as of refilled_at; may be negative
    carry         INTEGER NOT NULL DEFAULT 0, -- accrued fraction of the next token (continuous refill)
    refilled_at   INTEGER NOT NULL,
    send_count    INTEGER NOT NULL DEFAULT 0,
    severity      INTEGER NOT NULL DEFAULT 0, -- 1 Healthy, 2 Medium, 3 High, 4 Critical
    last_sent_at  INTEGER,                    -- NULL: never admitted
    last_entry    INTEGER,                    -- id of the bucket's latest token_ledger row
    blocked_until INTEGER,                    -- NULL: never blocked
    spent         BLOB,                       -- rolling windows only: when outstanding tokens were spent
    PRIMARY KEY (policy_id, env, identifier)
) STRICT, WITHOUT ROWID;
