package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// StoreError returns err in the throttle engine's vocabulary, prefixed with
// pkg and op: nil for nil; a context error stays itself (the caller gave
// up, the store did not fail); everything else means the store could not
// do its job and wraps throttle.ErrStoreUnavailable. For packages that keep
// their own tables in the store's database.
func StoreError(pkg, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w", pkg, op, err)
	}
	return fmt.Errorf("%s: %s: %w: %w", pkg, op, throttle.ErrStoreUnavailable, err)
}

// formatError is StoreError of package sqlstore.
func formatError(op string, err error) error { return StoreError("sqlstore", op, err) }

// formatError is formatError for an error of the store's driver: a wait the
// engine bounds and gave up (PostgreSQL's statement_timeout, 57014, or
// lock_timeout, 55P03; SQLite's write lock still busy once the retries'
// time was spent) also wraps throttle.ErrStoreTimeout, so that a caller
// can tell an overloaded or locked database from one it cannot reach
// (docs/decisions/0220).
func (s *Store) formatError(op string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return formatError(op, err)
	}
	if s.driver.Classify(err)&(driverkit.ClassTimeout|driverkit.ClassBusy) != 0 {
		err = fmt.Errorf("%w: %w", throttle.ErrStoreTimeout, err)
	}
	return formatError(op, err)
}
