package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/balde-throttle/balde/throttle"
)

// formatError turns a driver error into the engine's vocabulary: a context
// error stays itself (the caller gave up, the store did not fail);
// everything else means the store could not do its job and wraps
// throttle.ErrStoreUnavailable.
func formatError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	return fmt.Errorf("sqlstore: %s: %w: %w", op, throttle.ErrStoreUnavailable, err)
}

// retryable reports whether a PostgreSQL transaction lost a race and may be
// run again from the start: a serialization failure, a deadlock, or a unique
// violation from two transactions inserting the same new bucket.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "23505":
		return true
	}
	return false
}
