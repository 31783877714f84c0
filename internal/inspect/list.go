package inspect

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// pageSize is limit within 1..MaxPageSize, DefaultPageSize when not positive.
func pageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return min(limit, MaxPageSize)
}

// MaxScan bounds the stored rows one listing or count reads to apply the
// read-time filters; past it a Page is Partial.
const MaxScan = 100_000

// scanPage is the store page size of a scan.
const scanPage = 1000

// List returns the stored buckets matching f, refilled to now, one page at a
// time (keyset pagination: the cost of a page does not grow with its depth).
func (r *Reader) List(ctx context.Context, f Filter) (Page, error) {
	f.Limit = pageSize(f.Limit)
	want, size := f.Limit, scanPage
	if !f.readTime() {
		size = want + 1 // one more tells whether there is a next page
	}
	var page Page
	var more bool
	last, capped, err := r.scan(ctx, f, size, func(s throttle.BucketState) bool {
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
// accepts its String ("cooling down"), "cooldown" and "cooling-down".
func ParseCondition(s string) (throttle.Condition, error) {
	for _, c := range []throttle.Condition{throttle.ConditionAny, throttle.ConditionCoolingDown, throttle.ConditionBlocked, throttle.ConditionNegative} {
		if s == c.Param() || s == c.String() || c == throttle.ConditionCoolingDown && (s == "cooldown" || s == "cooling-down") {
			return c, nil
		}
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

// prefilter narrows f for the store: when trusted (throttle.Limiter.Trusted)
// a level now is never worse than the level stored, and blocked or negative
// buckets are stored at least High under every grading.
func (f Filter) prefilter(trusted bool) Filter {
	if f.Severity > throttle.SeverityHealthy && trusted {
		f.MinSeverity = max(f.MinSeverity, f.Severity)
	}
	if f.Condition == throttle.ConditionBlocked || f.Condition == throttle.ConditionNegative {
		f.MinSeverity = max(f.MinSeverity, throttle.SeverityHigh)
	}
	return f
}

// scan calls fn for each stored row matching f from f.After on, read size
// rows at a time and refilled to now, until fn returns false or MaxScan
// rows were read; it returns the last key read and whether it stopped at
// the cap.
func (r *Reader) scan(ctx context.Context, f Filter, size int, fn func(throttle.BucketState) bool) (last throttle.Key, capped bool, err error) {
	f = f.prefilter(r.lim.Trusted())
	f.Limit = size
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
		if len(rows) < size {
			return last, false, nil
		}
		f.After = rows[len(rows)-1].Key
	}
}

// ListAll returns every stored bucket matching f from f.After on, refilled
// to now, reading at most MaxScan rows (partial past it).
func (r *Reader) ListAll(ctx context.Context, f Filter) (states []throttle.BucketState, partial bool, err error) {
	_, partial, err = r.scan(ctx, f, scanPage, func(s throttle.BucketState) bool {
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
		var c int
		switch by {
		case SortSeverity:
			c = cmp.Or(cmp.Compare(b.Severity, a.Severity), cmp.Compare(b.Condition(), a.Condition()), cmp.Compare(fill(a), fill(b)))
		case SortLastSend:
			c = b.LastSentAt.Compare(a.LastSentAt)
		case SortTokens:
			c = cmp.Compare(fill(a), fill(b))
		}
		return cmp.Or(c, a.Key.Compare(b.Key))
	})
}

// SeverityCounts is how many stored buckets are at each level now, and in
// which condition.
type SeverityCounts struct {
	// BySeverity counts buckets by their level now.
	BySeverity map[throttle.Severity]int64
	Total      int64
	// Blocked and Negative count buckets in that condition now.
	Blocked, Negative int64
	// Rechecked is how many rows were re-graded (every row, or only those
	// stored worse than Healthy when Trusted); Partial: past MaxScan of
	// them, the rest are counted at their stored level.
	Rechecked int64
	Partial   bool
	// Worst is, per policy, its emptiest re-graded bucket (by fill) that is
	// or was stored worse than Healthy.
	Worst map[string]throttle.BucketState
	// ByPolicy breaks down per policy the re-graded buckets worse than
	// Healthy now, blocked or negative now.
	ByPolicy map[string]PolicyCounts
	At       time.Time
}

// PolicyCounts is one policy's part of SeverityCounts.ByPolicy; Worse
// counts its buckets by their level now, for levels worse than Healthy.
type PolicyCounts struct {
	Worse             map[throttle.Severity]int64
	Blocked, Negative int64
}

// CountNow counts the stored buckets matching f by their severity now. When
// the Limiter is Trusted only the rows stored worse than Healthy are read and
// graded again (refill never makes a bucket worse); otherwise every row is.
func (r *Reader) CountNow(ctx context.Context, f Filter) (SeverityCounts, error) {
	f.Severity, f.Condition, f.After = throttle.SeverityUnknown, throttle.ConditionAny, throttle.Key{}
	stored, err := r.store.CountBySeverity(ctx, f)
	if err != nil {
		return SeverityCounts{}, fmt.Errorf("throttle: count buckets: %w", err)
	}
	c := SeverityCounts{BySeverity: make(map[throttle.Severity]int64), Worst: make(map[string]throttle.BucketState),
		ByPolicy: make(map[string]PolicyCounts), At: r.lim.Now()}
	for sev, n := range stored {
		c.Total += n
		c.BySeverity[max(sev, throttle.SeverityHealthy)] += n
	}
	g := f
	if r.lim.Trusted() {
		g.MinSeverity = max(f.MinSeverity, throttle.SeverityMedium)
	}
	_, c.Partial, err = r.scan(ctx, g, scanPage, func(s throttle.BucketState) bool {
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
	return c, nil
}

// CountBySeverity counts stored buckets matching f by stored severity (the
// level last alerted on); CountNow counts them by their level now.
func (r *Reader) CountBySeverity(ctx context.Context, f Filter) (map[throttle.Severity]int64, error) {
	return wrap(r.store.CountBySeverity(ctx, f))("count buckets")
}

// wrap prefixes a store's error with "throttle: " and op.
func wrap[T any](v T, err error) func(op string) (T, error) {
	return func(op string) (T, error) {
		if err != nil {
			var zero T
			return zero, fmt.Errorf("throttle: %s: %w", op, err)
		}
		return v, nil
	}
}

// Ledger returns a page of ledger entries matching q: the q.Limit latest
// written before q.BeforeID, listed newest first by At, then by ID. Written
// order is not time order (a flushed refusal group, decision 0007), so the
// next page starts at NextLedgerCursor(page), not at the last row listed.
func (r *Reader) Ledger(ctx context.Context, q LedgerQuery) ([]throttle.LedgerEntry, error) {
	q.Limit = pageSize(q.Limit)
	entries, err := r.store.Ledger(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("throttle: ledger: %w", err)
	}
	slices.SortStableFunc(entries, func(a, b throttle.LedgerEntry) int { return cmp.Or(b.At.Compare(a.At), cmp.Compare(b.ID, a.ID)) })
	return entries, nil
}

// NextLedgerCursor returns the LedgerQuery.BeforeID of the page after page,
// a page Reader.Ledger returned: its smallest ID (0 for an empty page).
func NextLedgerCursor(page []throttle.LedgerEntry) int64 {
	if len(page) == 0 {
		return 0
	}
	return slices.MinFunc(page, func(a, b throttle.LedgerEntry) int { return cmp.Compare(a.ID, b.ID) }).ID
}

// CountLedger counts ledger events matching q.
func (r *Reader) CountLedger(ctx context.Context, q LedgerQuery) (int64, error) {
	return wrap(r.store.CountLedger(ctx, q))("count ledger")
}

// LedgerWindow folds q.Key's ledger rows of q.From..q.To into at most
// q.Slots slots, in the store (Store.LedgerWindow). A bad query wraps
// throttle.ErrInvalidQuery, a bad key throttle.ErrInvalidKey.
func (r *Reader) LedgerWindow(ctx context.Context, q LedgerWindowQuery) (LedgerWindow, error) {
	if err := q.validate(); err != nil {
		return LedgerWindow{}, err
	}
	if err := q.Key.Validate(); err != nil {
		return LedgerWindow{}, err
	}
	return wrap(r.store.LedgerWindow(ctx, q))("ledger window")
}

// ListBy returns the first page of the stored buckets matching f in by's
// order: List (keyset pages, Next set) for SortKey; for another order every
// matching bucket (at most MaxScan, Partial past it; f.After ignored) is
// read, sorted by SortStates and cut to f.Limit (as List's), with no Next. It is "balde buckets list --sort".
func (r *Reader) ListBy(ctx context.Context, f Filter, by SortBy) (Page, error) {
	if by == SortKey || by == "" {
		return r.List(ctx, f)
	}
	f.After = throttle.Key{}
	all, partial, err := r.ListAll(ctx, f)
	if err != nil {
		return Page{}, err
	}
	SortStates(all, by)
	return Page{States: all[:min(pageSize(f.Limit), len(all))], Partial: partial}, nil
}

// ErrKeyForm is ParseKey's error for a string that is not
// POLICY/ENV/IDENTIFIER.
var ErrKeyForm = errors.New("not POLICY/ENV/IDENTIFIER")

// ParseKey reads a bucket key as throttle.Key.String writes it,
// "POLICY/ENV/IDENTIFIER" (the identifier may itself contain "/"), and
// validates it. A string without two "/" is ErrKeyForm; a key with an
// empty, too long or unprintable part wraps throttle.ErrInvalidKey.
func ParseKey(s string) (throttle.Key, error) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return throttle.Key{}, fmt.Errorf("%q: %w", s, ErrKeyForm)
	}
	k := throttle.Key{Policy: parts[0], Env: parts[1], Identifier: parts[2]}
	if err := k.Validate(); err != nil {
		return throttle.Key{}, err
	}
	return k, nil
}
