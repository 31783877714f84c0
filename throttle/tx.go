package throttle

import (
	"cmp"
	"slices"
	"time"
)

// CreditRef names a credit already applied: a reference on one bucket.
type CreditRef struct {
	Key Key
	Ref string
}

// Tx is the in-memory view of one store transaction: a Store builds it
// with NewTx from the rows it locked and loaded, hands it to the engine's
// apply function, then writes back BucketWrites and LedgerRows. The rules
// run only here, so one transaction may carry many decisions in sequence.
// A Tx is used by one goroutine.
type Tx struct {
	now         time.Time
	granularity LedgerGranularity
	buckets     map[Key]*txBucket
	credited    map[CreditRef]bool
	ledger      []LedgerEntry
	aggregated  []LedgerEntry // routine takes folded per bucket (LedgerAggregateTakes)
	aggIndex    map[Key]int   // index in aggregated per key
	changes     []SeverityChange
}

type txBucket struct {
	b      Bucket
	stored bool // a row exists in the store
	dirty  bool
	delete bool
}

// NewTx starts the view of a transaction that runs at now (read from the
// store's clock once, after the locks were taken).
func NewTx(now time.Time) *Tx {
	return &Tx{now: now, buckets: make(map[Key]*txBucket)}
}

// Now is the instant of the transaction.
func (tx *Tx) Now() time.Time { return tx.now }

// Load adds a stored row to the view. Keys with no row are absent: the
// engine treats them as full buckets.
func (tx *Tx) Load(b Bucket) { tx.buckets[b.Key] = &txBucket{b: b, stored: true} }

// LoadCredit records that ref was already credited to its bucket.
func (tx *Tx) LoadCredit(ref CreditRef) {
	// The map is made on the first credit: most transactions have none.
	if tx.credited == nil {
		tx.credited = make(map[CreditRef]bool)
	}
	tx.credited[ref] = true
}

// BucketWrite is one row to write back: Insert when the store has no row for
// the key yet, Delete when the row is to be removed, otherwise an update.
type BucketWrite struct {
	Bucket Bucket
	Insert bool
	Delete bool
}

// BucketWrites returns the rows the transaction changed, in key order.
func (tx *Tx) BucketWrites() []BucketWrite {
	var out []BucketWrite
	for _, tb := range tx.buckets {
		// A bucket deleted that has no row needs no write.
		if tb.dirty && (tb.stored || !tb.delete) {
			out = append(out, BucketWrite{Bucket: tb.b, Insert: !tb.stored, Delete: tb.delete})
		}
	}
	slices.SortFunc(out, func(a, b BucketWrite) int { return a.Bucket.Key.Compare(b.Bucket.Key) })
	return out
}

// LedgerRows returns the ledger rows to insert, in the order they happened.
// Aggregated take rows (Count may be > 1, At truncated to the minute) are
// returned separately: the store adds them to the row of the same bucket and
// minute if there is one.
func (tx *Tx) LedgerRows() (rows, aggregated []LedgerEntry) {
	return tx.ledger, tx.aggregated
}

// snapshot copies the current state of keys' buckets.
func (tx *Tx) snapshot(keys []Key) []Bucket {
	out := make([]Bucket, len(keys))
	for i, k := range keys {
		if tb, ok := tx.buckets[k]; ok {
			out[i] = tb.b
			out[i].Spent = slices.Clone(tb.b.Spent)
		}
	}
	return out
}

// bucket returns the view of key under p, creating a full bucket for an
// absent key, refilled to the transaction's now.
func (tx *Tx) bucket(key Key, p Policy) *txBucket {
	tb, ok := tx.buckets[key]
	if !ok || tb.delete {
		tb = &txBucket{b: newBucket(key, p, tx.now), stored: ok && tb.stored}
		tx.buckets[key] = tb
	}
	tb.b.Refill(p, tx.now)
	return tb
}

// recordTake records a take, lease or lease return of policy p on tb at
// the policy's ledger granularity, or the transaction's when the policy
// leaves it at LedgerDefault: none under LedgerNoTakes, and takes folded
// per bucket and minute under LedgerAggregateTakes.
func (tx *Tx) recordTake(tb *txBucket, p Policy, delta int64, reason LedgerReason, ref string) {
	tb.dirty, tb.delete = true, false
	switch cmp.Or(p.Ledger, tx.granularity) {
	case LedgerNoTakes:
		return
	case LedgerAggregateTakes:
		if reason != LedgerTake {
			break
		}
		if i, ok := tx.aggIndex[tb.b.Key]; ok {
			e := &tx.aggregated[i]
			e.Delta += delta
			e.Balance = tb.b.Tokens
			e.Count++
			return
		}
		if tx.aggIndex == nil {
			tx.aggIndex = make(map[Key]int)
		}
		tx.aggIndex[tb.b.Key] = len(tx.aggregated)
		tx.aggregated = append(tx.aggregated, LedgerEntry{
			Key: tb.b.Key, At: tx.now.Truncate(time.Minute), Delta: delta,
			Balance: tb.b.Tokens, Reason: reason, Count: 1,
		})
		return
	}
	tx.record(tb, delta, reason, ref)
}

// record appends a ledger row for a change of tb; a bucket with a ledger
// row is always written back (its row points at its latest ledger row).
func (tx *Tx) record(tb *txBucket, delta int64, reason LedgerReason, ref string) {
	tb.dirty, tb.delete = true, false
	tx.ledger = append(tx.ledger, LedgerEntry{
		Key: tb.b.Key, At: tx.now, Delta: delta, Balance: tb.b.Tokens,
		Reason: reason, Ref: ref, Count: 1,
	})
}

// touch marks tb changed and updates its stored severity (Thresholds.grade,
// with hysteresis from the level stored), noting a transition for the
// Notifier.
func (tx *Tx) touch(tb *txBucket, p Policy, th Thresholds) {
	tb.dirty, tb.delete = true, false
	sev := th.grade(p, tb.b, tx.now, tb.b.Severity)
	// A bucket with no row (SeverityUnknown) was full: Healthy.
	if from := max(tb.b.Severity, SeverityHealthy); from != sev {
		tx.changes = append(tx.changes, SeverityChange{
			Key: tb.b.Key, From: from, To: sev,
			Tokens: tb.b.Tokens, Capacity: p.Capacity, At: tx.now,
		})
	}
	tb.b.Severity = sev
}

// touchHeld is touch for a bucket that holds held tokens (0: none) of a
// reservation in flight: it grades the balance without them (what the
// remote side, which charges at its answer, sees) and reports whether the
// balance with them would grade worse, so that the settle grades it again.
func (tx *Tx) touchHeld(tb *txBucket, p Policy, th Thresholds, held int64) bool {
	prev, withHold := tb.b.Severity, tb.b.Tokens
	tb.b.Tokens = min(withHold+held, max(p.Capacity, withHold))
	tx.touch(tb, p, th)
	tb.b.Tokens = withHold
	return th.grade(p, tb.b, tx.now, prev) > tb.b.Severity
}
