package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/balde-throttle/balde/throttle"
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
