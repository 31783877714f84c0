DROP TABLE token_ledger;
