-- Reverts 0006: drops the lot results' columns and SIFEN's per-RUC state.
DROP TABLE balde_sifen_settings;
DROP TABLE balde_sifen_rucs;
ALTER TABLE balde_documents DROP COLUMN auth_number;
ALTER TABLE balde_documents DROP COLUMN result;
