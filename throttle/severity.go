package throttle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Severity grades how much trouble a bucket is in, numbered for
// alerting: Healthy = 1, Medium, High, Critical. The zero value means
// "not known yet" (a bucket never written).
//
// Severity is computed at read time; the level stored in a bucket's row
// (Bucket.Severity) is the level last alerted on, the "previous level" of
// the hysteresis. A policy whose capacity or thresholds changed can make it
// better than the level now: see Limiter.Reevaluate.
type Severity uint8

const (
	SeverityUnknown Severity = iota
	SeverityHealthy
	SeverityMedium
	SeverityHigh
	SeverityCritical
)

var severityNames = []string{"Unknown", "Healthy", "Medium", "High", "Critical"}

// Severities lists the known levels, best first.
var Severities = []Severity{SeverityHealthy, SeverityMedium, SeverityHigh, SeverityCritical}

// String returns "Healthy", "Medium", "High", "Critical" or "Unknown".
func (s Severity) String() string { return name(severityNames, s, "Severity") }

// ParseSeverity is the inverse of String, case-insensitive ("critical").
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames[1:] {
		if strings.EqualFold(n, s) {
			return Severity(i + 1), nil
		}
	}
	return 0, fmt.Errorf("throttle: unknown severity %q (want healthy, medium, high or critical)", s)
}

// Grading says how severity applies to a policy's buckets.
type Grading uint8

const (
	// gradeAuto is GradeFill, except for a policy of capacity 1 with a
	// cooldown (SIFEN's lot reception: one lot per RUC every 10 s), which
	// is graded GradeCooldown: its only token is spent by every normal
	// send, so its fill says nothing about trouble.
	gradeAuto Grading = iota
	// gradeFill grades by the fill ratio (Thresholds), a block raising the
	// level to at least High.
	gradeFill
	// gradeCooldown grades a gate: Healthy while it works as designed
	// (ready, or cooling down after a send), High while blocked after a
	// refusal, Critical when the balance is negative.
	gradeCooldown
)

// String returns "auto", "fill" or "cooldown".
func (g Grading) String() string { return name([]string{"auto", "fill", "cooldown"}, g, "Grading") }

// Thresholds are the fill ratios, in percent of capacity, below which a
// bucket is Medium, High and Critical. They must satisfy
// 100 >= Medium >= High >= Critical >= 0.
//
// Recover is the hysteresis, in percentage points: a bucket leaves a level
// for a better one only when its fill is Recover points above that level's
// threshold, so a balance hovering around a threshold does not alert and
// recover on every request. 0 disables it; at most 50.
type Thresholds struct {
	Medium, High, Critical int64
	Recover                int64
}

// DefaultThresholds are 50 %, 25 % and 10 %, recovering 5 points above.
var DefaultThresholds = Thresholds{Medium: 50, High: 25, Critical: 10, Recover: 5}

// Validate reports whether the thresholds are ordered and within 0..100.
func (t Thresholds) Validate() error {
	if !(100 >= t.Medium && t.Medium >= t.High && t.High >= t.Critical && t.Critical >= 0) {
		return fmt.Errorf("throttle: severity thresholds must satisfy 100 >= medium >= high >= critical >= 0, got %d/%d/%d", t.Medium, t.High, t.Critical)
	}
	if t.Recover < 0 || t.Recover > 50 {
		return fmt.Errorf("throttle: severity hysteresis %d not in 0..50 points", t.Recover)
	}
	return nil
}

// shifted grades a balance of tokens out of capacity by fill alone, as if
// the fill were shift points lower. A negative balance is Critical.
func (t Thresholds) shifted(tokens, capacity, shift int64) Severity {
	// tokens/capacity - shift/100 < pct/100, in integers.
	below := func(pct int64) bool { return tokens*100 < capacity*(pct+shift) }
	switch {
	case tokens < 0 || below(t.Critical):
		return SeverityCritical
	case below(t.High):
		return SeverityHigh
	case below(t.Medium):
		return SeverityMedium
	}
	return SeverityHealthy
}

// grade is the severity of b, refilled to now, under p; prev is the level
// last stored for it (SeverityUnknown for none), from which the
// hysteresis is applied. The result is never worse than the level by fill
// alone.
func (t Thresholds) grade(p Policy, b Bucket, now time.Time, prev Severity) Severity {
	sev := SeverityHealthy
	switch {
	case p.Grading == gradeFill || p.Grading == gradeAuto && (p.Capacity != 1 || p.MinInterval == 0):
		sev = t.shifted(b.Tokens, p.Capacity, 0)
		if prev > sev && t.Recover > 0 {
			// Recovering: the level improves only as far as the fill clears
			// the thresholds by Recover points.
			sev = max(sev, min(prev, t.shifted(b.Tokens, p.Capacity, t.Recover)))
		}
	case b.Tokens < 0: // a gate (gradeCooldown)
		sev = SeverityCritical
	}
	if b.untilUnblocked(now) > 0 {
		sev = max(sev, SeverityHigh)
	}
	return sev
}

// Condition is what a bucket is doing besides its balance.
type Condition uint8

const (
	// ConditionAny matches every bucket in a filter; as a state it means
	// none of the others.
	ConditionAny Condition = iota
	// ConditionCoolingDown: the policy's minimum interval since the last
	// admitted request is running.
	ConditionCoolingDown
	// ConditionBlocked: the key refuses everything after a refusal.
	ConditionBlocked
	// ConditionNegative: the balance is below zero after a penalty.
	ConditionNegative
)

// String returns "", "cooling down", "blocked" or "negative".
func (c Condition) String() string {
	return name([]string{"", "cooling down", "blocked", "negative"}, c, "Condition")
}

// Param is the condition's name in URLs and flags: "cooling", "blocked",
// "negative" ("" for ConditionAny).
func (c Condition) Param() string {
	if c == ConditionCoolingDown {
		return "cooling"
	}
	return c.String()
}

// Has reports whether the bucket is in condition c (ConditionAny: always).
func (s BucketState) Has(c Condition) bool {
	switch c {
	case ConditionCoolingDown:
		return s.CooldownLeft > 0
	case ConditionBlocked:
		return s.BlockLeft > 0
	case ConditionNegative:
		return s.Tokens < 0
	}
	return true
}

// Condition is the bucket's most pressing condition: blocked, then
// negative, then cooling down; ConditionAny for none.
func (s BucketState) Condition() Condition {
	for _, c := range []Condition{ConditionBlocked, ConditionNegative, ConditionCoolingDown} {
		if s.Has(c) {
			return c
		}
	}
	return ConditionAny
}

// Trusted reports whether a row stored Healthy is Healthy now: a full
// regrade completed in this Limiter under the current policy definitions
// (Config.Definitions). Until then counts and severity filters re-grade
// every row (at most inspect.MaxScan).
func (l *Limiter) Trusted() bool {
	defs := l.trusted.Load()
	return defs != nil && *defs == l.defs()
}

// StoredState is the stored row b as seen at now: refilled and graded
// under its policy, or, for a row whose policy the resolver no longer
// knows, an orphan shown as stored, without refill.
func (l *Limiter) StoredState(b Bucket, now time.Time) BucketState {
	p, err := l.Policy(b.Key)
	if err != nil {
		return BucketState{Bucket: b, At: now, Stored: true, Orphan: true, Severity: b.Severity}
	}
	return l.state(b, p, true, now)
}

// scanPage is the store page size of a regrade.
const scanPage = 1000

// Reevaluate grades again the stored buckets that are not Healthy and
// writes the better levels refill brought them to, delivering each recovery
// once to the Notifier and the Observer like any transition (lazy refill
// writes nothing on its own). When the Limiter is not Trusted it runs a
// full regrade instead: every stored bucket, each level that differs
// written in either direction; once it completes the Limiter is Trusted
// under the definitions read at its start. It returns the number of
// buckets whose stored level changed.
func (l *Limiter) Reevaluate(ctx context.Context) (int, error) {
	if l.Trusted() {
		return l.regrade(ctx, SeverityMedium)
	}
	defs := l.defs()
	changed, err := l.regrade(ctx, SeverityUnknown)
	if err == nil {
		l.trusted.Store(&defs)
	}
	return changed, err
}

// regrade re-grades every stored row stored at least atLeast, a page of
// scanPage rows at a time, and writes the levels that changed in
// transactions of up to 100 rows. It returns how many stored levels
// changed.
func (l *Limiter) regrade(ctx context.Context, atLeast Severity) (int, error) {
	changed := 0
	err := l.pages(ctx, atLeast, scanPage, func(rows []Bucket) error {
		now := l.clock()
		var stale []BucketState
		for _, b := range rows {
			if s := l.StoredState(b, now); !s.Orphan && s.Severity != s.Bucket.Severity {
				stale = append(stale, s)
			}
		}
		for batch := range slices.Chunk(stale, 100) {
			n := 0
			err := l.update(ctx, keysOf(batch, func(s *BucketState) Key { return s.Key }), nil, func(tx *Tx) error {
				n = 0
				for _, s := range batch {
					tb := tx.bucket(s.Key, s.Policy)
					before := tb.b.Severity
					tx.touch(tb, s.Policy, l.rules.thresholds)
					if tb.b.Severity != before {
						n++
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			changed += n
		}
		return nil
	})
	if err != nil {
		return changed, fmt.Errorf("throttle: regrade: %w", err)
	}
	return changed, nil
}

// pages calls fn with each page of up to size stored rows stored at least
// atLeast, in key order, until fn fails or the rows run out.
func (l *Limiter) pages(ctx context.Context, atLeast Severity, size int, fn func([]Bucket) error) error {
	var after Key
	for {
		rows, err := l.store.Rows(ctx, after, atLeast, size)
		if err == nil && len(rows) > 0 {
			err = fn(rows)
		}
		if err != nil || len(rows) < size {
			return err
		}
		after = rows[len(rows)-1].Key
	}
}
