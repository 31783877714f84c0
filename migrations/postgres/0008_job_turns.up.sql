-- Work done once across instances (docs/decisions/0170, 0171).
-- balde_job_turns: one row per background job that runs once per period
-- across every process on the database (prune, DICT reconciliation, SIFEN
-- resolution). A process takes the job's turn with a compare-and-set on
-- lease_until, the instant the next turn is due; it extends the lease while
-- a long turn runs, so a stopped process's turn passes to another when its
-- lease ends. Same columns as the SQLite schema; times are integer
-- nanoseconds since the Unix epoch.
CREATE TABLE balde_job_turns (
    job         TEXT   NOT NULL PRIMARY KEY,
    holder      TEXT   NOT NULL,
    last_run    BIGINT NOT NULL,
    lease_until BIGINT NOT NULL
);

-- A lot's result query is claimed by its number: find its rows without
-- reading every lot.
CREATE INDEX balde_document_lots_number ON balde_document_lots (env, lot_number);
