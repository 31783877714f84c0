-- DICT lookups and participants (package dict); see the SQLite file of the
-- same number for what each column means. dict_lookups has one row per
-- getEntry keyed by its EndToEndId: a payment order with the same
-- EndToEndId credits the buckets it was charged to, once, and the
-- anti-scan monitors read it by time. Times are integer nanoseconds.
CREATE TABLE balde_dict_lookups (
    end_to_end_id TEXT     COLLATE "C" PRIMARY KEY,
    env           TEXT     COLLATE "C" NOT NULL,
    payer_id      TEXT     COLLATE "C" NOT NULL,
    key_type      TEXT     NOT NULL,
    policy        TEXT     NOT NULL,
    participant   TEXT     COLLATE "C" NOT NULL,
    status        SMALLINT NOT NULL,
    looked_up_at  BIGINT   NOT NULL,
    paid_at       BIGINT
);

CREATE INDEX balde_dict_lookups_time ON balde_dict_lookups (looked_up_at);
CREATE INDEX balde_dict_lookups_paid ON balde_dict_lookups (paid_at) WHERE paid_at IS NOT NULL;

CREATE TABLE balde_dict_participants (
    env         TEXT   COLLATE "C" NOT NULL,
    participant TEXT   COLLATE "C" NOT NULL,
    category    TEXT   NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (env, participant)
);
