DROP TABLE balde_token_ledger;
