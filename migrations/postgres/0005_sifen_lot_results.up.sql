-- SIFEN (issue 11): what a lot's result says of each document (dEstRes and
-- the authorization number dProtAut), and the per-(env, RUC) state that
-- makes every process wait the interval from the previous lot's ANSWER (not
-- from its take), never send while a lot of the RUC is in flight, and block
-- longer after each 0301. balde_sifen_settings holds the interval every
-- process on the database shares (the strictest one configured wins).
-- Same columns as the SQLite schema; times are integer nanoseconds.
ALTER TABLE balde_documents ADD COLUMN result TEXT;
ALTER TABLE balde_documents ADD COLUMN auth_number TEXT;

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

CREATE TABLE balde_sifen_settings (
    env         TEXT   NOT NULL PRIMARY KEY CHECK (env IN ('test', 'prod')),
    interval_ns BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
