package throttle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Severity grades how much trouble a bucket is in, after seed 003's
// AlertSeverity: Healthy = 1, Medium, High, Critical. The zero value means
// "not known yet" (a bucket never written).
//
// Severity is always computed at read time (BucketState.Severity, the
// admin pages, the API, /metrics); the level stored in a bucket's row
// (Bucket.Severity) is the level last alerted on. It caches the read-time
// value for counting and is the "previous level" of the hysteresis, never
// the answer: under an unchanged policy refill only improves a bucket, so
// the stored level is never better than the level now. A policy whose
// capacity, grading or thresholds changed breaks that (45 tokens are
// Healthy out of 50, Critical out of 50,000): see Limiter.Regrade.
type Severity uint8

const (
	SeverityUnknown Severity = iota
	SeverityHealthy
	SeverityMedium
	SeverityHigh
	SeverityCritical
)

var severityNames = [...]string{"Unknown", "Healthy", "Medium", "High", "Critical"}

// Severities lists the known levels, best first.
var Severities = []Severity{SeverityHealthy, SeverityMedium, SeverityHigh, SeverityCritical}

// String returns "Healthy", "Medium", "High", "Critical" or "Unknown".
func (s Severity) String() string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("Severity(%d)", uint8(s))
}

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
	// GradeAuto is GradeFill, except for a policy of capacity 1 with a
	// cooldown (SIFEN's lot reception: one lot per RUC every 10 s), which
	// is graded GradeCooldown: its only token is spent by every normal
	// send, so its fill says nothing about trouble.
	GradeAuto Grading = iota
	// GradeFill grades by the fill ratio (Thresholds), a block raising the
	// level to at least High.
	GradeFill
	// GradeCooldown grades a gate: Healthy while it works as designed
	// (ready, or cooling down after a send), High while blocked after a
	// refusal, Critical when the balance is negative.
	GradeCooldown
)

// String returns "auto", "fill" or "cooldown".
func (g Grading) String() string {
	switch g {
	case GradeAuto:
		return "auto"
	case GradeFill:
		return "fill"
	case GradeCooldown:
		return "cooldown"
	}
	return fmt.Sprintf("Grading(%d)", uint8(g))
}

// EffectiveGrading resolves GradeAuto for p.
func (p Policy) EffectiveGrading() Grading {
	if p.Grading != GradeAuto {
		return p.Grading
	}
	if p.Capacity == 1 && p.MinInterval > 0 {
		return GradeCooldown
	}
	return GradeFill
}

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

// Of grades a balance of tokens out of capacity by fill alone, without
// hysteresis. A negative balance is Critical.
func (t Thresholds) Of(tokens, capacity int64) Severity {
	return t.shifted(tokens, capacity, 0)
}

// shifted grades as if the fill were shift points lower.
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

// Grade is the severity of b, refilled to now, under p; prev is the level
// last stored for it (SeverityUnknown for none), from which the
// hysteresis is applied. The result is never worse than the level by fill
// alone.
func (t Thresholds) Grade(p Policy, b Bucket, now time.Time, prev Severity) Severity {
	blocked := b.UntilUnblocked(now) > 0
	if p.EffectiveGrading() == GradeCooldown {
		switch {
		case b.Tokens < 0:
			return SeverityCritical
		case blocked:
			return SeverityHigh
		}
		return SeverityHealthy
	}
	sev := t.Of(b.Tokens, p.Capacity)
	if prev > sev && t.Recover > 0 {
		// Recovering: the level improves only as far as the fill clears
		// the thresholds by Recover points.
		sev = max(sev, min(prev, t.shifted(b.Tokens, p.Capacity, t.Recover)))
	}
	if blocked {
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
	switch c {
	case ConditionCoolingDown:
		return "cooling down"
	case ConditionBlocked:
		return "blocked"
	case ConditionNegative:
		return "negative"
	}
	return ""
}

// Param is the condition's name in URLs and flags: "cooling", "blocked",
// "negative" ("" for ConditionAny).
func (c Condition) Param() string {
	if c == ConditionCoolingDown {
		return "cooling"
	}
	return c.String()
}

// ParseCondition is the inverse of Param; it also accepts "cooldown" and
// "cooling down".
func ParseCondition(s string) (Condition, error) {
	switch s {
	case "":
		return ConditionAny, nil
	case "cooling", "cooldown", "cooling down", "cooling-down":
		return ConditionCoolingDown, nil
	case "blocked":
		return ConditionBlocked, nil
	case "negative":
		return ConditionNegative, nil
	}
	return 0, fmt.Errorf("throttle: unknown state %q (want blocked, cooling or negative)", s)
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

// matches reports whether s passes f's read-time filters.
func (f Filter) matches(s BucketState) bool {
	return (f.Severity == SeverityUnknown || s.Severity == f.Severity) && s.Has(f.Condition)
}

// readTime reports whether f has filters only a read can apply.
func (f Filter) readTime() bool {
	return f.Severity != SeverityUnknown || f.Condition != ConditionAny
}

// prefilter narrows f for the store. When trusted (see Limiter.Regrade) a
// level now is never worse than the level stored, so a bucket Medium or
// worse now is stored at least that bad; otherwise the severity filter
// reads every row. Blocked and negative buckets are stored at least High
// in any case: a block or a negative balance is written, and every grading
// rates it High or worse.
func (f Filter) prefilter(trusted bool) Filter {
	if f.Severity > SeverityHealthy && trusted {
		f.MinSeverity = max(f.MinSeverity, f.Severity)
	}
	if f.Condition == ConditionBlocked || f.Condition == ConditionNegative {
		f.MinSeverity = max(f.MinSeverity, SeverityHigh)
	}
	return f
}

// trust records the policy definitions under which every stored level was
// last graded by Regrade.
type trust struct {
	mu   sync.Mutex
	ok   bool
	defs string
}

// Trusted reports whether a row stored Healthy is Healthy now: a Regrade
// completed in this Limiter under the policy definitions in effect
// (Config.Definitions). Until then counts and severity filters re-grade
// every row (at most MaxScan) instead of only those stored worse.
func (l *Limiter) Trusted() bool {
	defs := l.defs()
	l.trust.mu.Lock()
	defer l.trust.mu.Unlock()
	return l.trust.ok && l.trust.defs == defs
}

// MaxScan bounds the stored rows one listing or count reads to apply the
// read-time filters; past it a Page is Partial.
const MaxScan = 100_000

// scanPage is the store page size of a scan.
const scanPage = 1000

// scan reads the stored rows matching f from f.After on, refilled to now,
// and calls fn for each until fn returns false or MaxScan rows were read;
// it returns the key of the last row read and whether it stopped at the
// cap before the end.
func (l *Limiter) scan(ctx context.Context, f Filter, fn func(BucketState) bool) (last Key, capped bool, err error) {
	f = f.prefilter(l.Trusted())
	f.Limit = scanPage
	read := 0
	for {
		rows, err := l.store.List(ctx, f)
		if err != nil {
			return last, false, fmt.Errorf("throttle: scan: %w", err)
		}
		now := l.clock()
		for _, b := range rows {
			last = b.Key
			read++
			if !fn(l.stateOf(b, now)) {
				return last, false, nil
			}
			if read >= MaxScan {
				return last, true, nil
			}
		}
		if len(rows) < scanPage {
			return last, false, nil
		}
		f.After = rows[len(rows)-1].Key
	}
}

// stateOf is a stored row as seen at now (an orphan when its policy is
// unknown).
func (l *Limiter) stateOf(b Bucket, now time.Time) BucketState {
	p, err := l.Policy(b.Key)
	if err != nil {
		return BucketState{Bucket: b, At: now, Stored: true, Orphan: true, Severity: b.Severity}
	}
	return l.state(b, p, true, now)
}

// listMatching is List for a filter with read-time parts: it scans until
// it has a page (and one more row, to know there is a next page).
func (l *Limiter) listMatching(ctx context.Context, f Filter, want int) (Page, error) {
	var page Page
	var more bool
	last, capped, err := l.scan(ctx, f, func(s BucketState) bool {
		if !f.matches(s) {
			return true
		}
		if len(page.States) == want {
			more = true
			return false
		}
		page.States = append(page.States, s)
		return true
	})
	if err != nil {
		return Page{}, err
	}
	if err := l.recallLastSends(ctx, page.States); err != nil {
		return Page{}, err
	}
	switch {
	case more:
		page.Next = EncodeCursor(page.States[len(page.States)-1].Key)
	case capped:
		// Stopped at the cap: the next page resumes after the last row read.
		page.Next, page.Partial = EncodeCursor(last), true
	}
	return page, nil
}

// ListAll returns every stored bucket matching f (from f.After on, Limit
// ignored), refilled to now, reading at most MaxScan rows; partial is set
// when it stopped there.
func (l *Limiter) ListAll(ctx context.Context, f Filter) (states []BucketState, partial bool, err error) {
	_, partial, err = l.scan(ctx, f, func(s BucketState) bool {
		if f.matches(s) {
			states = append(states, s)
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return states, partial, l.recallLastSends(ctx, states)
}

// SortBy names an order of bucket states for SortStates.
type SortBy string

const (
	SortKey      SortBy = "key"       // policy, env, identifier (the store's order)
	SortSeverity SortBy = "severity"  // worst first, then the emptiest
	SortLastSend SortBy = "last_send" // most recent send first
	SortTokens   SortBy = "tokens"    // the emptiest (by fill) first
)

// ParseSortBy reads a sort order; "" is SortKey; "last-send" and
// "lastsend" are accepted for SortLastSend.
func ParseSortBy(s string) (SortBy, error) {
	switch s {
	case "", "key":
		return SortKey, nil
	case "severity":
		return SortSeverity, nil
	case "last_send", "last-send", "lastsend":
		return SortLastSend, nil
	case "tokens", "fill":
		return SortTokens, nil
	}
	return "", fmt.Errorf("throttle: unknown sort %q (want key, severity, last_send or tokens)", s)
}

// SortStates orders states in place by by; ties keep the key order.
func SortStates(states []BucketState, by SortBy) {
	fill := func(s BucketState) int64 { // per mille, negative below 0
		if s.Policy.Capacity <= 0 {
			return 1000
		}
		return s.Tokens * 1000 / s.Policy.Capacity
	}
	slices.SortStableFunc(states, func(a, b BucketState) int {
		switch by {
		case SortSeverity:
			if a.Severity != b.Severity {
				return int(b.Severity) - int(a.Severity)
			}
			if c := a.Condition(); c != b.Condition() {
				return int(b.Condition()) - int(c)
			}
			if fa, fb := fill(a), fill(b); fa != fb {
				return cmpInt(fa, fb)
			}
		case SortLastSend:
			if c := b.LastSentAt.Compare(a.LastSentAt); c != 0 {
				return c
			}
		case SortTokens:
			if fa, fb := fill(a), fill(b); fa != fb {
				return cmpInt(fa, fb)
			}
		}
		return a.Key.Compare(b.Key)
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SeverityCounts is how many stored buckets are at each level now, and in
// which condition.
type SeverityCounts struct {
	// BySeverity counts buckets by their level now.
	BySeverity map[Severity]int64
	Total      int64
	// Blocked and Negative count buckets in that condition now.
	Blocked, Negative int64
	// Rechecked is how many rows were re-graded (those stored worse than
	// Healthy when Trusted, every row otherwise); Partial is set when there
	// were more than MaxScan of them and the rest are counted at their
	// stored level.
	Rechecked int64
	Partial   bool
	// Worst is, per policy, the state of its emptiest bucket among those
	// re-graded that are or were stored worse than Healthy (by fill; absent
	// for a policy whose buckets are all Healthy now and stored so).
	Worst map[string]BucketState
	// ByPolicy breaks down, per policy, the buckets re-graded at a level
	// worse than Healthy now and those blocked or negative now (the rows
	// Blocked and Negative count), so that a view can tell a participant's
	// bucket from an end user's. Healthy buckets are not broken down (rows
	// stored Healthy are not read when Trusted); with Partial, the rows not
	// re-graded are missing here too.
	ByPolicy map[string]PolicyCounts
	At       time.Time
}

// PolicyCounts is one policy's part of SeverityCounts.ByPolicy.
type PolicyCounts struct {
	// Worse counts the policy's buckets by their level now, for the
	// levels worse than Healthy.
	Worse             map[Severity]int64
	Blocked, Negative int64
}

// CountNow counts the stored buckets matching f by their severity now.
// When Trusted, rows stored Healthy are Healthy now (refill never makes a
// bucket worse) and only the others are read and graded again; otherwise
// (no Regrade yet, or the policy definitions changed since) every row is,
// so a row stored Healthy under a smaller capacity is counted at its level
// now. Either way a bucket that refilled since its last write is counted
// at its level now, not the stored one.
func (l *Limiter) CountNow(ctx context.Context, f Filter) (SeverityCounts, error) {
	f.Severity, f.Condition, f.After = SeverityUnknown, ConditionAny, Key{}
	trusted := l.Trusted()
	stored, err := l.store.CountBySeverity(ctx, f)
	if err != nil {
		return SeverityCounts{}, fmt.Errorf("throttle: count buckets: %w", err)
	}
	c := SeverityCounts{BySeverity: make(map[Severity]int64), Worst: make(map[string]BucketState),
		ByPolicy: make(map[string]PolicyCounts), At: l.clock()}
	for sev, n := range stored {
		c.Total += n
		if sev == SeverityUnknown {
			sev = SeverityHealthy
		}
		c.BySeverity[sev] += n
	}
	g := f
	if trusted {
		g.MinSeverity = max(f.MinSeverity, SeverityMedium)
	}
	_, capped, err := l.scan(ctx, g, func(s BucketState) bool {
		c.Rechecked++
		c.BySeverity[max(s.Bucket.Severity, SeverityHealthy)]--
		c.BySeverity[max(s.Severity, SeverityHealthy)]++
		pc := c.ByPolicy[s.Key.Policy]
		if s.Severity > SeverityHealthy {
			if pc.Worse == nil {
				pc.Worse = make(map[Severity]int64)
			}
			pc.Worse[s.Severity]++
		}
		if s.Has(ConditionBlocked) {
			c.Blocked++
			pc.Blocked++
		}
		if s.Has(ConditionNegative) {
			c.Negative++
			pc.Negative++
		}
		if pc.Worse != nil || pc.Blocked > 0 || pc.Negative > 0 {
			c.ByPolicy[s.Key.Policy] = pc
		}
		if !s.Orphan && max(s.Severity, s.Bucket.Severity) > SeverityHealthy {
			if w, ok := c.Worst[s.Key.Policy]; !ok || s.Tokens*w.Policy.Capacity < w.Tokens*s.Policy.Capacity {
				c.Worst[s.Key.Policy] = s
			}
		}
		return true
	})
	if err != nil {
		return SeverityCounts{}, err
	}
	c.Partial = capped
	return c, nil
}

// Reevaluate grades again the stored buckets that are not Healthy and
// writes the better levels refill brought them to, so that the recovery is
// delivered once, like any transition, to the Notifier (To better than
// From; To Healthy is the "resolved" event) and the Observer. Lazy refill
// writes nothing on its own: without this, a bucket that recovers while
// nobody sends would stay alerted. When the Limiter is not Trusted it runs
// Regrade instead (every row). serve calls it periodically. It returns the
// number of buckets whose stored level changed.
func (l *Limiter) Reevaluate(ctx context.Context) (int, error) {
	if !l.Trusted() {
		return l.Regrade(ctx)
	}
	return l.regrade(ctx, Filter{MinSeverity: SeverityMedium})
}

// Regrade grades again every stored bucket under the policies in effect
// and writes each level that differs from the stored one, in either
// direction, through the same transactions as any change (so a row stored
// Healthy under a capacity of 50 that holds 45 tokens of 50,000 now is
// written Critical and alerted once). It reads every row, a page of
// scanPage at a time, and writes only the rows that changed. Once it
// completes the Limiter is Trusted under the definitions read at its
// start, until Config.Definitions returns another value. It returns the
// number of buckets whose stored level changed.
func (l *Limiter) Regrade(ctx context.Context) (int, error) {
	defs := l.defs()
	changed, err := l.regrade(ctx, Filter{})
	if err != nil {
		return changed, err
	}
	l.trust.mu.Lock()
	l.trust.ok, l.trust.defs = true, defs
	l.trust.mu.Unlock()
	return changed, nil
}

// regrade re-grades every stored row matching f (no read-time filters;
// not capped at MaxScan) and writes the levels that changed.
func (l *Limiter) regrade(ctx context.Context, f Filter) (int, error) {
	changed := 0
	for {
		var keys []Key
		var policies []Policy
		last, capped, err := l.scan(ctx, f, func(s BucketState) bool {
			if !s.Orphan && s.Severity != s.Bucket.Severity {
				keys, policies = append(keys, s.Key), append(policies, s.Policy)
			}
			return true
		})
		if err != nil {
			return changed, err
		}
		n, err := l.writeGrades(ctx, keys, policies)
		changed += n
		if err != nil || !capped {
			return changed, err
		}
		f.After = last
	}
}

// writeGrades grades keys again in transactions of up to 100 keys and
// returns how many stored levels changed.
func (l *Limiter) writeGrades(ctx context.Context, keys []Key, policies []Policy) (int, error) {
	changed := 0
	const batch = 100
	for i := 0; i < len(keys); i += batch {
		ks, ps := keys[i:min(i+batch, len(keys))], policies[i:min(i+batch, len(keys))]
		n := 0
		err := l.update(ctx, ks, nil, func(tx *Tx) error {
			n = 0
			for j, k := range ks {
				tb := tx.bucket(k, ps[j])
				before := tb.b.Severity
				tx.touch(tb, ps[j], l.rules.thresholds)
				if tb.b.Severity != before {
					n++
				}
			}
			return nil
		})
		if err != nil {
			return changed, fmt.Errorf("throttle: regrade: %w", err)
		}
		changed += n
	}
	return changed, nil
}
