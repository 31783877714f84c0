package sifen

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// PolicyRecepcionLote, SIFEN's throttle policy, is the gate of
// siRecepLoteDE per (RUC, environment): the key's Identifier is the RUC
// number without check digit, its Env "test" or "prod" (see RecepcionKey).
// Its bucket is the RUC's one state (docs/decisions/0050). A lot's result
// queries (siConsLoteDE) are a schedule of the lot, not a policy.
const PolicyRecepcionLote = "SIFEN_RECEPCION_LOTE"

const (
	// DefaultInterval is the least time between two lots of one RUC in one
	// environment (SIFEN_THROTTLE_SECONDS).
	DefaultInterval = 10 * time.Second
	// DefaultConsultaInterval is the least time between two queries of one
	// lot, and between a lot's send and its first query (DNIT's developer
	// guide, 2024): SenderConfig.ConsultaInterval.
	DefaultConsultaInterval = 10 * time.Minute
)

// PolicyConfig sets SIFEN's throttle. The zero value is the default: 10 s
// between lots of one RUC in either environment, no per-minute cap.
type PolicyConfig struct {
	// Interval is the least time between two lots of one RUC in one
	// environment. Zero means DefaultInterval; there is no way to turn the
	// cooldown off.
	Interval time.Duration
	// EnvInterval overrides Interval for one environment, e.g.
	// {EnvProd: 45 * time.Second} (30-60 s is the prudent range in prod).
	EnvInterval map[Env]time.Duration
	// PerMinute, when positive, also caps the lots of one RUC in one
	// environment to that many in any window of one minute (at most
	// throttle.MaxRollingCapacity).
	PerMinute int64
}

// Validate reports a negative interval, an unknown environment or a
// per-minute cap out of range (errors wrap throttle.ErrInvalidPolicy).
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

// intervalFor is the configured interval between two lots of one RUC in
// env.
func (c PolicyConfig) intervalFor(env Env) time.Duration {
	if d := c.EnvInterval[env]; d > 0 {
		return d
	}
	if c.Interval > 0 {
		return c.Interval
	}
	return DefaultInterval
}

// RecepcionPolicy is the policy of lots of one RUC in env, interval apart:
// a gate of one token that refills in exactly the interval, which is also
// its MinInterval, so that it never refuses before the cooldown does and a
// refusal reads "cooldown" (with PerMinute > 0, a rolling window of
// PerMinute lots in any 60 s). The take's interval is never the binding
// one: the Sender holds the key while the lot is on the wire and sets
// NextAt to the answer plus the interval (docs/decisions/0135). A refusal
// does not block (waiting is free); a block comes from SIFEN's 0301 only.
// It fails closed.
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
	// shared is the interval of the database per environment (test, prod)
	// once a Sender agreed it (Sender's doc): the policy's interval is the
	// larger of it and cfg's, so the Sender and every view of this process
	// read one interval.
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

// Resolve implements throttle.Resolver. A key of another policy is
// throttle.ErrUnknownPolicy; a SIFEN key with an environment other than
// test or prod or a malformed RUC is throttle.ErrInvalidKey.
func (r *Resolver) Resolve(key throttle.Key) (throttle.Policy, error) {
	if key.Policy != PolicyRecepcionLote {
		return throttle.Policy{}, fmt.Errorf("%w: %q", throttle.ErrUnknownPolicy, key.Policy)
	}
	env := Env(key.Env)
	if err := env.Validate(); err != nil {
		return throttle.Policy{}, fmt.Errorf("%w: %s: %w", throttle.ErrInvalidKey, key, err)
	}
	if err := ValidateRUCNumber(key.Identifier); err != nil {
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

// validateLotNumber checks a lot number (dProtConsLote): 1 to 20 digits,
// kept as a string (SIFEN's are 17 digits and more than a float holds).
// The error wraps ErrInvalidLotNumber.
func validateLotNumber(n string) error {
	if len(n) < 1 || len(n) > 20 || !isDigits(n) {
		return fmt.Errorf("%w: %q", ErrInvalidLotNumber, n)
	}
	return nil
}
