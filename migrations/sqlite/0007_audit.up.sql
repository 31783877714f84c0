-- The operators' audit trail (package audit): one row per state-changing
-- action an operator took — a bucket reset (admin page or the CLI), a SIFEN
-- send or "send all drafts" from the Documents page, a DICT lookup from the
-- form — with who (the admin user, or "cli:<os user>"), when, what (the
-- bucket key, the document, the RUC, the payer) and why (the reason typed;
-- required for a reset). The admin's Audit page lists it newest first
-- (by id), filtered by user or action; the prune job deletes rows older
-- than the retention by their own time (at). Times are integer nanoseconds
-- since the Unix epoch, as in the engine.
CREATE TABLE balde_audit (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    user_name TEXT    NOT NULL,
    action    TEXT    NOT NULL,           -- reset, sifen-send, sifen-send-all, dict-lookup
    target    TEXT    NOT NULL,           -- what the action was on
    reason    TEXT    NOT NULL,           -- why, as typed ('' when none)
    outcome   TEXT    NOT NULL            -- what came of it, in words
) STRICT;

-- Pruning by time; the filters page newest first within a user or action.
CREATE INDEX balde_audit_at ON balde_audit (at);
CREATE INDEX balde_audit_user ON balde_audit (user_name, id);
CREATE INDEX balde_audit_action ON balde_audit (action, id);
