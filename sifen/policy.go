package sifen

import (
	"cmp"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// PolicyRecepcionLote is the gate of siRecepLoteDE per (RUC, environment)
// (RecepcionKey): its bucket is the RUC's one state (docs/decisions/0050).
// A lot's result queries are a schedule, not a policy.
const PolicyRecepcionLote = "SIFEN_RECEPCION_LOTE"

const (
	// DefaultInterval is the least time between two lots of one RUC in one
	// environment (SIFEN_THROTTLE_SECONDS).
	DefaultInterval = 10 * time.Second
	// DefaultConsultaInterval is SenderConfig.ConsultaInterval's default
	// (DNIT's developer guide, 2024).
	DefaultConsultaInterval = 10 * time.Minute
)

// PolicyConfig sets SIFEN's throttle. The zero value: 10 s between lots of
// one RUC in either environment, no per-minute cap.
type PolicyConfig struct {
	// Interval is the least time between two lots of one RUC in one environment
	// (zero: DefaultInterval; the cooldown cannot be turned off). EnvInterval
	// overrides it per environment (30-60 s is prudent in prod).
	Interval    time.Duration
	EnvInterval map[Env]time.Duration
	// PerMinute, when positive, also caps a RUC's lots in one environment to
	// that many in any minute (at most throttle.MaxRollingCapacity).
	PerMinute int64
}

// validate reports a negative interval, an unknown environment or a
// per-minute cap out of range (wrapping throttle.ErrInvalidPolicy).
func (c PolicyConfig) validate() error {
	if c.Interval < 0 {
		return fmt.Errorf("%w: sifen: negative interval", throttle.ErrInvalidPolicy)
	}
	for env, d := range c.EnvInterval {
		if err := env.Validate(); err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("%w: sifen: negative interval for %s", throttle.ErrInvalidPolicy, env)
		}
	}
	if c.PerMinute < 0 || c.PerMinute > throttle.MaxRollingCapacity {
		return fmt.Errorf("%w: sifen: %d lots per minute (want 0..%d)", throttle.ErrInvalidPolicy, c.PerMinute, throttle.MaxRollingCapacity)
	}
	return nil
}

// intervalFor is the configured interval between two lots of a RUC in env.
func (c PolicyConfig) intervalFor(env Env) time.Duration {
	return cmp.Or(c.EnvInterval[env], c.Interval, DefaultInterval) // validated: none negative
}

// RecepcionPolicy is the policy of a RUC's lots in env, interval apart: one
// token refilling in exactly the interval, also its MinInterval, so a
// refusal reads "cooldown" (with PerMinute, a rolling window of PerMinute
// lots a minute). The Sender holds the key while a lot is on the wire and
// runs the interval from the answer (docs/decisions/0135). A refusal does
// not block; a block comes from 0301 only. It fails closed.
func (c PolicyConfig) RecepcionPolicy(interval time.Duration) throttle.Policy {
	p := throttle.Policy{
		Name:         PolicyRecepcionLote,
		Capacity:     1,
		RefillTokens: 1,
		RefillPeriod: interval,
		Refill:       throttle.RefillContinuous,
		MinInterval:  interval,
	}
	if c.PerMinute > 0 {
		p.Capacity, p.RefillTokens, p.RefillPeriod, p.Refill = c.PerMinute, c.PerMinute, time.Minute, throttle.RefillRolling
	}
	return p
}

// Resolver resolves SIFEN's policies for the throttle engine. Build it with
// NewResolver; combine it with other resolvers with throttle.Resolvers.
type Resolver struct {
	cfg PolicyConfig
	// shared is the database's interval per environment (test, prod) once a
	// Sender agreed it; the policy's is the larger of it and cfg's.
	shared [2]atomic.Int64
}

var _ throttle.Resolver = (*Resolver)(nil)

// NewResolver returns the Resolver of cfg, or cfg's validation error.
func NewResolver(cfg PolicyConfig) (*Resolver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Resolver{cfg: cfg}, nil
}

// Resolve implements throttle.Resolver: another policy is
// throttle.ErrUnknownPolicy; a bad environment or RUC throttle.ErrInvalidKey.
func (r *Resolver) Resolve(key throttle.Key) (throttle.Policy, error) {
	if key.Policy != PolicyRecepcionLote {
		return throttle.Policy{}, fmt.Errorf("%w: %q", throttle.ErrUnknownPolicy, key.Policy)
	}
	env := Env(key.Env)
	if err := cmp.Or(env.Validate(), ValidateRUCNumber(key.Identifier)); err != nil {
		return throttle.Policy{}, fmt.Errorf("%w: %s: %w", throttle.ErrInvalidKey, key, err)
	}
	return r.cfg.RecepcionPolicy(r.interval(env)), nil
}

// interval is the interval between two lots of one RUC in env: the
// configured one, or the database's when that is stricter.
func (r *Resolver) interval(env Env) time.Duration {
	return max(r.cfg.intervalFor(env), time.Duration(r.shared[envIndex(env)].Load()))
}

func envIndex(env Env) int {
	if env == EnvProd {
		return 1
	}
	return 0
}

// RecepcionKey is the throttle key of lots of ruc in env.
func RecepcionKey(env Env, ruc RUC) throttle.Key {
	return throttle.Key{Policy: PolicyRecepcionLote, Env: string(env), Identifier: ruc.Number}
}

// validateLotNumber checks a lot number (dProtConsLote): 1 to 20 digits
// (ErrInvalidLotNumber).
func validateLotNumber(n string) error {
	if len(n) < 1 || len(n) > 20 || !isDigits(n) {
		return fmt.Errorf("%w: %q", ErrInvalidLotNumber, n)
	}
	return nil
}
