-- Reverts 0010: the job turns and the index of lots by number.
DROP INDEX balde_document_lots_number;
DROP TABLE balde_job_turns;
