-- One state per limit (issue 19, decision 0050). A SIFEN RUC's gate lives in
-- its SIFEN_RECEPCION_LOTE bucket row, the one every view reads:
--   held_until   a lot on the wire holds the RUC until its answer (at most
--                until then: the request is over for sure);
--   next_at      the answer's time plus the interval owed: SIFEN counts its
--                interval from its answer, not from the take;
--   block_level  the escalating blocks in a row (SIFEN's 0301, 10 to 60 min).
-- balde_sifen_rucs, the second copy of that state, goes; the interval every
-- process shares stays in balde_sifen_settings. A running 0301 block was
-- already in the bucket (blocked_until); only its level starts again at 0.
-- A lot's next result query is data of the lot (next_query_at), not a
-- bucket: polling is a schedule, not a limit; the SIFEN_CONSULTA_LOTE buckets
-- go (their ledger rows stay, as for any pruned bucket).
-- Times are integer nanoseconds since the Unix epoch.
ALTER TABLE balde_buckets ADD COLUMN next_at INTEGER;
ALTER TABLE balde_buckets ADD COLUMN held_until INTEGER;
ALTER TABLE balde_buckets ADD COLUMN block_level INTEGER NOT NULL DEFAULT 0;
DROP TABLE balde_sifen_rucs;
ALTER TABLE balde_document_lots ADD COLUMN next_query_at INTEGER;
DELETE FROM balde_buckets
WHERE policy_id IN (SELECT id FROM balde_policies WHERE name = 'SIFEN_CONSULTA_LOTE');
