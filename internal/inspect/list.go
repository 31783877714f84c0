package inspect

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Page is one page of a bucket listing.
type Page struct {
	States []throttle.BucketState
	// Next is the cursor of the following page ("" on the last page); pass
	// it to DecodeCursor and then as Filter.After.
	Next string
	// Partial is set when a read-time filter (Filter.Severity, Condition)
	// read MaxScan rows without filling the page: Next resumes the scan.
	Partial bool
}

// Page sizes for List.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// MaxScan bounds the stored rows one listing or count reads to apply the
// read-time filters; past it a Page is Partial.
const MaxScan = 100_000

// scanPage is the store page size of a scan.
const scanPage = 1000

// List returns the stored buckets matching f, refilled to now, one page at a
// time (keyset pagination: the cost of a page does not grow with its depth).
func (r *Reader) List(ctx context.Context, f Filter) (Page, error) {
	if f.Limit <= 0 || f.Limit > MaxPageSize {
		f.Limit = min(max(f.Limit, DefaultPageSize), MaxPageSize)
	}
	want := f.Limit
	if f.readTime() {
		return r.listMatching(ctx, f, want)
	}
	f.Limit++ // one more tells whether there is a next page
	rows, err := r.store.List(ctx, f)
	if err != nil {
		return Page{}, fmt.Errorf("throttle: list: %w", err)
	}
	var page Page
	if len(rows) > want {
		rows = rows[:want]
		page.Next = EncodeCursor(rows[want-1].Key)
	}
	now := r.lim.Now()
	page.States = make([]throttle.BucketState, len(rows))
	for i, b := range rows {
		page.States[i] = r.lim.StoredState(b, now)
	}
	return page, r.lim.RecallLastSends(ctx, page.States)
}

// EncodeCursor turns the last key of a page into an opaque URL-safe cursor.
func EncodeCursor(k throttle.Key) string {
	b, _ := json.Marshal([3]string{k.Policy, k.Env, k.Identifier})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor is the inverse of EncodeCursor; "" decodes to the zero Key.
// The error wraps throttle.ErrInvalidKey.
func DecodeCursor(s string) (throttle.Key, error) {
	if s == "" {
		return throttle.Key{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var parts [3]string
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	if err != nil {
		return throttle.Key{}, fmt.Errorf("%w: bad cursor", throttle.ErrInvalidKey)
	}
	k := throttle.Key{Policy: parts[0], Env: parts[1], Identifier: parts[2]}
	return k, k.Validate()
}

// ParseCondition is the inverse of throttle.Condition.Param; it also
// accepts "cooldown" and "cooling down".
func ParseCondition(s string) (throttle.Condition, error) {
	switch s {
	case "":
		return throttle.ConditionAny, nil
	case "cooling", "cooldown", "cooling down", "cooling-down":
		return throttle.ConditionCoolingDown, nil
	case "blocked":
		return throttle.ConditionBlocked, nil
	case "negative":
		return throttle.ConditionNegative, nil
	}
	return 0, fmt.Errorf("throttle: unknown state %q (want blocked, cooling or negative)", s)
}

// matches reports whether s passes f's read-time filters.
func (f Filter) matches(s throttle.BucketState) bool {
	return (f.Severity == throttle.SeverityUnknown || s.Severity == f.Severity) && s.Has(f.Condition)
}

// readTime reports whether f has filters only a read can apply.
func (f Filter) readTime() bool {
	return f.Severity != throttle.SeverityUnknown || f.Condition != throttle.ConditionAny
}

// prefilter narrows f for the store. When trusted (see
// throttle.Limiter.Trusted) a level now is never worse than the level
// stored, so a bucket Medium or worse now is stored at least that bad;
// otherwise the severity filter reads every row. Blocked and negative
// buckets are stored at least High in any case: a block or a negative
// balance is written, and every grading rates it High or worse.
func (f Filter) prefilter(trusted bool) Filter {
	if f.Severity > throttle.SeverityHealthy && trusted {
		f.MinSeverity = max(f.MinSeverity, f.Severity)
	}
	if f.Condition == throttle.ConditionBlocked || f.Condition == throttle.ConditionNegative {
		f.MinSeverity = max(f.MinSeverity, throttle.SeverityHigh)
	}
	return f
}

// scan reads the stored rows matching f from f.After on, refilled to now,
// and calls fn for each until fn returns false or MaxScan rows were read;
// it returns the key of the last row read and whether it stopped at the
// cap before the end.
func (r *Reader) scan(ctx context.Context, f Filter, fn func(throttle.BucketState) bool) (last throttle.Key, capped bool, err error) {
	f = f.prefilter(r.lim.Trusted())
	f.Limit = scanPage
	read := 0
	for {
		rows, err := r.store.List(ctx, f)
		if err != nil {
			return last, false, fmt.Errorf("throttle: scan: %w", err)
		}
		now := r.lim.Now()
		for _, b := range rows {
			last = b.Key
			read++
			if !fn(r.lim.StoredState(b, now)) {
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

// listMatching is List for a filter with read-time parts: it scans until
// it has a page (and one more row, to know there is a next page).
func (r *Reader) listMatching(ctx context.Context, f Filter, want int) (Page, error) {
	var page Page
	var more bool
	last, capped, err := r.scan(ctx, f, func(s throttle.BucketState) bool {
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
	if err := r.lim.RecallLastSends(ctx, page.States); err != nil {
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
func (r *Reader) ListAll(ctx context.Context, f Filter) (states []throttle.BucketState, partial bool, err error) {
	_, partial, err = r.scan(ctx, f, func(s throttle.BucketState) bool {
		if f.matches(s) {
			states = append(states, s)
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return states, partial, r.lim.RecallLastSends(ctx, states)
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
func SortStates(states []throttle.BucketState, by SortBy) {
	fill := func(s throttle.BucketState) int64 { // per mille, negative below 0
		if s.Policy.Capacity <= 0 {
			return 1000
		}
		return s.Tokens * 1000 / s.Policy.Capacity
	}
	slices.SortStableFunc(states, func(a, b throttle.BucketState) int {
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
	BySeverity map[throttle.Severity]int64
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
	Worst map[string]throttle.BucketState
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
	Worse             map[throttle.Severity]int64
	Blocked, Negative int64
}

// CountNow counts the stored buckets matching f by their severity now.
// When the Limiter is Trusted, rows stored Healthy are Healthy now (refill
// never makes a bucket worse) and only the others are read and graded
// again; otherwise (no full regrade yet, or the policy definitions changed
// since) every row is, so a row stored Healthy under a smaller capacity is
// counted at its level now. Either way a bucket that refilled since its
// last write is counted at its level now, not the stored one.
func (r *Reader) CountNow(ctx context.Context, f Filter) (SeverityCounts, error) {
	f.Severity, f.Condition, f.After = throttle.SeverityUnknown, throttle.ConditionAny, throttle.Key{}
	trusted := r.lim.Trusted()
	stored, err := r.store.CountBySeverity(ctx, f)
	if err != nil {
		return SeverityCounts{}, fmt.Errorf("throttle: count buckets: %w", err)
	}
	c := SeverityCounts{BySeverity: make(map[throttle.Severity]int64), Worst: make(map[string]throttle.BucketState),
		ByPolicy: make(map[string]PolicyCounts), At: r.lim.Now()}
	for sev, n := range stored {
		c.Total += n
		if sev == throttle.SeverityUnknown {
			sev = throttle.SeverityHealthy
		}
		c.BySeverity[sev] += n
	}
	g := f
	if trusted {
		g.MinSeverity = max(f.MinSeverity, throttle.SeverityMedium)
	}
	_, capped, err := r.scan(ctx, g, func(s throttle.BucketState) bool {
		c.Rechecked++
		c.BySeverity[max(s.Bucket.Severity, throttle.SeverityHealthy)]--
		c.BySeverity[max(s.Severity, throttle.SeverityHealthy)]++
		pc := c.ByPolicy[s.Key.Policy]
		if s.Severity > throttle.SeverityHealthy {
			if pc.Worse == nil {
				pc.Worse = make(map[throttle.Severity]int64)
			}
			pc.Worse[s.Severity]++
		}
		if s.Has(throttle.ConditionBlocked) {
			c.Blocked++
			pc.Blocked++
		}
		if s.Has(throttle.ConditionNegative) {
			c.Negative++
			pc.Negative++
		}
		if pc.Worse != nil || pc.Blocked > 0 || pc.Negative > 0 {
			c.ByPolicy[s.Key.Policy] = pc
		}
		if !s.Orphan && max(s.Severity, s.Bucket.Severity) > throttle.SeverityHealthy {
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

// CountBySeverity counts stored buckets matching f by stored severity (the
// level last alerted on); CountNow counts them by their level now.
func (r *Reader) CountBySeverity(ctx context.Context, f Filter) (map[throttle.Severity]int64, error) {
	m, err := r.store.CountBySeverity(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("throttle: count buckets: %w", err)
	}
	return m, nil
}

// Ledger returns a page of ledger entries matching q: the q.Limit latest
// written before q.BeforeID (all when 0), listed newest first by their
// time (At), the later written first among rows of one instant.
//
// Written order is not time order: refusals answered from memory reach the
// ledger when their group is flushed (decision 0007), stamped with the
// last refusal's time, possibly after younger rows of the bucket (another
// process's take). Such a row is listed at its time within its page; a
// page is still the rows written before the cursor, so the next page
// starts at NextLedgerCursor(page), not at the last row listed.
func (r *Reader) Ledger(ctx context.Context, q LedgerQuery) ([]throttle.LedgerEntry, error) {
	if q.Limit <= 0 || q.Limit > MaxPageSize {
		q.Limit = min(max(q.Limit, DefaultPageSize), MaxPageSize)
	}
	entries, err := r.store.Ledger(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("throttle: ledger: %w", err)
	}
	slices.SortStableFunc(entries, func(a, b throttle.LedgerEntry) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return entries, nil
}

// NextLedgerCursor returns the LedgerQuery.BeforeID of the page after page,
// a page Reader.Ledger returned: its smallest ID (0 for an empty page).
func NextLedgerCursor(page []throttle.LedgerEntry) int64 {
	var next int64
	for _, e := range page {
		if next == 0 || e.ID < next {
			next = e.ID
		}
	}
	return next
}

// CountLedger counts ledger events matching q.
func (r *Reader) CountLedger(ctx context.Context, q LedgerQuery) (int64, error) {
	n, err := r.store.CountLedger(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("throttle: count ledger: %w", err)
	}
	return n, nil
}

// LedgerWindow folds q.Key's ledger rows of the window q.From..q.To into
// q.Slots time slots, in the store (see Store.LedgerWindow): the answer
// is bounded by q.Slots whatever the ledger's volume. It returns an error
// wrapping throttle.ErrInvalidQuery for a query that fails Validate,
// throttle.ErrInvalidKey for an invalid key.
func (r *Reader) LedgerWindow(ctx context.Context, q LedgerWindowQuery) (LedgerWindow, error) {
	if err := q.validate(); err != nil {
		return LedgerWindow{}, err
	}
	if err := q.Key.Validate(); err != nil {
		return LedgerWindow{}, err
	}
	w, err := r.store.LedgerWindow(ctx, q)
	if err != nil {
		return LedgerWindow{}, fmt.Errorf("throttle: ledger window: %w", err)
	}
	return w, nil
}
