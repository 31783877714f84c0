package inspect

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// maxWindowSlots bounds LedgerWindowQuery.Slots.
const maxWindowSlots = 2000

// LedgerWindowQuery asks for one bucket's ledger rows with From <= At <= To
// (To after From), folded into Slots (1..maxWindowSlots) equal slots: slot i
// holds the rows with At in [From + i*Width(), From + (i+1)*Width()), the
// last one also To.
type LedgerWindowQuery struct {
	Key      throttle.Key
	From, To time.Time
	Slots    int
}

// Width returns the length of one slot of q: (To-From)/Slots rounded up, at
// least 1 ns.
func (q LedgerWindowQuery) Width() time.Duration {
	span := q.To.Sub(q.From)
	n := time.Duration(max(q.Slots, 1))
	return max((span+n-1)/n, 1)
}

// validate returns an error wrapping throttle.ErrInvalidQuery when q cannot
// be answered.
func (q LedgerWindowQuery) validate() error {
	switch {
	case q.Slots < 1 || q.Slots > maxWindowSlots:
		return fmt.Errorf("%w: %d slots (want 1..%d)", throttle.ErrInvalidQuery, q.Slots, maxWindowSlots)
	case !q.To.After(q.From):
		return fmt.Errorf("%w: window %s..%s is empty", throttle.ErrInvalidQuery, q.From, q.To)
	}
	return nil
}

// LedgerSlot is what one bucket's ledger rows say about one slot of a
// window, in whole tokens: balance-changing rows give the balances, refusals
// (throttle.RefusalReasons) are only counted; an aggregated row is one row.
type LedgerSlot struct {
	// Index is the slot's number (0 is the oldest), Start its first instant.
	Index int
	Start time.Time

	// Changes counts the balance-changing rows and Events the sum of their
	// Count (0 Changes: only refusals, balance fields zero). First and Last
	// are their first and last times in ledger order, Open the balance
	// before the first, Close after the last; Min and Max bound their Balance.
	Changes, Events int64
	First, Last     time.Time
	Open, Close     int64
	Min, Max        int64
	// LastReason is the reason of the last balance-changing row.
	LastReason throttle.LedgerReason

	// Refused sums the Count of the refusal rows, FirstRefused is the first.
	Refused      int64
	FirstRefused time.Time
}

// LedgerWindow is the answer to a LedgerWindowQuery: the slots that hold at
// least one ledger row, oldest first.
type LedgerWindow struct {
	Query LedgerWindowQuery
	Slots []LedgerSlot
	// Partial: the store stopped at MaxWindowRows, before the start of the
	// window; the slots describe only its newest part.
	Partial bool
}

// MaxWindowRows bounds how many ledger rows a store reads to answer one
// LedgerWindowQuery; past it, LedgerWindow.Partial is set.
const MaxWindowRows = 2_000_000

// FoldLedger folds entries (of q.Key, in any order) into the slots of q: the
// reference for a Store's LedgerWindow, and the way to chart entries in memory.
func FoldLedger(entries []throttle.LedgerEntry, q LedgerWindowQuery) LedgerWindow {
	es := slices.Clone(entries)
	slices.SortStableFunc(es, func(a, b throttle.LedgerEntry) int { return cmp.Compare(a.ID, b.ID) })
	w := LedgerWindow{Query: q}
	width := q.Width()
	for _, e := range es {
		if e.At.Before(q.From) || e.At.After(q.To) {
			continue
		}
		i := min(int(e.At.Sub(q.From)/width), q.Slots-1)
		k, ok := slices.BinarySearchFunc(w.Slots, i, func(s LedgerSlot, i int) int { return s.Index - i })
		if !ok {
			w.Slots = slices.Insert(w.Slots, k, LedgerSlot{Index: i, Start: q.From.Add(time.Duration(i) * width)})
		}
		s := &w.Slots[k]
		n := max(e.Count, 1)
		if slices.Contains(throttle.RefusalReasons, e.Reason) {
			if s.Refused == 0 || e.At.Before(s.FirstRefused) {
				s.FirstRefused = e.At
			}
			s.Refused += n
			continue
		}
		if s.Changes == 0 {
			s.First, s.Open = e.At, e.Balance-e.Delta
			s.Min, s.Max = e.Balance, e.Balance
		}
		s.Changes++
		s.Events += n
		s.Last, s.Close, s.LastReason = e.At, e.Balance, e.Reason
		s.Min, s.Max = min(s.Min, e.Balance), max(s.Max, e.Balance)
	}
	return w
}
