DROP TABLE balde_buckets;
DROP TABLE balde_policies;
