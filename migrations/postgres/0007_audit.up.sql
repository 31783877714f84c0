-- The operators' audit trail (package audit); see the SQLite file of the
-- same number for what each column means. One row per state-changing
-- operator action (reset, SIFEN send or send-all, DICT lookup from the
-- form): who, when, what and why. Listed newest first by id, pruned by its
-- own time (at). Times are integer nanoseconds.
CREATE TABLE balde_audit (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        BIGINT NOT NULL,
    user_name TEXT   COLLATE "C" NOT NULL,
    action    TEXT   COLLATE "C" NOT NULL,
    target    TEXT   NOT NULL,
    reason    TEXT   NOT NULL,
    outcome   TEXT   NOT NULL
);

CREATE INDEX balde_audit_at ON balde_audit (at);
CREATE INDEX balde_audit_user ON balde_audit (user_name, id);
CREATE INDEX balde_audit_action ON balde_audit (action, id);
