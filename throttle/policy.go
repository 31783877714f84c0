package throttle

import (
	"fmt"
	"slices"
	"time"
)

// RefillMode says how a bucket gets its tokens back.
type RefillMode uint8

const (
	// RefillContinuous adds tokens continuously at RefillTokens per
	// RefillPeriod: one token every RefillPeriod/RefillTokens. Fractions of a
	// token are carried exactly (see Bucket.Carry), so a thousand reads one
	// millisecond apart leave the same balance as one read a second later.
	RefillContinuous RefillMode = iota
	// RefillStepwise adds RefillTokens at once at the end of every whole
	// RefillPeriod, counted from the moment the bucket stopped being full.
	// It is never more generous than RefillContinuous, which is why the DICT
	// catalog uses it by default.
	RefillStepwise
	// RefillRolling returns each spent token exactly RefillPeriod after it was
	// spent: at most Capacity tokens are spent in any window of RefillPeriod.
	// This is an exact sliding-window log (docs/decisions/0006); RefillTokens must equal
	// Capacity.
	RefillRolling
)

// String returns "continuous", "stepwise" or "rolling".
func (m RefillMode) String() string { return name(refillNames, m, "RefillMode") }

var refillNames = []string{"continuous", "stepwise", "rolling"}

// ParseRefillMode is the inverse of RefillMode.String; it also takes ""
// for continuous and "window" or "sliding-window" for rolling.
func ParseRefillMode(s string) (RefillMode, error) {
	switch s {
	case "":
		return RefillContinuous, nil
	case "window", "sliding-window":
		return RefillRolling, nil
	}
	if i := slices.Index(refillNames, s); i >= 0 {
		return RefillMode(i), nil
	}
	return 0, fmt.Errorf("%w: refill mode %q (want continuous, stepwise or rolling)", ErrInvalidPolicy, s)
}

// FailMode says what a decision does when the store cannot answer.
type FailMode uint8

const (
	// FailClosed refuses: Take returns an error wrapping ErrStoreUnavailable.
	// It is the zero value, so a policy fails closed unless it says otherwise.
	FailClosed FailMode = iota
	// FailOpen admits the request, marks the Decision FailOpen, logs it and
	// counts it (Observer.FailOpen).
	FailOpen
)

// String returns "closed" or "open".
func (m FailMode) String() string { return name([]string{"closed", "open"}, m, "FailMode") }

// Policy describes one kind of bucket: how big it is, how fast it refills,
// and the extra rules (cooldown, block) that apply to every key under it.
// A Policy is a value; two keys with the same policy name may resolve to
// different Policies (the DICT's PF and PJ users, for example).
type Policy struct {
	// Name identifies the policy in keys, the database and the DICT's XML,
	// e.g. "ENTRIES_READ_USER_ANTISCAN".
	Name string
	// Capacity is the bucket size in whole tokens (> 0). A new or idle bucket
	// is full.
	Capacity int64
	// RefillTokens tokens are added per RefillPeriod (both > 0).
	RefillTokens int64
	RefillPeriod time.Duration
	// Refill is the refill mode; the zero value is RefillContinuous.
	Refill RefillMode
	// MinInterval is the cooldown: the least time between two admitted
	// requests on one key (SIFEN: 10 s per RUC and environment). 0 disables it.
	MinInterval time.Duration
	// BlockFor is how long a key refuses everything after one of its requests
	// was refused for lack of tokens or for the cooldown. 0 disables it.
	BlockFor time.Duration
	// FailMode is what Take does when the store is unavailable.
	FailMode FailMode
	// Grading says how severity applies to the policy's buckets; the zero
	// value, GradeAuto, grades by fill except for a one-token cooldown gate.
	Grading Grading
	// Ledger says how the policy's routine takes are written to the ledger
	// (LedgerAggregateTakes, LedgerNoTakes), overriding Config.Ledger;
	// LedgerDefault keeps the Limiter's. Refusals and adjustments are
	// written whatever it says.
	Ledger LedgerGranularity
	// RollingGrain, under RefillRolling, stamps each spend at the end of
	// its grain (rounded up to a multiple of RollingGrain since the Unix
	// epoch): a spent token comes back between RefillPeriod and
	// RefillPeriod+RollingGrain after it, still at most Capacity requests in
	// any window, and the bucket holds at most RefillPeriod/RollingGrain+1
	// spends (docs/decisions/0110-inbound-fixed-size-window.md). 0 keeps the
	// exact instants. At most RefillPeriod.
	RollingGrain time.Duration
}

// PerMinute returns a continuous-refill policy of n tokens per minute with
// the given capacity, the shape of most of the DICT's table.
func PerMinute(name string, n, capacity int64) Policy {
	return Policy{Name: name, Capacity: capacity, RefillTokens: n, RefillPeriod: time.Minute}
}

// Validate reports whether p can describe a bucket. The error wraps
// ErrInvalidPolicy and names the field at fault.
func (p Policy) Validate() error {
	switch {
	case !validName(p.Name, MaxPolicyLen):
		return fmt.Errorf("%w: name %q", ErrInvalidPolicy, p.Name)
	case p.Capacity <= 0 || p.Capacity > MaxTokens:
		return fmt.Errorf("%w: %s: capacity %d not in 1..%d", ErrInvalidPolicy, p.Name, p.Capacity, int64(MaxTokens))
	case p.RefillTokens <= 0 || p.RefillTokens > MaxTokens:
		return fmt.Errorf("%w: %s: refill tokens %d not in 1..%d", ErrInvalidPolicy, p.Name, p.RefillTokens, int64(MaxTokens))
	case p.RefillPeriod <= 0:
		return fmt.Errorf("%w: %s: refill period %s not positive", ErrInvalidPolicy, p.Name, p.RefillPeriod)
	case p.Refill > RefillRolling:
		return fmt.Errorf("%w: %s: refill mode %d", ErrInvalidPolicy, p.Name, p.Refill)
	case p.Refill == RefillRolling && p.RefillTokens != p.Capacity:
		return fmt.Errorf("%w: %s: a rolling window refills its whole capacity (refill tokens %d, capacity %d)", ErrInvalidPolicy, p.Name, p.RefillTokens, p.Capacity)
	case p.Refill == RefillRolling && p.Capacity > MaxRollingCapacity:
		return fmt.Errorf("%w: %s: a rolling window holds at most %d tokens", ErrInvalidPolicy, p.Name, MaxRollingCapacity)
	case p.RollingGrain < 0 || p.RollingGrain > 0 && (p.Refill != RefillRolling || p.RollingGrain > p.RefillPeriod):
		return fmt.Errorf("%w: %s: rolling grain %s: only a rolling window has one, at most its period", ErrInvalidPolicy, p.Name, p.RollingGrain)
	case p.MinInterval < 0 || p.BlockFor < 0:
		return fmt.Errorf("%w: %s: negative cooldown or block", ErrInvalidPolicy, p.Name)
	case p.Grading > gradeCooldown:
		return fmt.Errorf("%w: %s: grading %d", ErrInvalidPolicy, p.Name, p.Grading)
	case p.FailMode > FailOpen:
		return fmt.Errorf("%w: %s: fail mode %d", ErrInvalidPolicy, p.Name, p.FailMode)
	case p.Ledger > LedgerNoTakes:
		return fmt.Errorf("%w: %s: ledger granularity %d", ErrInvalidPolicy, p.Name, p.Ledger)
	}
	return nil
}

// Rate renders the refill, e.g. "2/min", "40/day", "1/10s".
func (p Policy) Rate() string {
	return fmt.Sprintf("%d/%s", p.RefillTokens, periodString(p.RefillPeriod))
}

// String renders p for logs and pages, e.g.
// "ENTRIES_READ_USER_ANTISCAN: 2/min (capacity 100, stepwise)".
func (p Policy) String() string {
	s := fmt.Sprintf("%s: %s (capacity %d, %s", p.Name, p.Rate(), p.Capacity, p.Refill)
	if p.MinInterval > 0 {
		s += fmt.Sprintf(", every %s at most", p.MinInterval)
	}
	if p.BlockFor > 0 {
		s += fmt.Sprintf(", block %s", p.BlockFor)
	}
	if p.FailMode == FailOpen {
		s += ", fail open"
	}
	return s + ")"
}

func periodString(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "min"
	case time.Hour:
		return "h"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

// Limits on sizes, chosen so that every product in the math fits in 128 bits
// and every stored value in a signed 64-bit column.
const (
	// MaxTokens bounds capacities, refills, costs and deltas (10^12 tokens).
	MaxTokens = 1_000_000_000_000
	// MaxRollingCapacity bounds a rolling window's capacity: its state keeps
	// one timestamp per outstanding token.
	MaxRollingCapacity = 10_000
	// MaxPolicyLen, MaxEnvLen and MaxIdentifierLen bound a Key's parts, in bytes.
	MaxPolicyLen     = 64
	maxEnvLen        = 16
	maxIdentifierLen = 128
)
