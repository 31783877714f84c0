package balde

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// ErrShadowMirror: a DICT or SIFEN policy cannot be put in shadow mode.
// Its bucket mirrors an allowance of the remote side: a request admitted
// past it would spend the real one (docs/decisions/0200).
var ErrShadowMirror = errors.New("a DICT or SIFEN mirror policy cannot be in shadow mode: a request it would refuse would spend the remote side's real allowance")

// shadows is the set of policies in shadow mode as last read from the
// database (balde_policies.shadow): every limiter of the engine reads it
// (throttle.Config.Shadow), each process reloads it (loadShadows).
type shadows struct {
	set atomic.Pointer[map[string]bool]
}

// has reports whether policy is in shadow mode.
func (s *shadows) has(policy string) bool {
	if m := s.set.Load(); m != nil {
		return (*m)[policy]
	}
	return false
}

// loadShadows reads the policies in shadow mode from the database. Run
// reloads them every Jobs.SeverityEvery, so a switch made by another
// process (balde buckets shadow) applies here within that period.
func (e *Engine) loadShadows(ctx context.Context) error {
	var names []string
	err := e.store.Retry(ctx, "load shadow policies", func() error {
		names = names[:0]
		return e.store.ReadDB().SelectContext(ctx, &names, `SELECT name FROM balde_policies WHERE shadow = 1`)
	})
	if err != nil {
		return fmt.Errorf("balde: policies in shadow mode: %w", err)
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	e.shadows.set.Store(&m)
	return nil
}

// InShadow reports whether policy is in shadow mode in this process: its
// refusals are recorded (ledger, metric, pages) and the requests admitted.
func (e *Engine) InShadow(policy string) bool { return e.shadows.has(policy) }

// ShadowPolicies lists the policies in shadow mode, sorted.
func (e *Engine) ShadowPolicies() []string {
	var out []string
	if m := e.shadows.set.Load(); m != nil {
		for n := range *m {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

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
// once in this process (see loadShadows for the others). It refuses as
// CheckShadow does, changing nothing; turning a policy off that is not on
// is not an error. The caller records it in the audit trail
// (audit.ActionShadow): the admin page does, balde buckets shadow does.
func (e *Engine) SetShadow(ctx context.Context, policy string, on bool) error {
	if err := e.CheckShadow(policy); err != nil {
		return err
	}
	flag := 0
	if on {
		flag = 1
	}
	db := e.store.DB()
	err := e.store.Retry(ctx, "set shadow", func() error {
		_, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO balde_policies (name, shadow) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET shadow = excluded.shadow`), policy, flag)
		return err
	})
	if err != nil {
		return fmt.Errorf("balde: shadow %s: %w", policy, err)
	}
	return e.loadShadows(ctx)
}
