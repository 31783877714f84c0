package balde

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// ErrShadowMirror: a DICT or SIFEN policy cannot be put in shadow mode.
// Its bucket mirrors an allowance of the remote side: a request admitted
// past it would spend the real one (docs/decisions/0200).
var ErrShadowMirror = errors.New("a DICT or SIFEN mirror policy cannot be in shadow mode: a request it would refuse would spend the remote side's real allowance")

// InShadow reports whether policy is in shadow mode in this process: its
// refusals are recorded (ledger, metric, pages) and the requests admitted.
func (e *Engine) InShadow(policy string) bool { return e.shadows.Has(policy) }

// ShadowPolicies lists the policies in shadow mode, sorted.
func (e *Engine) ShadowPolicies() []string { return e.shadows.List() }

// CheckShadow says, changing nothing, whether policy may be put in shadow
// mode: a valid policy name (throttle.ErrInvalidKey otherwise) that is
// not a DICT or SIFEN mirror policy (ErrShadowMirror). An application's
// own policy (Config.Resolvers) or an inbound rule may be, and so may a
// name no bucket uses yet, before the policy ships.
func (e *Engine) CheckShadow(policy string) error {
	if err := (throttle.Key{Policy: policy, Env: "-", Identifier: "-"}).Validate(); err != nil {
		return err
	}
	if policy == sifen.PolicyRecepcionLote || slices.ContainsFunc(e.catalog.Specs(), func(s dict.Spec) bool { return s.Name == policy }) {
		return fmt.Errorf("%w: %s", ErrShadowMirror, policy)
	}
	return nil
}

// SetShadow turns policy's shadow mode on or off, in the database and at
// once in this process (the others within Jobs.SeverityEvery). It refuses as
// CheckShadow does, changing nothing; turning a policy off that is not on
// is not an error. The caller records it in the audit trail
// (audit.ActionShadow): the admin page does, balde buckets shadow does.
func (e *Engine) SetShadow(ctx context.Context, policy string, on bool) error {
	if err := e.CheckShadow(policy); err != nil {
		return err
	}
	return e.shadows.Save(ctx, e.store, policy, on)
}
