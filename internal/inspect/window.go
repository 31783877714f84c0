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

// LedgerWindowQuery asks for one bucket's ledger over a time window, folded
// into Slots equal time slots: the answer has at most Slots rows whatever
// the number of ledger rows in the window.
type LedgerWindowQuery struct {
	Key throttle.Key
	// From and To bound the window: rows with From <= At <= To. To must be
	// after From.
	From, To time.Time
	// Slots is how many slots the window is cut into, 1..MaxWindowSlots.
	// Slot i holds the rows with At in [From + i*Width, From + (i+1)*Width),
	// where Width is (To-From)/Slots rounded up to the nanosecond (the last
	// slot also holds To).
	Slots int
}

// Width returns the length of one slot of q: (To-From)/Slots rounded up, at
// least 1 ns.
func (q LedgerWindowQuery) Width() time.Duration {
	span := q.To.Sub(q.From)
	n := time.Duration(max(q.Slots, 1))
	return max((span+n-1)/n, 1)
}

// validate returns an error wrapping throttle.ErrInvalidQuery when q cannot be
// answered (no slots, too many, an empty or reversed window).
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
// window. Balances are whole tokens. Rows that changed the balance (takes,
// penalties, refunds, credits, resets, syncs) give the balances; refusals
// (throttle.RefusalReasons) are only counted. An aggregated row (Count > 1, a minute
// of takes) is one row here, at the minute it began.
type LedgerSlot struct {
	// Index is the slot's number in the window (0 is the oldest) and Start
	// its first instant.
	Index int
	Start time.Time

	// Changes is the number of balance-changing rows in the slot and Events
	// the events they hold (the sum of their Count). When Changes is 0 the
	// slot holds only refusals and the balance fields are zero.
	Changes, Events int64
	// First and Last are the times of the slot's first and last
	// balance-changing rows (in ledger order); Open is the balance just
	// before the first (its Balance - Delta) and Close the balance after the
	// last (its Balance). Min and Max bound the Balance of every
	// balance-changing row of the slot.
	First, Last time.Time
	Open, Close int64
	Min, Max    int64
	// LastReason is the reason of the last balance-changing row.
	LastReason throttle.LedgerReason

	// Refused is the number of refused requests in the slot (the sum of
	// the Count of its refusal rows) and FirstRefused the time of the first.
	Refused      int64
	FirstRefused time.Time
}

// LedgerWindow is the answer to a LedgerWindowQuery: the slots that hold at
// least one ledger row, oldest first.
type LedgerWindow struct {
	Query LedgerWindowQuery
	Slots []LedgerSlot
	// Partial is set when the store stopped reading before the start of the
	// window (it bounds the rows one answer reads, MaxWindowRows): the
	// slots then describe only the newest part of the window.
	Partial bool
}

// MaxWindowRows bounds how many ledger rows a store reads to answer one
// LedgerWindowQuery; past it, LedgerWindow.Partial is set.
const MaxWindowRows = 2_000_000

// FoldLedger folds entries (of q.Key, in any order) into the slots of q, as
// a Store's LedgerWindow does in SQL: the reference for the stores, and the
// way to chart entries already in memory.
func FoldLedger(entries []throttle.LedgerEntry, q LedgerWindowQuery) LedgerWindow {
	es := slices.Clone(entries)
	slices.SortStableFunc(es, func(a, b throttle.LedgerEntry) int { return cmp.Compare(a.ID, b.ID) })
	w := LedgerWindow{Query: q}
	width := q.Width()
	byIndex := map[int]int{}
	for _, e := range es {
		if e.At.Before(q.From) || e.At.After(q.To) {
			continue
		}
		i := min(int(e.At.Sub(q.From)/width), q.Slots-1)
		k, ok := byIndex[i]
		if !ok {
			k = len(w.Slots)
			byIndex[i] = k
			w.Slots = append(w.Slots, LedgerSlot{Index: i, Start: q.From.Add(time.Duration(i) * width)})
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
	slices.SortFunc(w.Slots, func(a, b LedgerSlot) int { return a.Index - b.Index })
	return w
}
