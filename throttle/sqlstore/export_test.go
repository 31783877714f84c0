package sqlstore

// LedgerWindowSQL is ledgerWindowSQL, for the query plan tests.
var LedgerWindowSQL = ledgerWindowSQL
