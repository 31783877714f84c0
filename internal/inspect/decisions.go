package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// PolicyDecisions are one policy's decisions over a window, counted from
// the ledger: the requests it admitted and those it refused, by reason.
type PolicyDecisions struct {
	Policy string
	// Admitted counts the takes (throttle.LedgerTake events). A ledger
	// that leaves routine takes out (throttle.LedgerGranularity) counts
	// fewer than were admitted; refusals are always recorded.
	Admitted int64
	// Refused counts the refusals by ledger reason (LedgerRefusedEmpty,
	// LedgerRefusedCooldown, LedgerRefusedBlocked); a reason with none is
	// absent.
	Refused map[throttle.LedgerReason]int64
}

// RefusedTotal is the sum of Refused.
func (d PolicyDecisions) RefusedTotal() int64 {
	var n int64
	for _, c := range d.Refused {
		n += c
	}
	return n
}

// RefusedPerMille is the refused share of the decisions, in per mille,
// rounded to the nearest (10 of 18 is 556; 0 with none).
func (d PolicyDecisions) RefusedPerMille() int64 {
	total := d.Admitted + d.RefusedTotal()
	if total == 0 {
		return 0
	}
	return (d.RefusedTotal()*2000 + total) / (2 * total)
}

// decisionReasons are the ledger reasons Decisions counts: a take, and
// every refusal.
var decisionReasons = append([]throttle.LedgerReason{throttle.LedgerTake}, throttle.RefusalReasons...)

// Decisions counts, for each policy of policies, the decisions recorded in
// the ledger at or after since: admitted (takes) and refused by reason. A
// policy with no decision in the window is left out; the others come with
// the most refused first, then by name. It costs one counting query per
// policy, and four more per policy with decisions (Store.CountLedger, on
// the ledger's policy and time index).
func (r *Reader) Decisions(ctx context.Context, policies []string, since time.Time) ([]PolicyDecisions, error) {
	var out []PolicyDecisions
	for _, p := range slices.Compact(slices.Sorted(slices.Values(policies))) {
		total, err := r.store.CountLedger(ctx, LedgerQuery{Policy: p, Reasons: decisionReasons, Since: since})
		if err != nil {
			return nil, fmt.Errorf("throttle: decisions of %s: %w", p, err)
		}
		if total == 0 {
			continue
		}
		d := PolicyDecisions{Policy: p, Refused: map[throttle.LedgerReason]int64{}}
		for _, reason := range decisionReasons {
			n, err := r.store.CountLedger(ctx, LedgerQuery{Policy: p, Reasons: []throttle.LedgerReason{reason}, Since: since})
			if err != nil {
				return nil, fmt.Errorf("throttle: decisions of %s: %w", p, err)
			}
			switch {
			case reason == throttle.LedgerTake:
				d.Admitted = n
			case n > 0:
				d.Refused[reason] = n
			}
		}
		out = append(out, d)
	}
	slices.SortStableFunc(out, func(a, b PolicyDecisions) int {
		return cmp.Or(cmp.Compare(b.RefusedTotal(), a.RefusedTotal()), cmp.Compare(a.Policy, b.Policy))
	})
	return out, nil
}
