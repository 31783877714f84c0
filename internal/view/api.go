// Package view is how balde shows buckets, policies and waits: the JSON of
// the admin API and the CLI's --json, and the words people read.
package view

import (
	"cmp"
	"fmt"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/throttle"
)

// APIBucket is one bucket in the JSON API and the CLI's --json; durations
// are in seconds.
type APIBucket struct {
	Policy     string `json:"policy"`
	Env        string `json:"env"`
	Identifier string `json:"identifier"`
	Tokens     int64  `json:"tokens"`
	Capacity   int64  `json:"capacity"`
	// RefillTokens are added per RefillPeriodSeconds, in RefillMode
	// ("continuous", "stepwise", "rolling").
	RefillTokens        int64   `json:"refill_tokens"`
	RefillPeriodSeconds float64 `json:"refill_period_seconds"`
	RefillMode          string  `json:"refill_mode"`
	// Severity is "Healthy".."Critical", SeverityLevel its number (1..4).
	Severity      string `json:"severity"`
	SeverityLevel int    `json:"severity_level"`
	// State is "blocked", "cooling down", "negative" or "".
	State string `json:"state"`
	// Scope is whom the bucket belongs to (PSP, USER, RUC...), or "".
	Scope           string  `json:"scope,omitempty"`
	CooldownSeconds float64 `json:"cooldown_remaining_seconds"`
	BlockSeconds    float64 `json:"block_remaining_seconds"`
	// BlockLevel counts escalating blocks in a row; OnTheWire is set while
	// an admitted request holds the key until its answer.
	BlockLevel        int64      `json:"block_level,omitempty"`
	OnTheWire         bool       `json:"on_the_wire,omitempty"`
	RetryAfterSeconds float64    `json:"retry_after_seconds"`
	UntilFullSeconds  float64    `json:"until_full_seconds"`
	LastSentAt        *time.Time `json:"last_sent_at"`
	SendCount         int64      `json:"send_count"`
	// Stored is false for a key with no row; Orphan marks a row of an
	// unknown policy.
	Stored bool `json:"stored"`
	Orphan bool `json:"orphan,omitempty"`
	// Shadow: the policy is in shadow mode (docs/decisions/0200).
	Shadow bool      `json:"shadow,omitempty"`
	At     time.Time `json:"at"`
}

// NewAPIBucket renders st for the API; scope may be nil.
func NewAPIBucket(st throttle.BucketState, scope func(throttle.Key) string) APIBucket {
	b := APIBucket{
		Policy:              st.Key.Policy,
		Env:                 st.Key.Env,
		Identifier:          st.Key.Identifier,
		Tokens:              st.Tokens,
		Capacity:            st.Policy.Capacity,
		RefillTokens:        st.Policy.RefillTokens,
		RefillPeriodSeconds: st.Policy.RefillPeriod.Seconds(),
		Severity:            st.Severity.String(),
		SeverityLevel:       int(st.Severity),
		State:               st.Condition().String(),
		CooldownSeconds:     st.CooldownLeft.Seconds(),
		BlockSeconds:        st.BlockLeft.Seconds(),
		RetryAfterSeconds:   st.RetryAfter.Seconds(),
		UntilFullSeconds:    st.UntilFull.Seconds(),
		BlockLevel:          st.BlockLevel,
		OnTheWire:           st.UntilReleased(st.At) > 0,
		SendCount:           st.SendCount,
		Stored:              st.Stored,
		Orphan:              st.Orphan,
		Shadow:              st.Shadow,
		At:                  st.At.UTC(),
	}
	if !st.Orphan {
		b.RefillMode = st.Policy.Refill.String()
	}
	if scope != nil {
		b.Scope = scope(st.Key)
	}
	if !st.LastSentAt.IsZero() {
		t := st.LastSentAt.UTC()
		b.LastSentAt = &t
	}
	return b
}

// APIBucketList is a page of GET /api/buckets and "balde buckets list
// --json".
type APIBucketList struct {
	Buckets []APIBucket `json:"buckets"`
	// Next is the next page's cursor or number, NextURL its path; Partial
	// is set when a filter stopped at inspect.MaxScan rows.
	Next    string `json:"next,omitempty"`
	NextURL string `json:"next_url,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

// NewAPIBucketList renders a page of states, never null; scope may be nil.
func NewAPIBucketList(states []throttle.BucketState, scope func(throttle.Key) string) APIBucketList {
	out := APIBucketList{Buckets: make([]APIBucket, 0, len(states))}
	for _, st := range states {
		out.Buckets = append(out.Buckets, NewAPIBucket(st, scope))
	}
	return out
}

// APILedgerEntry is one ledger row in JSON; Count is at least 1.
type APILedgerEntry struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"` // UTC
	Reason  string    `json:"reason"`
	Delta   int64     `json:"delta"`
	Balance int64     `json:"balance"`
	Count   int64     `json:"count"`
	Ref     string    `json:"ref"`
}

// APIBucketDetail is one bucket with its most recent ledger rows, newest
// first; Ledger is never null.
type APIBucketDetail struct {
	Bucket APIBucket        `json:"bucket"`
	Ledger []APILedgerEntry `json:"ledger"`
}

// NewAPIBucketDetail renders st and its ledger rows; scope may be nil.
func NewAPIBucketDetail(st throttle.BucketState, ledger []throttle.LedgerEntry, scope func(throttle.Key) string) APIBucketDetail {
	out := APIBucketDetail{Bucket: NewAPIBucket(st, scope), Ledger: make([]APILedgerEntry, 0, len(ledger))}
	for _, e := range ledger {
		out.Ledger = append(out.Ledger, APILedgerEntry{ID: e.ID, At: e.At.UTC(), Reason: e.Reason.String(), Delta: e.Delta,
			Balance: e.Balance, Count: max(e.Count, 1), Ref: e.Ref})
	}
	return out
}

// BucketView is a bucket's cells for people: "-" for no scope or wait, "?"
// for an orphan's capacity and refill.
type BucketView struct {
	Scope    string // PSP, USER, RUC, LOT, IP, TOKEN or "-"
	Capacity string
	Refill   string // FormatRefillIn
	Policy   string // FormatPolicyIn
	Severity string
	Wait     string // FormatBucketWaitIn, or "-"
	LastSend string // UTC and how long before the state, or "never"
}

// ViewBucket renders st in tr's language; scope may be nil (web.Scopes).
func ViewBucket(tr *i18n.Printer, st throttle.BucketState, scope func(throttle.Key) string) BucketView {
	v := BucketView{
		Scope: "-", Capacity: fmt.Sprint(st.Policy.Capacity), Refill: FormatRefillIn(tr, st.Policy),
		Policy: FormatPolicyIn(tr, st.Policy), Severity: tr.Sprintf(st.Severity.String()), Wait: cmp.Or(FormatBucketWaitIn(tr, st), "-"),
		LastSend: WhenIn(tr, func(t time.Time) string { return t.UTC().Format(i18n.TimeLayout) }, st.LastSentAt, st.At),
	}
	if scope != nil && scope(st.Key) != "" {
		v.Scope = scope(st.Key)
	}
	if st.Orphan {
		v.Capacity, v.Refill = "?", "?"
		v.Policy, v.Severity = tr.Sprintf("unknown policy"), tr.Sprintf("unknown policy")
	}
	return v
}
