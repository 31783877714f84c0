-- Reverts 0003: drops SIFEN's documents and lots (their content is lost).
DROP TABLE document_lots;
DROP TABLE documents;
