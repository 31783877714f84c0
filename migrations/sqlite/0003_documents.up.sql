-- SIFEN documents and the lots sent with them, shared by every process that
-- sends (the web app's send button, the batch command): the status column is
-- how they agree that a document is being sent, so nothing is sent twice,
-- even after a crash (protocol: docs/decisions/0005-sifen-send-protocol.md).
-- Times are integer nanoseconds since the Unix epoch, like the engine's.
CREATE TABLE balde_documents (
    id            INTEGER PRIMARY KEY,
    env           TEXT    NOT NULL CHECK (env IN ('test', 'prod')),
    ruc           TEXT    NOT NULL,           -- dRucEm, without check digit
    dv            INTEGER NOT NULL,           -- dDVEmi
    cdc           TEXT    NOT NULL,           -- the 44-digit Id of DE
    de_type       INTEGER NOT NULL,           -- iTiDE
    xml           TEXT    NOT NULL,           -- the rDE element, as imported
    status        TEXT    NOT NULL CHECK (status IN ('draft', 'sending', 'sent', 'approved', 'rejected', 'error')),
    message       TEXT    NOT NULL DEFAULT '',
    version       INTEGER NOT NULL DEFAULT 1, -- bumped by every change: claims are conditional on it
    claim         TEXT,                       -- the send holding the document while status = 'sending'
    lot_hash      TEXT,                       -- the lot of the last send
    lot_number    TEXT,                       -- dProtConsLote: a string, it can be 17 digits
    response_code TEXT,                       -- the last dCodRes / dCodResLot / per-DE code
    retry_at      INTEGER,                    -- a blocked send: the earliest instant it would be admitted
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    claimed_at    INTEGER,
    sent_at       INTEGER,
    UNIQUE (env, cdc)
) STRICT;

-- Resolve finds documents left in 'sending'; Poll finds lots still 'sent'.
CREATE INDEX balde_documents_status ON balde_documents (status, claimed_at);
CREATE INDEX balde_documents_lot ON balde_documents (env, lot_number) WHERE lot_number IS NOT NULL;
CREATE INDEX balde_documents_ruc ON balde_documents (ruc, env);

-- A lot that reached SIFEN, or may have: its row exists from the claim
-- until SIFEN is known not to have it, and then forever once queued. The
-- primary key is what keeps a lot from being sent twice.
CREATE TABLE balde_document_lots (
    env        TEXT    NOT NULL,
    hash       TEXT    NOT NULL,              -- hex SHA-256 of the rLoteDE document
    ruc        TEXT    NOT NULL,
    status     TEXT    NOT NULL CHECK (status IN ('sending', 'queued')),
    lot_number TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (env, hash)
) STRICT, WITHOUT ROWID;
