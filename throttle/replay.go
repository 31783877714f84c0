package throttle

import (
	"fmt"
	"slices"
	"time"
)

// Replay rebuilds a bucket from its ledger entries, oldest first, checking
// that each entry's Delta and Balance follow from the one before plus the
// policy's refill, and assuming the bucket was full before the first. It
// returns the bucket as of the last entry, or an error naming the first
// entry the ledger cannot explain. Refusal rows are skipped. Replay needs
// one row per take (LedgerEveryTake) and a token-bucket policy (not
// RefillRolling).
func Replay(p Policy, entries []LedgerEntry) (Bucket, error) {
	if len(entries) == 0 {
		return Bucket{}, fmt.Errorf("throttle: replay: no entries")
	}
	if p.Refill == RefillRolling {
		return Bucket{}, fmt.Errorf("throttle: replay: rolling windows cannot be replayed from deltas")
	}
	b := newBucket(entries[0].Key, p, entries[0].At)
	for i, e := range entries {
		if slices.Contains(RefusalReasons, e.Reason) {
			// A refusal moves no token; its balance is what it saw, and a
			// group answered from memory is written after later rows.
			continue
		}
		b.Refill(p, e.At)
		if got := b.Tokens + e.Delta; got != e.Balance {
			return b, fmt.Errorf("throttle: replay: entry %d (id %d, %s %+d at %s): balance %d + delta %d = %d, ledger says %d",
				i, e.ID, e.Reason, e.Delta, e.At.Format(time.RFC3339Nano), b.Tokens, e.Delta, got, e.Balance)
		}
		b.Tokens = e.Balance
		if b.Tokens >= p.Capacity {
			b.Carry = 0
		}
	}
	return b, nil
}
