package web

import (
	"fmt"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/throttle"
)

// NewAPIBucketList renders a page of states as GET /api/buckets answers
// it (Next, NextURL and Partial are the caller's); scope may be nil. An
// empty page has an empty list, never null.
func NewAPIBucketList(states []throttle.BucketState, scope func(throttle.Key) string) APIBucketList {
	out := APIBucketList{Buckets: make([]APIBucket, 0, len(states))}
	for _, st := range states {
		out.Buckets = append(out.Buckets, NewAPIBucket(st, scope))
	}
	return out
}

// APILedgerEntry is one ledger row in JSON ("balde buckets show --json").
// Count is at least 1: a row that stands for one request says 1.
type APILedgerEntry struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"` // UTC
	Reason  string    `json:"reason"`
	Delta   int64     `json:"delta"`
	Balance int64     `json:"balance"`
	Count   int64     `json:"count"`
	Ref     string    `json:"ref"`
}

// newAPILedgerEntry renders e as JSON.
func newAPILedgerEntry(e throttle.LedgerEntry) APILedgerEntry {
	return APILedgerEntry{ID: e.ID, At: e.At.UTC(), Reason: e.Reason.String(), Delta: e.Delta,
		Balance: e.Balance, Count: max(e.Count, 1), Ref: e.Ref}
}

// APIBucketDetail is one bucket with its most recent ledger rows, newest
// first ("balde buckets show --json"). Ledger is empty, never null.
type APIBucketDetail struct {
	Bucket APIBucket        `json:"bucket"`
	Ledger []APILedgerEntry `json:"ledger"`
}

// NewAPIBucketDetail renders st and its ledger rows; scope may be nil.
func NewAPIBucketDetail(st throttle.BucketState, ledger []throttle.LedgerEntry, scope func(throttle.Key) string) APIBucketDetail {
	out := APIBucketDetail{Bucket: NewAPIBucket(st, scope), Ledger: make([]APILedgerEntry, 0, len(ledger))}
	for _, e := range ledger {
		out.Ledger = append(out.Ledger, newAPILedgerEntry(e))
	}
	return out
}

// BucketView is a bucket's state rendered for people in one language, the
// cells "balde buckets" prints: "-" stands for no scope and no wait, and a
// bucket of an unknown policy (Orphan) shows "?" for its capacity and
// refill.
type BucketView struct {
	Scope    string // PSP, USER, RUC, LOT, IP, TOKEN or "-"
	Capacity string
	Refill   string // FormatRefillIn
	Policy   string // FormatPolicyIn
	Severity string
	Wait     string // FormatBucketWaitIn, or "-"
	LastSend string // UTC and how long before the state, or "never"
}

// ViewBucket renders st in tr's language; scope (nil: none) names whom
// the bucket belongs to, as the admin pages do (Scopes).
func ViewBucket(tr *i18n.Printer, st throttle.BucketState, scope func(throttle.Key) string) BucketView {
	v := BucketView{
		Scope: "-", Capacity: fmt.Sprint(st.Policy.Capacity), Refill: formatRefillIn(tr, st.Policy),
		Policy: FormatPolicyIn(tr, st.Policy), Severity: tr.Sprintf(st.Severity.String()), Wait: "-", LastSend: tr.Sprintf("never"),
	}
	if scope != nil && scope(st.Key) != "" {
		v.Scope = scope(st.Key)
	}
	if !st.LastSentAt.IsZero() {
		v.LastSend = st.LastSentAt.UTC().Format(TimeLayout)
		if ago := st.At.Sub(st.LastSentAt); ago >= 0 {
			v.LastSend += " (" + tr.Sprintf("%s ago", FormatWait(ago)) + ")"
		}
	}
	if st.Orphan {
		v.Capacity, v.Refill = "?", "?"
		v.Policy, v.Severity = tr.Sprintf("unknown policy"), tr.Sprintf("unknown policy")
	}
	if w := formatBucketWaitIn(tr, st); w != "" {
		v.Wait = w
	}
	return v
}

// FormatLastSendIn is a bucket's last send for one bucket's page: the
// instant in tr's zone (tr.Time: UTC and local) and how long before the
// state it was, or "never". Lists use BucketView.LastSend, UTC only, to
// stay narrow.
func FormatLastSendIn(tr *i18n.Printer, st throttle.BucketState) string {
	if st.LastSentAt.IsZero() {
		return tr.Sprintf("never")
	}
	s := tr.Time(st.LastSentAt)
	if ago := st.At.Sub(st.LastSentAt); ago >= 0 {
		s += " (" + tr.Sprintf("%s ago", FormatWait(ago)) + ")"
	}
	return s
}
