package sqlstore

import (
	"context"
	"log/slog"
)

// For the query plan tests.
var (
	LedgerWindowSQL = ledgerWindowSQL
	WalkCTE         = walkCTE
	RangeCTE        = rangeCTE
)

// For the tests of what a driver's errors mean (pipeline_outcome_test.go)
// and of the ledger's window search (window_gap_test.go).
var (
	PipelineOutcome = pipelineOutcome
	Transient       = transient
)

func (s *Store) LedgerIDAt(ctx context.Context, t, head int64) (int64, error) {
	return s.ledgerIDAt(ctx, t, head)
}

// ErrorsOnly returns a store without a database that tells errors as d
// does: Retry and CommitError on an engine's errors, without its server.
func ErrorsOnly(d Driver) *Store {
	return &Store{engine: d.Engine(), driver: d, logger: slog.New(slog.DiscardHandler)}
}
