-- Reverts 0003: drops SIFEN's documents and lots (their content is lost).
DROP TABLE balde_document_lots;
DROP TABLE balde_documents;
