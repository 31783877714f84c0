-- The token ledger: every change of a bucket's tokens, with its reason and
-- reference. Ids follow insertion order, which follows time: pruning deletes
-- the oldest ids in bounded batches (docs/decisions/0003-ledger-layout.md).
-- reason codes as in the SQLite schema.
CREATE TABLE token_ledger (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    policy_id  INTEGER  NOT NULL,
    env        TEXT     COLLATE "C" NOT NULL,
    identifier TEXT     COLLATE "C" NOT NULL,
    at         BIGINT   NOT NULL,
    reason     SMALLINT NOT NULL,
    delta      BIGINT   NOT NULL,
    balance    BIGINT   NOT NULL,
    n          BIGINT   NOT NULL DEFAULT 1,
    ref        TEXT
);

CREATE INDEX token_ledger_bucket ON token_ledger (policy_id, env, identifier, id);
CREATE UNIQUE INDEX token_ledger_credit ON token_ledger (policy_id, env, identifier, ref) WHERE reason = 4;
CREATE UNIQUE INDEX token_ledger_minute ON token_ledger (policy_id, env, identifier, at) WHERE reason = 10;
CREATE INDEX token_ledger_events ON token_ledger (reason, at) WHERE reason NOT IN (1, 10);
