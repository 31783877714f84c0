package balde

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Errors of ResetBucket: a key with no stored bucket (already full), a
// reset (or an override, OverrideSifen) without a reason for the audit
// trail, and a reset that stands without its audit entry.
var (
	ErrNotStored       = errors.New("no stored bucket")
	ErrNoReason        = errors.New("a reset or an override needs a reason")
	ErrResetNotAudited = errors.New("not recorded in the audit trail")
)

// BucketReset is what ResetBucket did.
type BucketReset struct {
	// Before and After are the bucket just before and just after the reset.
	Before, After throttle.BucketState
	// RemoteBlockStays: the bucket is balde's gate in front of SIFEN's
	// per-RUC interval. The reset ends balde's wait, not a block SIFEN
	// imposed after a 0301, nor a lot still on the wire.
	RemoteBlockStays bool
}

// CheckReset says, changing nothing, whether ResetBucket can reset key
// (ErrNotStored, ErrNoReason for a reason of spaces, or the store's
// error), and returns the bucket as it is: for a confirmation first.
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
// the audit trail as audit.CLIUser(actor) with reason and the tokens
// before and after ("balde buckets reset"). It refuses as CheckReset does,
// changing nothing; when only the audit entry failed, the error wraps
// ErrResetNotAudited.
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
