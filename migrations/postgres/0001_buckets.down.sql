DROP TABLE buckets;
DROP TABLE policies;
