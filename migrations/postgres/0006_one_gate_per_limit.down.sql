-- Reverts 0006.
ALTER TABLE balde_document_lots DROP COLUMN next_query_at;
CREATE TABLE balde_sifen_rucs (
    env             TEXT   NOT NULL CHECK (env IN ('test', 'prod')),
    ruc             TEXT   NOT NULL,
    interval_ns     BIGINT NOT NULL DEFAULT 0,
    last_answer_at  BIGINT,
    in_flight_claim TEXT,
    in_flight_since BIGINT,
    block_level     INTEGER NOT NULL DEFAULT 0,
    last_block_at   BIGINT,
    PRIMARY KEY (env, ruc)
);
ALTER TABLE balde_buckets DROP COLUMN block_level;
ALTER TABLE balde_buckets DROP COLUMN held_until;
ALTER TABLE balde_buckets DROP COLUMN next_at;
