-- SIFEN (issue 11): what a lot's result says of each document (dEstRes and
-- the authorization number dProtAut), and the per-(env, RUC) state that
-- makes every process wait the interval from the previous lot's ANSWER (not
-- from its take), never send while a lot of the RUC is in flight, and block
-- longer after each 0301. balde_sifen_settings holds the interval every
-- process on the database shares (the strictest one configured wins).
-- Times are integer nanoseconds since the Unix epoch.
ALTER TABLE balde_documents ADD COLUMN result TEXT;      -- dEstRes: Aprobado, Aprobado con observación, Rechazado
ALTER TABLE balde_documents ADD COLUMN auth_number TEXT; -- dProtAut of an approved DE

CREATE TABLE balde_sifen_rucs (
    env             TEXT    NOT NULL CHECK (env IN ('test', 'prod')),
    ruc             TEXT    NOT NULL,           -- dRucEm, without check digit
    interval_ns     INTEGER NOT NULL DEFAULT 0, -- the interval owed after the last lot (the strictest sender's)
    last_answer_at  INTEGER,                    -- when the last lot's answer arrived (or its request failed)
    in_flight_claim TEXT,                       -- the send whose lot is on the wire, if any
    in_flight_since INTEGER,
    block_level     INTEGER NOT NULL DEFAULT 0, -- 0301s in a row (each blocks longer)
    last_block_at   INTEGER,
    PRIMARY KEY (env, ruc)
) STRICT, WITHOUT ROWID;

CREATE TABLE balde_sifen_settings (
    env         TEXT    NOT NULL PRIMARY KEY CHECK (env IN ('test', 'prod')),
    interval_ns INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
