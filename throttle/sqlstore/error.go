package sqlstore

import (
	"context"
	"errors"
	"fmt"

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

// retryable reports whether a transaction lost a race and may be run
// again from the start: on PostgreSQL a serialization failure, a deadlock,
// or a unique violation from two transactions inserting the same new
// bucket (ClassLostRace).
func retryable(d Driver, err error) bool {
	return d.Classify(err)&ClassLostRace != 0
}
