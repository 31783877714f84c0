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
	// Admitted counts the takes (fewer than admitted when the ledger leaves
	// routine takes out, throttle.LedgerGranularity); Refused counts the
	// refusals by ledger reason, a reason with none absent.
	Admitted int64
	Refused  map[throttle.LedgerReason]int64
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

// decisionReasons are a take and every refusal.
var decisionReasons = append([]throttle.LedgerReason{throttle.LedgerTake}, throttle.RefusalReasons...)

// Decisions counts, for each policy of policies, the decisions recorded in
// the ledger at or after since, leaving out a policy with none; the most
// refused come first, then by name. It costs one Store.CountLedger per
// policy, and four more per policy with decisions.
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
