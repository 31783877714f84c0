package throttle

import "errors"

// Errors returned by the engine. A refusal is never an error: it is a
// Decision with Allowed == false. Errors mean bad input (nothing changed) or a
// store that could not answer.
var (
	// ErrUnknownPolicy means a key names a policy the resolver does not know.
	ErrUnknownPolicy = errors.New("throttle: unknown policy")
	// ErrInvalidKey means a key's identifier, env or policy name is empty,
	// too long or holds control characters.
	ErrInvalidKey = errors.New("throttle: invalid key")
	// ErrInvalidPolicy means a policy's numbers cannot describe a bucket
	// (capacity or refill not positive, and so on).
	ErrInvalidPolicy = errors.New("throttle: invalid policy")
	// ErrInvalidCost means a charge's cost is below 1 or above the policy's
	// capacity (such a request could never be admitted).
	ErrInvalidCost = errors.New("throttle: invalid cost")
	// ErrInvalidAdjustment means an adjustment has a delta of the wrong sign
	// for its reason, or a credit without a reference.
	ErrInvalidAdjustment = errors.New("throttle: invalid adjustment")
	// ErrInvalidQuery means a read asks for something no store can answer
	// (an inspect.LedgerWindowQuery with no slots or an empty window).
	ErrInvalidQuery = errors.New("throttle: invalid query")
	// ErrStoreUnavailable means the store could not run the transaction
	// (database down, locked past its timeout, disk full). For a Take it is
	// only returned when a policy involved fails closed.
	ErrStoreUnavailable = errors.New("throttle: store unavailable")
	// ErrOutcomeUnknown means the store lost the answer to a change it may
	// have applied; it always comes with ErrStoreUnavailable, and such a
	// change must never be run again (docs/decisions/0020).
	ErrOutcomeUnknown = errors.New("throttle: store outcome unknown")
	// ErrStoreTimeout means the store gave up a wait it bounds (PostgreSQL's
	// statement_timeout or lock_timeout, SQLite's write lock past the
	// retries): nothing was applied. It always comes with
	// ErrStoreUnavailable (docs/decisions/0220).
	ErrStoreTimeout = errors.New("throttle: store wait timed out")
	// errClosed is returned by Updates on a closed GroupCommit.
	errClosed = errors.New("throttle: group commit closed")
)
