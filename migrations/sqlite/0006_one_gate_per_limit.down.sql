-- Reverts 0006: the lots' query schedule, the bucket's hold and block
-- level, and an empty balde_sifen_rucs as 0005 made it.
ALTER TABLE balde_document_lots DROP COLUMN next_query_at;
CREATE TABLE balde_sifen_rucs (
    env             TEXT    NOT NULL CHECK (env IN ('test', 'prod')),
    ruc             TEXT    NOT NULL,
    interval_ns     INTEGER NOT NULL DEFAULT 0,
    last_answer_at  INTEGER,
    in_flight_claim TEXT,
    in_flight_since INTEGER,
    block_level     INTEGER NOT NULL DEFAULT 0,
    last_block_at   INTEGER,
    PRIMARY KEY (env, ruc)
) STRICT, WITHOUT ROWID;
ALTER TABLE balde_buckets DROP COLUMN block_level;
ALTER TABLE balde_buckets DROP COLUMN held_until;
ALTER TABLE balde_buckets DROP COLUMN next_at;
