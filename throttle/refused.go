package throttle

import (
	"errors"
	"fmt"
	"time"
)

// RefusedError carries a refusal where only an error can travel: out of an
// http.RoundTripper (dict.Transport, docs/decisions/0130) or a helper with
// no room for a Decision. Nothing was sent. APIs that can return a value
// return the Decision itself (docs/decisions/0010).
type RefusedError struct {
	// Op names what was refused, for the message ("dict getEntry",
	// "sifen siRecepLoteDE"); may be empty.
	Op string
	// Decision is the refusal: Key, Reason and RetryAfter say which bucket,
	// why and how long until the same request would be admitted.
	Decision Decision
}

// Error reads like "dict getEntry refused locally: ENTRIES_READ_USER_ANTISCAN/prod/… empty, retry after 30s".
func (e *RefusedError) Error() string {
	op := e.Op
	if op == "" {
		op = "request"
	}
	return fmt.Sprintf("%s refused locally: %s %s, retry after %s",
		op, e.Decision.Key, e.Decision.Reason, e.Decision.RetryAfter)
}

// RetryAfter is the wait until the same request would be admitted.
func (e *RefusedError) RetryAfter() time.Duration { return e.Decision.RetryAfter }

// AsRefusal reports whether err is or wraps a *RefusedError, and returns its
// Decision.
func AsRefusal(err error) (Decision, bool) {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Decision, true
	}
	return Decision{}, false
}
