-- One state per limit (issue 19, decision 0050): a SIFEN RUC's gate lives in
-- its SIFEN_RECEPCION_LOTE bucket row (held_until: a lot on the wire; next_at:
-- the interval from SIFEN's answer; block_level: the 0301s in a row), and
-- balde_sifen_rucs goes. A lot's next result query is data of the lot, and
-- the SIFEN_CONSULTA_LOTE buckets go.
-- Same columns as the SQLite schema; times are integer nanoseconds.
ALTER TABLE balde_buckets ADD COLUMN next_at BIGINT;
ALTER TABLE balde_buckets ADD COLUMN held_until BIGINT;
ALTER TABLE balde_buckets ADD COLUMN block_level INTEGER NOT NULL DEFAULT 0;
DROP TABLE balde_sifen_rucs;
ALTER TABLE balde_document_lots ADD COLUMN next_query_at BIGINT;
DELETE FROM balde_buckets
WHERE policy_id IN (SELECT id FROM balde_policies WHERE name = 'SIFEN_CONSULTA_LOTE');
