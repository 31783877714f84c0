package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
)

// shadow puts policy in shadow mode or back to enforcing
// (balde.Engine.SetShadow, docs/decisions/0200) and records it in the
// audit trail as cli:ACTOR with the reason. A DICT or SIFEN mirror policy
// is a usage error, and nothing changes.
func (b bucketsCmd) shadow(ctx context.Context, policy string, on bool, actor, reason string) error {
	if err := b.eng.CheckShadow(policy); err != nil {
		if errors.Is(err, balde.ErrShadowMirror) {
			return UsageError("buckets shadow: %s is a DICT or SIFEN mirror policy: shadow mode would spend the remote side's real allowance", policy)
		}
		return UsageError("buckets shadow: %v", err)
	}
	if err := b.eng.SetShadow(ctx, policy, on); err != nil {
		return err
	}
	if _, err := b.eng.Audit().Record(ctx, audit.Entry{User: audit.CLIUser(actor), Action: audit.ActionShadow,
		Target: policy, Reason: reason, Outcome: audit.ShadowOutcome(on)}); err != nil {
		return fmt.Errorf("buckets shadow: %s was switched but %w: %w", policy, balde.ErrResetNotAudited, err)
	}
	b.out.Shadow(policy, on, actor)
	return nil
}
