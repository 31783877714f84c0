-- One state per limit (issue 19, decision 0050): a SIFEN RUC's gate lives in
-- its SIFEN_RECEPCION_LOTE bucket row (next_at: a lot on the wire, then the
-- interval from SIFEN's answer; block_level: the 0301s in a row), and
-- balde_sifen_rucs goes. A lot's next result query is data of the lot.
-- Same columns as the SQLite schema; times are integer nanoseconds.
ALTER TABLE balde_buckets ADD COLUMN next_at BIGINT;
ALTER TABLE balde_buckets ADD COLUMN block_level INTEGER NOT NULL DEFAULT 0;
DROP TABLE balde_sifen_rucs;
ALTER TABLE balde_document_lots ADD COLUMN next_query_at BIGINT;
