package balde

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/balde-throttle/balde/audit"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Errors of ResetBucket.
var (
	// ErrNotStored: the key has no stored bucket; a key with no row is
	// already a full bucket, so there is nothing to reset.
	ErrNotStored = errors.New("no stored bucket")
	// ErrNoReason: a reset needs a reason, recorded in the audit trail.
	ErrNoReason = errors.New("a reset needs a reason")
	// ErrResetNotAudited: the bucket was reset, but its audit entry could
	// not be written (the reset stands).
	ErrResetNotAudited = errors.New("not recorded in the audit trail")
)

// BucketReset is what ResetBucket did.
type BucketReset struct {
	// Before and After are the bucket just before and just after the reset.
	Before, After throttle.BucketState
	// RemoteBlockStays says that the bucket is balde's gate in front of a
	// remote side that imposes blocks of its own (SIFEN's per-RUC lot
	// interval): the reset ends balde's own wait, but a block SIFEN
	// imposed after a 0301 is not lifted by it, and a lot still on the
	// wire holds the RUC until its answer.
	RemoteBlockStays bool
}

// CheckReset says whether ResetBucket(ctx, key, actor, reason) can reset
// key, without changing anything, and returns the bucket as it is: for a
// tool that asks for a confirmation first. A key with no stored bucket is
// ErrNotStored; an empty reason (spaces only) is ErrNoReason; a failed
// read is the store's error (throttle.ErrStoreUnavailable).
func (e *Engine) CheckReset(ctx context.Context, key throttle.Key, reason string) (throttle.BucketState, error) {
	st, err := e.limiter.State(ctx, key)
	if err != nil {
		return st, err
	}
	if !st.Stored {
		return st, fmt.Errorf("%w %s", ErrNotStored, key)
	}
	if strings.TrimSpace(reason) == "" {
		return st, ErrNoReason
	}
	return st, nil
}

// ResetBucket fills key's stored bucket and clears its cooldown and block
// (throttle.Limiter.Reset, a ledger row naming actor), then records it in
// the audit trail as audit.CLIUser(actor) with reason and the tokens before
// and after: what "balde buckets reset" does. It refuses as CheckReset
// does, changing nothing. When the audit entry cannot be written the reset
// stands and the error wraps ErrResetNotAudited (and the store's error).
func (e *Engine) ResetBucket(ctx context.Context, key throttle.Key, actor, reason string) (BucketReset, error) {
	before, err := e.CheckReset(ctx, key, reason)
	if err != nil {
		return BucketReset{}, err
	}
	after, err := e.limiter.Reset(ctx, key, actor)
	if err != nil {
		return BucketReset{}, err
	}
	r := BucketReset{Before: before, After: after, RemoteBlockStays: key.Policy == sifen.PolicyRecepcionLote}
	if _, err := e.audit.Record(ctx, audit.Entry{User: audit.CLIUser(actor), Action: audit.ActionReset, Target: key.String(),
		Reason: reason, Outcome: audit.ResetOutcome(before.Tokens, after.Tokens)}); err != nil {
		return r, fmt.Errorf("%s was reset but %w: %w", key, ErrResetNotAudited, err)
	}
	return r, nil
}
