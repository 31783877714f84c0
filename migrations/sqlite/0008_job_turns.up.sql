-- Work done once across instances (docs/decisions/0170, 0171).
-- balde_job_turns: one row per background job that runs once per period
-- across every process on the database (prune, DICT reconciliation, SIFEN
-- resolution). A process takes the job's turn with a compare-and-set on
-- lease_until, the instant the next turn is due; it extends the lease while
-- a long turn runs, so a stopped process's turn passes to another when its
-- lease ends. Times are integer nanoseconds since the Unix epoch.
CREATE TABLE balde_job_turns (
    job         TEXT    NOT NULL PRIMARY KEY, -- prune, dict-reconcile:<ISPB>, sifen-resolve
    holder      TEXT    NOT NULL,             -- the process that took the last turn (host/pid/random)
    last_run    INTEGER NOT NULL,             -- when it took it (0: no turn yet)
    lease_until INTEGER NOT NULL              -- the next turn is due then
) STRICT, WITHOUT ROWID;

-- A lot's result query is claimed by its number (a compare-and-set on
-- next_query_at): find its rows without reading every lot.
CREATE INDEX balde_document_lots_number ON balde_document_lots (env, lot_number);
