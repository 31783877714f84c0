package sqlstore

// For the query plan tests.
var (
	LedgerWindowSQL = ledgerWindowSQL
	WalkCTE         = walkCTE
	RangeCTE        = rangeCTE
)
