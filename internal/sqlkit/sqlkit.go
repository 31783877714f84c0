// Package sqlkit holds what the packages that keep tables in the store's
// database share with package sqlstore: the error vocabulary and the WHERE
// builder.
package sqlkit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/balde-throttle/balde/throttle"
)

// StoreError returns err in the throttle engine's vocabulary, prefixed with
// pkg and op: nil for nil; a context error stays itself (the caller gave
// up, the store did not fail); everything else means the store could not
// do its job and wraps throttle.ErrStoreUnavailable.
func StoreError(pkg, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: %w", pkg, op, err)
	}
	return fmt.Errorf("%s: %s: %w: %w", pkg, op, throttle.ErrStoreUnavailable, err)
}

// Conds is a WHERE clause being built: conditions joined by AND, with
// their arguments in order; the zero value has none.
type Conds struct {
	sql  []string
	Args []any
}

// And adds cond, with its arguments, when set is true.
func (c *Conds) And(set bool, cond string, args ...any) {
	if set {
		c.sql = append(c.sql, cond)
		c.Args = append(c.Args, args...)
	}
}

// Where is the clause, "" without conditions.
func (c *Conds) Where() string {
	if len(c.sql) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(c.sql, " AND ")
}
