package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// A DICT lookup by a PF payer: reserve one token before sending, then settle
// the outcome. A 404 costs 20 in all, so 19 more; the balance may go
// negative, and the retry-after says when it is positive again.
func Example() {
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := throttletest.NewMemStore(clock.Now) // sqlstore.Open in production
	pf := throttle.Policy{Name: "ENTRIES_READ_USER_ANTISCAN", Capacity: 100, RefillTokens: 2, RefillPeriod: time.Minute}
	lim, _ := throttle.NewLimiter(store, throttle.Policies{pf.Name: pf}, throttle.Config{Clock: clock.Now})
	ctx := context.Background()
	payer := throttle.Key{Policy: pf.Name, Env: "prod", Identifier: "11144477735"}

	lim.Take(ctx, "", throttle.Charge{Key: payer, Cost: 95}) // earlier lookups
	d, _ := lim.Take(ctx, "E2E-1", throttle.Charge{Key: payer, Cost: 1})
	fmt.Println("admitted:", d.Allowed, "remaining:", d.Remaining)

	lim.Adjust(ctx, throttle.Adjustment{Key: payer, Delta: -19, Reason: throttle.LedgerPenalty, Ref: "E2E-1"})
	d, _ = lim.Take(ctx, "E2E-2", throttle.Charge{Key: payer, Cost: 1})
	fmt.Println("admitted:", d.Allowed, "reason:", d.Reason, "remaining:", d.Remaining, "retry after:", d.RetryAfter)
	// Output:
	// admitted: true remaining: 4
	// admitted: false reason: empty remaining: -15 retry after: 8m0s
}

func ExamplePolicy_String() {
	p := throttle.Policy{Name: "SIFEN_RECEPCION_LOTE", Capacity: 6, RefillTokens: 6, RefillPeriod: time.Minute,
		Refill: throttle.RefillStepwise, MinInterval: 10 * time.Second}
	fmt.Println(p)
	// Output: SIFEN_RECEPCION_LOTE: 6/min (capacity 6, stepwise, every 10s at most)
}

// The pessimistic reservation of a DICT lookup: admitted while the balance
// is positive (Admit 1), it holds the worst case (a 404: 20) until the
// answer refunds the difference. The manual's example: 5 tokens, a 404
// leaves -15, positive again 8 minutes later at 2 tokens a minute.
func ExampleCharge_admit() {
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := throttletest.NewMemStore(clock.Now)
	pf := throttle.Policy{Name: "ENTRIES_READ_USER_ANTISCAN", Capacity: 100, RefillTokens: 2, RefillPeriod: time.Minute}
	lim, _ := throttle.NewLimiter(store, throttle.Policies{pf.Name: pf}, throttle.Config{Clock: clock.Now})
	ctx := context.Background()
	payer := throttle.Key{Policy: pf.Name, Env: "prod", Identifier: "11144477735"}

	lim.Take(ctx, "", throttle.Charge{Key: payer, Cost: 95}) // earlier lookups
	d, _ := lim.Take(ctx, "E2E-1", throttle.Charge{Key: payer, Cost: 20, Admit: 1})
	fmt.Println("admitted:", d.Allowed, "remaining:", d.Remaining) // the answer is a 404: nothing to refund
	d, _ = lim.Take(ctx, "E2E-2", throttle.Charge{Key: payer, Cost: 20, Admit: 1})
	fmt.Println("admitted:", d.Allowed, "retry after:", d.RetryAfter)
	// Output:
	// admitted: true remaining: -15
	// admitted: false retry after: 8m0s
}
