ALTER TABLE balde_policies DROP COLUMN shadow;
