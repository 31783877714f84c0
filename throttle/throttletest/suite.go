package throttletest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// OpenStore opens an empty store for one test, reading time from clock. It
// registers its own cleanup.
type OpenStore func(t *testing.T, clock throttle.Clock) FullStore

// TestStore runs the engine's behaviour tests through a Limiter over stores
// opened by open. Every Store implementation must pass it: that is what makes
// the in-memory, SQLite and PostgreSQL stores interchangeable.
func TestStore(t *testing.T, open OpenStore) {
	// A test without fn plays steps on keyA of a fresh store with policy.
	tests := []struct {
		name   string
		fn     func(t *testing.T, open OpenStore)
		policy throttle.Policy
		steps  []step
	}{
		{name: "PenaltyRetryAfterIsExact", fn: testPenaltyRetryAfter},
		{name: "PessimisticReservation", fn: testPessimisticReservation},
		{name: "RefillModes/continuous", policy: throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 10, RefillPeriod: 10 * time.Second, Refill: throttle.RefillContinuous}, steps: []step{
			{Cost: 10, WantAllowed: true, WantRemaining: 0},
			{Advance: 1500 * time.Millisecond, Cost: 1, WantAllowed: true, WantRemaining: 0}, // 1.5 tokens accrued, 0.5 carried
			{Advance: 400 * time.Millisecond, Cost: 1, WantReason: throttle.ReasonEmpty, WantRemaining: 0, WantRetry: 100 * time.Millisecond},
			{Advance: 100 * time.Millisecond, Cost: 1, WantAllowed: true, WantRemaining: 0},
		}},
		{name: "RefillModes/stepwise", policy: throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 10, RefillPeriod: 10 * time.Second, Refill: throttle.RefillStepwise}, steps: []step{
			{Cost: 10, WantAllowed: true, WantRemaining: 0},
			{Advance: 1500 * time.Millisecond, Cost: 1, WantReason: throttle.ReasonEmpty, WantRemaining: 0, WantRetry: 8500 * time.Millisecond},
			{Advance: 8500 * time.Millisecond, Cost: 10, WantAllowed: true, WantRemaining: 0}, // the whole step at once
			{Advance: 9 * time.Second, Cost: 1, WantReason: throttle.ReasonEmpty, WantRemaining: 0, WantRetry: time.Second},
		}},
		{name: "CarryIsNeverLost", fn: testCarryIsNeverLost},
		{name: "BackwardsClockCreatesNoTokens", policy: throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Second}, steps: []step{
			{Cost: 10, WantAllowed: true, WantRemaining: 0},
			// The clock steps back 10 s: no token appears, and the wait is
			// counted from the latest instant the bucket has seen.
			{Advance: -10 * time.Second, Cost: 1, WantReason: throttle.ReasonEmpty, WantRetry: 11 * time.Second},
			{Advance: 10 * time.Second, Cost: 1, WantReason: throttle.ReasonEmpty, WantRetry: time.Second},
			{Advance: time.Second, Cost: 1, WantAllowed: true, WantRemaining: 0},
		}},
		{name: "CreditCappedAndIdempotent", fn: testCredits},
		{name: "MultiKeyAllOrNothing", fn: testMultiKey},
		{name: "Cooldown", fn: testCooldown},
		{name: "BlockAfterRefusal", policy: throttle.Policy{Name: "P", Capacity: 2, RefillTokens: 2, RefillPeriod: time.Minute, BlockFor: 5 * time.Minute}, steps: []step{
			{Cost: 1, WantAllowed: true, WantRemaining: 1},
			{Cost: 1, WantAllowed: true, WantRemaining: 0},
			// Over the limit: blocked for 5 minutes, even though tokens come
			// back sooner.
			{Cost: 1, WantReason: throttle.ReasonBlocked, WantRetry: 5 * time.Minute},
			{Advance: time.Minute, Cost: 1, WantReason: throttle.ReasonBlocked, WantRemaining: 2, WantRetry: 4 * time.Minute},
			{Advance: 4 * time.Minute, Cost: 1, WantAllowed: true, WantRemaining: 1},
		}},
		{name: "RollingWindow", policy: throttle.Policy{Name: "P", Capacity: 3, RefillTokens: 3, RefillPeriod: 10 * time.Second, Refill: throttle.RefillRolling}, steps: []step{
			{Cost: 1, WantAllowed: true, WantRemaining: 2},
			{Advance: time.Second, Cost: 1, WantAllowed: true, WantRemaining: 1},
			{Advance: time.Second, Cost: 1, WantAllowed: true, WantRemaining: 0},
			// At most 3 in any 10 s: the first comes back at 10 s.
			{Advance: time.Second, Cost: 1, WantReason: throttle.ReasonEmpty, WantRetry: 7 * time.Second},
			{Advance: 7 * time.Second, Cost: 1, WantAllowed: true, WantRemaining: 0},
			{Advance: 500 * time.Millisecond, Cost: 1, WantReason: throttle.ReasonEmpty, WantRetry: 500 * time.Millisecond},
			{Advance: 500 * time.Millisecond, Cost: 1, WantAllowed: true, WantRemaining: 0},
		}},
		{name: "SeverityChanges", fn: testSeverity},
		{name: "SeverityNow", fn: testSeverityNow},
		{name: "Sync", fn: testSync},
		{name: "AdjustAndSyncIsOneTransaction", fn: testAdjustAndSync},
		{name: "Reset", fn: testReset},
		{name: "HoldUntilTheAnswer", fn: testHoldUntilTheAnswer},
		{name: "EscalatingBlock", fn: testEscalatingBlock},
		{name: "LedgerExplainsBalance", fn: testLedgerReplay},
		{name: "LedgerAggregatesTakes", fn: testLedgerAggregate},
		{name: "LedgerGranularityPerPolicy", fn: testLedgerPerPolicy},
		{name: "LedgerPerBucketPages", fn: testLedgerPerBucket},
		{name: "LedgerWindowFoldsSlots", fn: testLedgerWindow},
		{name: "ListAndPaginate", fn: testList},
		{name: "PruneKeepsResults", fn: testPrune},
		{name: "PruneRemovesEveryRefusalByItsOwnTime", fn: testPruneRefusals},
		{name: "BadInputChangesNothing", fn: testBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fn == nil {
				env(t, open, tt.policy).play(keyA, tt.steps)
				return
			}
			tt.fn(t, open)
		})
	}
}

// Env is a Limiter over a fresh store with a fake clock.
type Env struct {
	T       *testing.T
	Clock   *throttle.ManualClock
	Store   FullStore
	Limiter *throttle.Limiter
	// Reader reads Store as Limiter sees it (listings, counts, ledger).
	Reader *inspect.Reader
	Notes  *Recorder
}

// NewEnv opens a store and a limiter resolving policies.
func NewEnv(t *testing.T, open OpenStore, policies throttle.Resolver, cfg throttle.Config) *Env {
	t.Helper()
	e := &Env{T: t, Clock: throttle.NewManualClock(Epoch), Notes: &Recorder{}}
	e.Store = open(t, e.Clock.Now)
	cfg.Clock, cfg.Notifier = e.Clock.Now, e.Notes
	e.Limiter = must(throttle.NewLimiter(e.Store, policies, cfg))(t)
	e.Reader = inspect.New(e.Limiter, e.Store)
	return e
}

// NewMemEnv is NewEnv over a MemStore, with policies resolved by name
// (throttle.Policies) and the default Config.
func NewMemEnv(t *testing.T, policies ...throttle.Policy) *Env {
	t.Helper()
	return env(t, func(_ *testing.T, now throttle.Clock) FullStore { return NewMemStore(now) }, policies...)
}

// must returns v, failing t when err is not nil: must(f())(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}

// Take charges cost on key and fails the test on error.
func (e *Env) Take(key throttle.Key, cost int64) throttle.Decision {
	e.T.Helper()
	return e.take("", throttle.Charge{Key: key, Cost: cost})
}

// State reads key's state and fails the test on error.
func (e *Env) State(key throttle.Key) throttle.BucketState {
	e.T.Helper()
	return must(e.Limiter.State(context.Background(), key))(e.T)
}

// The methods below call the Limiter or the Reader and fail the test on error.

func (e *Env) take(ref string, charges ...throttle.Charge) throttle.Decision {
	e.T.Helper()
	return must(e.Limiter.Take(context.Background(), ref, charges...))(e.T)
}

func (e *Env) adjust(adjs ...throttle.Adjustment) []throttle.Adjusted {
	e.T.Helper()
	return must(e.Limiter.Adjust(context.Background(), adjs...))(e.T)
}

func (e *Env) sync(targets ...throttle.SyncTarget) []throttle.Adjusted {
	e.T.Helper()
	return must(e.Limiter.Sync(context.Background(), targets...))(e.T)
}

func (e *Env) reset(key throttle.Key, actor string) throttle.BucketState {
	e.T.Helper()
	return must(e.Limiter.Reset(context.Background(), key, actor))(e.T)
}

func (e *Env) list(f inspect.Filter) []throttle.BucketState {
	e.T.Helper()
	return must(e.Reader.List(context.Background(), f))(e.T).States
}

// ledger reads q's rows: one page, or with q.Limit set, its pages of
// q.Limit rows to the last.
func (e *Env) ledger(q inspect.LedgerQuery) []throttle.LedgerEntry {
	e.T.Helper()
	var all []throttle.LedgerEntry
	for {
		page := must(e.Reader.Ledger(context.Background(), q))(e.T)
		all = append(all, page...)
		if q.Limit == 0 || len(page) < q.Limit {
			return all
		}
		q.BeforeID = inspect.NextLedgerCursor(page)
	}
}

func (e *Env) countLedger(q inspect.LedgerQuery) int64 {
	e.T.Helper()
	return must(e.Reader.CountLedger(context.Background(), q))(e.T)
}

func (e *Env) window(q inspect.LedgerWindowQuery) inspect.LedgerWindow {
	e.T.Helper()
	return must(e.Reader.LedgerWindow(context.Background(), q))(e.T)
}

// Recorder is a Notifier that keeps what it was told.
type Recorder struct {
	mu      sync.Mutex
	Changes []throttle.SeverityChange
}

// Notify implements throttle.Notifier.
func (r *Recorder) Notify(_ context.Context, c throttle.SeverityChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Changes = append(r.Changes, c)
}

// step is one request of a step table: after moving the clock by Advance,
// take Cost from the key and expect the decision.
type step struct {
	Advance       time.Duration
	Cost          int64
	WantAllowed   bool
	WantReason    throttle.Reason
	WantRemaining int64
	WantRetry     time.Duration
}

// play plays steps against key and reports the index of a failing step.
func (e *Env) play(key throttle.Key, steps []step) {
	e.T.Helper()
	for i, s := range steps {
		e.Clock.Advance(s.Advance)
		d := e.Take(key, s.Cost)
		got := step{Advance: s.Advance, Cost: s.Cost, WantAllowed: d.Allowed, WantReason: d.Reason, WantRemaining: d.Remaining, WantRetry: d.RetryAfter}
		require.Equal(e.T, s, got, "step %d", i)
	}
}

var (
	keyA = throttle.Key{Policy: "P", Env: "test", Identifier: "a"}
	keyB = throttle.Key{Policy: "Q", Env: "test", Identifier: "b"}
	keyC = throttle.Key{Policy: "P", Env: "test", Identifier: "c"}
)

// pf is the DICT's PF user anti-scan bucket: 2 per minute, capacity 100.
func pf(mode throttle.RefillMode) throttle.Policy {
	return throttle.Policy{Name: "P", Capacity: 100, RefillTokens: 2, RefillPeriod: time.Minute, Refill: mode}
}

// named resolves ps by name.
func named(ps ...throttle.Policy) throttle.Policies {
	byName := throttle.Policies{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	return byName
}

// env is NewEnv over ps with the default Config.
func env(t *testing.T, open OpenStore, ps ...throttle.Policy) *Env {
	t.Helper()
	return NewEnv(t, open, named(ps...), throttle.Config{})
}

func testPenaltyRetryAfter(t *testing.T, open OpenStore) {
	// The DICT manual's example: a PF payer with 5 tokens whose lookup
	// returns 404 is at -15 and may look up again only after 8 minutes. 1 ns
	// before, continuous lacks a sliver of the 16th token; stepwise has had
	// 7 steps of 2.
	tests := []struct {
		mode           throttle.RefillMode
		wantJustBefore int64
	}{{throttle.RefillContinuous, 0}, {throttle.RefillStepwise, -1}}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			e := env(t, open, pf(tt.mode))
			e.play(keyA, []step{
				{Cost: 95, WantAllowed: true, WantRemaining: 5},
				{Cost: 1, WantAllowed: true, WantRemaining: 4}, // the lookup is reserved
			})
			// It returned 404: 20 in all, 19 more than reserved.
			require.Equal(t, int64(-15), e.adjust(throttle.Adjustment{Key: keyA, Delta: -19, Reason: throttle.LedgerPenalty, Ref: "404"})[0].Balance)
			e.play(keyA, []step{
				{Cost: 1, WantReason: throttle.ReasonEmpty, WantRemaining: -15, WantRetry: 8 * time.Minute},
				{Advance: 8*time.Minute - time.Nanosecond, Cost: 1, WantReason: throttle.ReasonEmpty, WantRemaining: tt.wantJustBefore, WantRetry: time.Nanosecond},
				{Advance: time.Nanosecond, Cost: 1, WantAllowed: true, WantRemaining: 0},
			})
		})
	}
}

func testPessimisticReservation(t *testing.T, open OpenStore) {
	// The DICT admits a lookup while the balance is positive and charges it
	// by outcome: the mirror holds the worst case (20) at admission and
	// refunds the difference. The manual's example still holds exactly: 5
	// tokens, a 404 -> -15, positive again after 8 minutes at 2/min.
	hold := func(e *Env) throttle.Decision { return e.take("E2E", throttle.Charge{Key: keyA, Cost: 20, Admit: 1}) }
	t.Run("404KeepsTheHold", func(t *testing.T) {
		e := env(t, open, pf(throttle.RefillContinuous))
		e.play(keyA, []step{{Cost: 95, WantAllowed: true, WantRemaining: 5}})
		d := hold(e)
		require.True(t, d.Allowed)
		require.Equal(t, int64(-15), d.Remaining)
		require.Equal(t, int64(20), d.Buckets[0].Cost)
		d = hold(e)
		require.Equal(t, throttle.ReasonEmpty, d.Reason)
		require.Equal(t, 8*time.Minute, d.RetryAfter)
		require.Equal(t, int64(-15), d.Remaining)
		e.Clock.Advance(8 * time.Minute)
		require.True(t, hold(e).Allowed)
	})
	t.Run("200RefundsTheDifference", func(t *testing.T) {
		e := env(t, open, pf(throttle.RefillStepwise))
		e.play(keyA, []step{{Cost: 95, WantAllowed: true, WantRemaining: 5}})
		require.Equal(t, int64(-15), hold(e).Remaining)
		require.Equal(t, int64(4), e.adjust(throttle.Adjustment{Key: keyA, Delta: 19, Reason: throttle.LedgerRefund, Ref: "E2E"})[0].Balance)
	})
	t.Run("InFlightNeverOverdraw", func(t *testing.T) {
		// Five lookups in flight take 100 and the sixth is refused: however
		// their answers come, the DICT's bucket cannot go below the mirror's.
		e := env(t, open, pf(throttle.RefillStepwise))
		for i := range 5 {
			require.True(t, hold(e).Allowed, "lookup %d", i)
		}
		d := hold(e)
		require.False(t, d.Allowed)
		require.Equal(t, int64(0), d.Remaining)
		// A refusal answered from memory uses the same admission rule.
		require.False(t, hold(e).Allowed)
	})
}

func testCarryIsNeverLost(t *testing.T, open OpenStore) {
	// 7 tokens per 3 s: a token every 428571428.57 ns, not a whole number.
	// A thousand takes one millisecond apart must leave the same balance as
	// the same thousand tokens taken at once a second later.
	p := throttle.Policy{Name: "P", Capacity: 5000, RefillTokens: 7, RefillPeriod: 3 * time.Second}
	slow := NewEnv(t, open, named(p), throttle.Config{Ledger: throttle.LedgerNoTakes})
	fast := NewEnv(t, open, named(p), throttle.Config{Ledger: throttle.LedgerNoTakes})
	for _, e := range []*Env{slow, fast} {
		require.True(t, e.Take(keyA, 3000).Allowed)
	}
	for range 1000 {
		slow.Clock.Advance(time.Millisecond)
		require.True(t, slow.Take(keyA, 1).Allowed)
	}
	fast.Clock.Advance(time.Second)
	require.True(t, fast.Take(keyA, 1000).Allowed)
	s, f := slow.State(keyA), fast.State(keyA)
	require.Equal(t, f.Tokens, s.Tokens)
	require.Equal(t, f.Carry, s.Carry)
	require.Equal(t, int64(5000-3000-1000+2), s.Tokens) // 7/3 tokens per second, 1 s
	require.Equal(t, f.RetryAfter, s.RetryAfter)
}

func testCredits(t *testing.T, open OpenStore) {
	e := env(t, open, pf(throttle.RefillStepwise))
	require.True(t, e.Take(keyA, 1).Allowed)
	credit := func(ref string, n int64) throttle.Adjusted {
		return e.adjust(throttle.Adjustment{Key: keyA, Delta: n, Reason: throttle.LedgerCredit, Ref: ref})[0]
	}
	// +2 on 99 of 100: capped at capacity.
	require.Equal(t, throttle.Adjusted{Key: keyA, Applied: 1, Balance: 100}, credit("E2E-1", 2))
	require.True(t, e.Take(keyA, 10).Allowed)
	// The same reference again: nothing.
	require.Equal(t, throttle.Adjusted{Key: keyA, Balance: 90, Duplicate: true}, credit("E2E-1", 2))
	require.Equal(t, throttle.Adjusted{Key: keyA, Applied: 2, Balance: 92}, credit("E2E-2", 2))
	require.Equal(t, int64(92), e.State(keyA).Tokens)

	// Two credits with one reference in one call: the second is a duplicate.
	c := throttle.Adjustment{Key: keyA, Delta: 1, Reason: throttle.LedgerCredit, Ref: "E2E-3"}
	out := e.adjust(c, c)
	require.False(t, out[0].Duplicate)
	require.True(t, out[1].Duplicate)
	require.Equal(t, int64(93), e.State(keyA).Tokens)
}

func testMultiKey(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour},
		throttle.Policy{Name: "Q", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Hour})
	both := []throttle.Charge{{Key: keyA, Cost: 1}, {Key: keyB, Cost: 1}}
	d := e.take("r1", both...)
	require.True(t, d.Allowed)
	require.Equal(t, keyB, d.Key) // fewest tokens left
	require.Equal(t, int64(0), d.Remaining)

	d = e.take("r2", both...)
	require.False(t, d.Allowed)
	require.Equal(t, keyB, d.Key)
	require.Equal(t, throttle.ReasonEmpty, d.Reason)
	require.Equal(t, time.Hour, d.RetryAfter)
	// The first key was not charged for the refused request.
	require.Equal(t, int64(4), e.State(keyA).Tokens)
	require.Equal(t, int64(1), e.State(keyA).SendCount)
}

func testCooldown(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 100, RefillTokens: 1, RefillPeriod: time.Hour, MinInterval: 10 * time.Second})
	e.play(keyA, []step{
		{Cost: 1, WantAllowed: true, WantRemaining: 99},
		{Advance: 3 * time.Second, Cost: 1, WantReason: throttle.ReasonCooldown, WantRemaining: 99, WantRetry: 7 * time.Second},
		{Advance: 7 * time.Second, Cost: 1, WantAllowed: true, WantRemaining: 98},
	})
	s := e.State(keyA)
	require.Equal(t, int64(2), s.SendCount)
	require.Equal(t, Epoch.Add(10*time.Second), s.LastSentAt.UTC())
	require.Equal(t, 10*time.Second, s.CooldownLeft)
}

func testSeverity(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 10, RefillPeriod: time.Minute})
	require.True(t, e.Take(keyA, 5).Allowed) // 50 %: still Healthy
	require.Empty(t, e.Notes.Changes)
	require.True(t, e.Take(keyA, 1).Allowed) // 40 %
	require.True(t, e.Take(keyA, 3).Allowed) // 10 %: High (Critical is below 10 %)
	require.True(t, e.Take(keyA, 1).Allowed) // 0 %
	var got []string
	for _, c := range e.Notes.Changes {
		got = append(got, c.From.String()+">"+c.To.String())
	}
	require.Equal(t, []string{"Healthy>Medium", "Medium>High", "High>Critical"}, got)
	require.Equal(t, throttle.SeverityCritical, e.State(keyA).Bucket.Severity)
	// Refill shows the current level without writing it.
	e.Clock.Advance(time.Minute)
	s := e.State(keyA)
	require.Equal(t, throttle.SeverityHealthy, s.Severity)
	require.Equal(t, throttle.SeverityCritical, s.Bucket.Severity)

	counts := must(e.Reader.CountBySeverity(context.Background(), inspect.Filter{}))(t)
	require.Equal(t, map[throttle.Severity]int64{throttle.SeverityCritical: 1}, counts)
}

func testSync(t *testing.T, open OpenStore) {
	e := env(t, open, pf(throttle.RefillStepwise))
	// The remote side says 30 tokens: lowered; 50 is more than the mirror
	// has: never raised.
	require.Equal(t, throttle.Adjusted{Key: keyA, Applied: -70, Balance: 30}, e.sync(throttle.SyncTarget{Key: keyA, Tokens: 30, Ref: "reconcile"})[0])
	require.Equal(t, throttle.Adjusted{Key: keyA, Balance: 30}, e.sync(throttle.SyncTarget{Key: keyA, Tokens: 50})[0])
	// A remote 429 with Retry-After 90 s: empty and blocked for 90 s.
	e.sync(throttle.SyncTarget{Key: keyA, Tokens: 0, BlockFor: 90 * time.Second, Ref: "429"})
	e.play(keyA, []step{
		{Cost: 1, WantReason: throttle.ReasonBlocked, WantRetry: 90 * time.Second},
		// 90 s of stepwise refill is one step of 2 tokens.
		{Advance: 90 * time.Second, Cost: 1, WantAllowed: true, WantRemaining: 1},
	})
}

// testAdjustAndSync: a refund and a sync of the same bucket (a remote 429
// after a hold of 20) land together, the refund first; the results come in
// order, adjustments then targets; bad input changes nothing.
func testAdjustAndSync(t *testing.T, open OpenStore) {
	ctx := context.Background()
	q := pf(throttle.RefillStepwise)
	q.Name = "Q"
	e := env(t, open, pf(throttle.RefillStepwise), q)
	e.Take(keyA, 20)
	e.Take(keyB, 3)
	out := must(e.Limiter.AdjustAndSync(ctx,
		[]throttle.Adjustment{
			{Key: keyA, Delta: 20, Reason: throttle.LedgerRefund, Ref: "E2E"},
			{Key: keyB, Delta: 3, Reason: throttle.LedgerRefund, Ref: "E2E"},
		},
		[]throttle.SyncTarget{{Key: keyA, Tokens: 0, BlockFor: time.Minute, Ref: "E2E"}}))(t)
	require.Equal(t, []throttle.Adjusted{
		{Key: keyA, Applied: 20, Balance: 100},
		{Key: keyB, Applied: 3, Balance: 100},
		{Key: keyA, Applied: -100, Balance: 0},
	}, out)
	require.Equal(t, int64(0), e.State(keyA).Tokens)
	require.Equal(t, int64(100), e.State(keyB).Tokens)
	require.Equal(t, throttle.ReasonBlocked, e.Take(keyA, 1).Reason)

	_, err := e.Limiter.AdjustAndSync(ctx,
		[]throttle.Adjustment{{Key: keyB, Delta: -1, Reason: throttle.LedgerPenalty}},
		[]throttle.SyncTarget{{Key: keyB, BlockFor: -time.Second}})
	require.ErrorIs(t, err, throttle.ErrInvalidAdjustment)
	require.Equal(t, int64(100), e.State(keyB).Tokens, "nothing changed")
}

func testReset(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 2, RefillTokens: 1, RefillPeriod: time.Hour, MinInterval: time.Minute, BlockFor: time.Hour})
	e.Take(keyA, 2)
	require.Equal(t, throttle.ReasonBlocked, e.Take(keyA, 1).Reason)

	s := e.reset(keyA, "alice")
	require.Equal(t, int64(2), s.Tokens)
	require.Zero(t, s.BlockLeft)
	require.Zero(t, s.CooldownLeft)
	require.True(t, e.Take(keyA, 1).Allowed)

	entries := e.ledger(inspect.LedgerQuery{Key: &keyA, Reasons: []throttle.LedgerReason{throttle.LedgerReset}})
	require.Len(t, entries, 1)
	require.Equal(t, "alice", entries[0].Ref)
	require.Equal(t, int64(2), entries[0].Delta)

	_, err := e.Limiter.Reset(context.Background(), keyA, "")
	require.ErrorIs(t, err, throttle.ErrInvalidAdjustment)
}

// testHoldUntilTheAnswer: a take with HoldFor holds its key however full
// the bucket is, as a cooldown of the policy's interval at least, the hold's
// end at most; the Sync of its answer ends the hold and starts the interval.
func testHoldUntilTheAnswer(t *testing.T, open OpenStore) {
	ctx := context.Background()
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 1, RefillTokens: 1, RefillPeriod: 10 * time.Second, MinInterval: 10 * time.Second})
	take := func() throttle.Decision {
		return e.take("lot", throttle.Charge{Key: keyA, Cost: 1, HoldFor: time.Minute})
	}
	d := take()
	require.True(t, d.Allowed)
	held := d.Buckets[0].HeldUntil
	require.Equal(t, Epoch.Add(time.Minute), held)

	// 30 s on the wire: the token is back, the hold refuses, as a cooldown
	// of one interval (the answer cannot come before now).
	e.Clock.Advance(30 * time.Second)
	d = take()
	require.False(t, d.Allowed)
	require.Equal(t, throttle.ReasonCooldown, d.Reason)
	require.Equal(t, 10*time.Second, d.RetryAfter)
	s := e.State(keyA)
	require.Equal(t, 10*time.Second, s.CooldownLeft, "the state says what the take says")
	require.Equal(t, held, s.HeldUntil)
	require.Equal(t, throttle.SeverityHealthy, s.Severity, "a request on the wire is no trouble")
	// 55 s: the hold ends in 5 s at the latest.
	e.Clock.Advance(25 * time.Second)
	require.Equal(t, 5*time.Second, take().RetryAfter)

	// The answer at 55 s: 10 s from it, not from the take.
	e.sync(throttle.SyncTarget{Key: keyA, Tokens: throttle.MaxTokens, Cooldown: 10 * time.Second, Hold: held, Ref: "answer"})
	s = e.State(keyA)
	require.Equal(t, 10*time.Second, s.RetryAfter)
	require.True(t, s.HeldUntil.IsZero())
	require.Equal(t, throttle.ReasonCooldown, take().Reason)
	e.Clock.Advance(10 * time.Second)
	d = take()
	require.True(t, d.Allowed)

	// A late answer to the first request leaves the second's hold alone.
	e.sync(throttle.SyncTarget{Key: keyA, Tokens: throttle.MaxTokens, Cooldown: 10 * time.Second, Hold: held})
	require.Equal(t, d.Buckets[0].HeldUntil, e.State(keyA).HeldUntil)

	// A reset clears the interval, not the hold (the request is on the wire).
	e.sync(throttle.SyncTarget{Key: keyA, Tokens: throttle.MaxTokens, Hold: d.Buckets[0].HeldUntil})
	require.Equal(t, 10*time.Second, e.State(keyA).RetryAfter, "the late answer's interval")
	require.Zero(t, e.reset(keyA, "alice").RetryAfter)
	d = take()
	require.True(t, d.Allowed)
	require.Equal(t, d.Buckets[0].HeldUntil, e.reset(keyA, "alice").HeldUntil, "a reset does not end a request on the wire")
	require.False(t, take().Allowed)

	_, err := e.Limiter.Sync(ctx, throttle.SyncTarget{Key: keyA, Cooldown: -time.Second})
	require.ErrorIs(t, err, throttle.ErrInvalidAdjustment)
	_, err = e.Limiter.Take(ctx, "", throttle.Charge{Key: keyA, Cost: 1, HoldFor: -time.Second})
	require.ErrorIs(t, err, throttle.ErrInvalidCost)
}

// testEscalatingBlock: each escalating sync blocks one step longer, up to
// the limit; the level starts again after Memory without a block; a reset
// lifts the block but keeps the level (the remote side's history).
func testEscalatingBlock(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 1, RefillTokens: 1, RefillPeriod: 10 * time.Second, MinInterval: 10 * time.Second})
	block := func() throttle.Adjusted {
		return e.sync(throttle.SyncTarget{Key: keyA, Tokens: throttle.MaxTokens, BlockFor: 10 * time.Minute,
			Escalate: true, BlockMax: 25 * time.Minute, Memory: time.Hour, Ref: "0301"})[0]
	}
	for i, want := range []time.Duration{10 * time.Minute, 20 * time.Minute, 25 * time.Minute} {
		out := block()
		require.Equal(t, int64(i+1), out.BlockLevel)
		require.Equal(t, want, out.BlockedFor)
		s := e.State(keyA)
		require.Equal(t, want, s.BlockLeft)
		require.Equal(t, int64(i+1), s.BlockLevel)
		require.Equal(t, throttle.SeverityHigh, s.Severity)
		e.Clock.Advance(want)
	}
	require.Equal(t, int64(3), e.reset(keyA, "alice").BlockLevel, "a reset keeps the level")
	require.Equal(t, int64(4), block().BlockLevel)
	e.Clock.Advance(25*time.Minute + time.Hour)
	out := block()
	require.Equal(t, int64(1), out.BlockLevel, "an hour without a block: from the first step again")
	require.Equal(t, 10*time.Minute, out.BlockedFor)
}

func testLedgerReplay(t *testing.T, open OpenStore) {
	for _, mode := range []throttle.RefillMode{throttle.RefillContinuous, throttle.RefillStepwise} {
		t.Run(mode.String(), func(t *testing.T) {
			p := throttle.Policy{Name: "P", Capacity: 20, RefillTokens: 7, RefillPeriod: 3 * time.Second, Refill: mode}
			e := env(t, open, p)
			// A mixed history: takes, refusals, penalties, credits, a reset.
			for i := range 200 {
				e.Clock.Advance(time.Duration(i%7) * 37 * time.Millisecond)
				d := e.Take(keyA, 1+int64(i%3))
				switch {
				case d.Allowed && i%5 == 0:
					e.adjust(throttle.Adjustment{Key: keyA, Delta: -4, Reason: throttle.LedgerPenalty})
				case d.Allowed && i%11 == 0:
					e.adjust(throttle.Adjustment{Key: keyA, Delta: 3, Reason: throttle.LedgerCredit, Ref: fmt.Sprint("E", i)})
				case i == 150:
					e.reset(keyA, "bob")
				}
			}
			entries := e.written(keyA)
			b := must(throttle.Replay(p, entries))(t)
			s := e.State(keyA)
			b.Refill(p, s.At)
			require.Equal(t, s.Tokens, b.Tokens)
			require.Equal(t, s.Carry, b.Carry)
		})
	}
}

// written reads every ledger row of k in the order the store wrote them,
// the order Replay needs: a refusal row flushed late is written after
// younger rows (decision 0007).
func (e *Env) written(k throttle.Key) []throttle.LedgerEntry {
	e.T.Helper()
	es := e.ledger(inspect.LedgerQuery{Key: &k, Limit: inspect.MaxPageSize})
	slices.SortFunc(es, func(a, b throttle.LedgerEntry) int { return cmp.Compare(a.ID, b.ID) })
	return es
}

func testLedgerAggregate(t *testing.T, open OpenStore) {
	p := throttle.Policy{Name: "P", Capacity: 1000, RefillTokens: 1, RefillPeriod: time.Hour}
	e := NewEnv(t, open, named(p), throttle.Config{Ledger: throttle.LedgerAggregateTakes})
	for range 10 {
		e.Clock.Advance(time.Second)
		e.Take(keyA, 2)
	}
	e.adjust(throttle.Adjustment{Key: keyA, Delta: -20, Reason: throttle.LedgerPenalty, Ref: "404"})
	e.Clock.Advance(time.Minute)
	e.Take(keyA, 1)

	entries := e.written(keyA)
	require.Len(t, entries, 3) // one take row per minute, the penalty alone
	require.Equal(t, throttle.LedgerTake, entries[0].Reason)
	require.Equal(t, int64(10), entries[0].Count)
	require.Equal(t, int64(-20), entries[0].Delta)
	require.Equal(t, int64(980), entries[0].Balance)
	require.Equal(t, throttle.LedgerPenalty, entries[1].Reason)
	require.Equal(t, int64(1), entries[2].Count)
	require.Equal(t, int64(11), e.countLedger(inspect.LedgerQuery{Key: &keyA, Reasons: []throttle.LedgerReason{throttle.LedgerTake}}))
}

// testLedgerPerPolicy: a policy folding its takes per minute
// (Policy.Ledger), a DICT policy at the limiter's default (a row per take)
// and one writing no takes but its refusals share a limiter.
func testLedgerPerPolicy(t *testing.T, open OpenStore) {
	sms := throttle.Policy{Name: "SMS", Capacity: 1000, RefillTokens: 10, RefillPeriod: time.Second, Ledger: throttle.LedgerAggregateTakes}
	dict := pf(throttle.RefillStepwise) // Ledger left at LedgerDefault
	quiet := throttle.Policy{Name: "QUIET", Capacity: 3, RefillTokens: 1, RefillPeriod: time.Hour, Ledger: throttle.LedgerNoTakes}
	e := env(t, open, sms, dict, quiet)
	keySMS := throttle.Key{Policy: "SMS", Env: "test", Identifier: "account-1"}
	keyDict := throttle.Key{Policy: dict.Name, Env: "test", Identifier: "12345678901"}
	keyQuiet := throttle.Key{Policy: "QUIET", Env: "test", Identifier: "q"}
	var smsTakes, dictTakes int64
	for i := range 180 {
		e.Clock.Advance(time.Second)
		if e.Take(keySMS, 5).Allowed {
			smsTakes++
		}
		if i%20 == 0 {
			// One request charging both: each key at its own granularity.
			require.True(t, e.take("E2E", throttle.Charge{Key: keySMS, Cost: 1}, throttle.Charge{Key: keyDict, Cost: 1}).Allowed)
			smsTakes++
			dictTakes++
		}
	}
	for range 5 {
		e.Take(keyQuiet, 1)
	}
	require.NoError(t, e.Limiter.FlushRefusals(context.Background()))
	// The DICT bucket: one row per take, and Replay explains its balance.
	dictRows := e.written(keyDict)
	require.Len(t, dictRows, int(dictTakes))
	for _, en := range dictRows {
		require.Equal(t, int64(1), en.Count)
		require.Equal(t, "E2E", en.Ref)
	}
	b := must(throttle.Replay(dict, dictRows))(t)
	st := e.State(keyDict)
	b.Refill(dict, st.At)
	require.Equal(t, st.Tokens, b.Tokens)

	// The SMS bucket: at most one take row per minute, counting every take;
	// the newest row's balance is the bucket's, and the window folded in
	// the store is FoldLedger's.
	smsRows := e.written(keySMS)
	require.LessOrEqual(t, len(smsRows), 4, "180 s of takes in at most 4 minutes")
	var events int64
	for _, en := range smsRows {
		require.Equal(t, throttle.LedgerTake, en.Reason)
		events += en.Count
	}
	require.Equal(t, smsTakes, events)
	require.Equal(t, smsTakes, e.countLedger(inspect.LedgerQuery{Key: &keySMS, Reasons: []throttle.LedgerReason{throttle.LedgerTake}}))
	require.Equal(t, e.State(keySMS).Tokens, smsRows[len(smsRows)-1].Balance)
	now := e.Clock.Now()
	wq := inspect.LedgerWindowQuery{Key: keySMS, From: now.Add(-time.Hour), To: now, Slots: 60}
	require.Equal(t, inspect.FoldLedger(smsRows, wq), e.window(wq))

	// QUIET: no take rows, its refusals still there.
	quietRows := e.written(keyQuiet)
	require.Len(t, quietRows, 2)
	for _, en := range quietRows {
		require.Equal(t, throttle.LedgerRefusedEmpty, en.Reason)
	}
}

func testLedgerPerBucket(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 100, RefillTokens: 1, RefillPeriod: time.Hour})
	// Two buckets written in turn, sometimes in one request.
	for i := range 7 {
		e.Take(keyA, 1)
		e.Take(keyC, 2)
		if i%3 == 0 {
			e.take("", throttle.Charge{Key: keyA, Cost: 1}, throttle.Charge{Key: keyC, Cost: 1})
		}
	}
	// keyA: 7 single takes and 3 joint ones; pages of 4, newest first.
	var balances []int64
	for _, en := range e.ledger(inspect.LedgerQuery{Key: &keyA, Limit: 4}) {
		require.Equal(t, keyA, en.Key)
		balances = append(balances, en.Balance)
	}
	require.Equal(t, []int64{90, 91, 92, 93, 94, 95, 96, 97, 98, 99}, balances)
	require.Equal(t, int64(10), e.countLedger(inspect.LedgerQuery{Key: &keyC}))
}

// testLedgerWindow checks a store's LedgerWindow against inspect.FoldLedger,
// with another bucket's rows interleaved and refusals throughout (demand
// 2.6 a minute, supply 2).
func testLedgerWindow(t *testing.T, open OpenStore) {
	for _, g := range []throttle.LedgerGranularity{throttle.LedgerEveryTake, throttle.LedgerAggregateTakes} {
		t.Run(g.String(), func(t *testing.T) {
			p := throttle.Policy{Name: "P", Capacity: 3, RefillTokens: 2, RefillPeriod: time.Minute, Refill: throttle.RefillStepwise}
			e := NewEnv(t, open, named(p), throttle.Config{Ledger: g})
			for i := range 200 {
				e.Clock.Advance(23 * time.Second)
				e.Take(keyA, 1)
				if i%4 == 0 {
					e.Take(keyC, 1)
				}
				if i == 120 {
					e.adjust(throttle.Adjustment{Key: keyA, Delta: -2, Reason: throttle.LedgerPenalty, Ref: "404"})
				}
			}
			all := e.written(keyA)
			slices.Reverse(all) // newest written first: the scenario below is about the written order
			now := e.Clock.Now()

			// The last hour in 40 slots of 90 s.
			wq := inspect.LedgerWindowQuery{Key: keyA, From: now.Add(-time.Hour), To: now, Slots: 40}
			got := e.window(wq)
			want := inspect.FoldLedger(all, wq)
			require.Equal(t, want, got)
			require.False(t, got.Partial)
			require.Len(t, got.Slots, 40, "every slot of 90 s has a row")
			require.Equal(t, 0, got.Slots[0].Index)
			require.Equal(t, wq.From, got.Slots[0].Start)
			var refused, events int64
			for _, sl := range got.Slots {
				refused, events = refused+sl.Refused, events+sl.Events
			}
			// all is newest first: newest is the latest balance change.
			var wantRefused, wantEvents int64
			var newest *throttle.LedgerEntry
			for i, en := range all {
				switch {
				case en.At.Before(wq.From):
				case slices.Contains(throttle.RefusalReasons, en.Reason):
					wantRefused += en.Count
				default:
					wantEvents += en.Count
					if newest == nil {
						newest = &all[i]
					}
				}
			}
			require.Positive(t, wantRefused)
			require.Equal(t, wantRefused, refused)
			require.Equal(t, wantEvents, events)
			last := got.Slots[len(got.Slots)-1]
			for i := len(got.Slots) - 1; last.Changes == 0; i-- {
				last = got.Slots[i]
			}
			require.Equal(t, newest.Balance, last.Close)

			// A window starting just after a refusal that an aggregated
			// row of the same minute follows in the ledger (its time is the
			// minute's start, before the refusal's): the refusal is in.
			if g == throttle.LedgerAggregateTakes {
				var from time.Time
				for i := 1; i < len(all); i++ { // all is newest first
					if slices.Contains(throttle.RefusalReasons, all[i].Reason) && all[i-1].Count >= 1 &&
						all[i-1].Reason == throttle.LedgerTake && all[i-1].At.Before(all[i].At) && all[i].At.After(now.Add(-30*time.Minute)) {
						from = all[i].At
						break
					}
				}
				require.False(t, from.IsZero(), "the scenario has a refusal followed by an earlier aggregated row")
				wq := inspect.LedgerWindowQuery{Key: keyA, From: from, To: now, Slots: 7}
				got := e.window(wq)
				require.Equal(t, inspect.FoldLedger(all, wq), got)
				require.Equal(t, from, got.Slots[0].FirstRefused)
			}

			// A bucket with no row has no slots; a bad query is an error.
			require.Empty(t, e.window(inspect.LedgerWindowQuery{Key: throttle.Key{Policy: "P", Env: "test", Identifier: "zz"}, From: wq.From, To: now, Slots: 10}).Slots)
			_, err := e.Reader.LedgerWindow(context.Background(), inspect.LedgerWindowQuery{Key: keyA, From: now, To: now, Slots: 10})
			require.ErrorIs(t, err, throttle.ErrInvalidQuery)
		})
	}
}

func testList(t *testing.T, open OpenStore) {
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour},
		throttle.Policy{Name: "Q", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour})
	var want []throttle.Key
	for _, pol := range []string{"P", "Q"} {
		for _, env := range []string{"prod", "test"} {
			for i := range 7 {
				k := throttle.Key{Policy: pol, Env: env, Identifier: fmt.Sprintf("id-%02d", i)}
				e.Take(k, 1)
				want = append(want, k)
			}
		}
	}
	var got []throttle.Key
	f := inspect.Filter{Limit: 5}
	pages := 0
	for {
		page := must(e.Reader.List(context.Background(), f))(t)
		pages++
		for _, s := range page.States {
			require.Equal(t, int64(9), s.Tokens)
			got = append(got, s.Key)
		}
		if page.Next == "" {
			break
		}
		f.After = must(inspect.DecodeCursor(page.Next))(t)
	}
	require.Equal(t, 6, pages)
	require.ElementsMatch(t, want, got)
	require.Len(t, got, len(want)) // no key twice

	states := e.list(inspect.Filter{Policy: "Q", Env: "test", IdentifierPrefix: "id-0", Limit: 100})
	require.Len(t, states, 7)
	for _, s := range states {
		require.Equal(t, "Q", s.Key.Policy)
		require.Equal(t, "test", s.Key.Env)
	}
	require.Len(t, e.list(inspect.Filter{IdentifierPrefix: "id-03"}), 4)
}

func testPrune(t *testing.T, open OpenStore) {
	ctx := context.Background()
	p := throttle.Policy{Name: "P", Capacity: 3, RefillTokens: 1, RefillPeriod: time.Minute}
	pruned := env(t, open, p)
	control := env(t, open, p)
	keys := []throttle.Key{keyA, keyC}
	play := func(round int) []throttle.Decision {
		var out []throttle.Decision
		for _, e := range []*Env{pruned, control} {
			e.Clock.Advance(time.Duration(round%4) * 40 * time.Second)
			for i, k := range keys {
				out = append(out, e.Take(k, int64(1+(round+i)%2)))
			}
		}
		return out
	}
	for round := range 30 {
		d := play(round)
		// Both stores answered the same.
		require.Equal(t, d[:2], d[2:], "round %d", round)
		if round%5 == 4 {
			must(pruned.Limiter.Prune(ctx, throttle.PruneOptions{Retention: time.Minute, Batch: 2, BucketBatch: 2}))(t)
		}
	}
	// After a long idle time every bucket is full: all rows go.
	pruned.Clock.Advance(time.Hour)
	res := must(pruned.Limiter.Prune(ctx, throttle.PruneOptions{Retention: time.Minute, Batch: 1, BucketBatch: 1}))(t)
	require.Equal(t, int64(2), res.Buckets)
	require.Zero(t, pruned.countLedger(inspect.LedgerQuery{}))
	require.Empty(t, pruned.list(inspect.Filter{}))
	require.Equal(t, int64(3), pruned.State(keyA).Tokens)
}

// testPruneRefusals: a row of refusals answered from memory is written when
// the key is next used, maybe weeks later, after younger rows, stamped with
// its newest refusal. Every refusal row goes by its own time, a row of
// several as soon as its oldest may be past the retention, and the bucket's
// chain of rows stays whole.
func testPruneRefusals(t *testing.T, open OpenStore) {
	ctx := context.Background()
	ps := named(throttle.Policy{Name: "P", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Hour},
		throttle.Policy{Name: "Q", Capacity: 100, RefillTokens: 100, RefillPeriod: time.Second})
	e := NewEnv(t, open, ps, throttle.Config{})
	refusals := inspect.LedgerQuery{Key: &keyA, Reasons: throttle.RefusalReasons}
	take := func(k throttle.Key, ref string) throttle.Decision {
		return e.take(ref, throttle.Charge{Key: k, Cost: 1})
	}

	// history refuses keyA 24 times from memory; at day 20 it writes
	// keyBRows rows of another bucket; then, at day 40, keyA again: its
	// group is written with that take, after the younger rows.
	history := func(keyBRows int) (firstFromMemory, newest time.Time) {
		require.True(t, take(keyA, "E2E-0").Allowed)
		require.False(t, take(keyA, "E2E-1").Cached) // the store's refusal, with its reference
		firstFromMemory = e.Clock.Now().Add(time.Second)
		for range 24 {
			e.Clock.Advance(time.Second)
			require.True(t, take(keyA, "E2E-n").Cached)
		}
		newest = e.Clock.Now()
		e.Clock.Advance(20 * 24 * time.Hour)
		for range keyBRows {
			e.Clock.Advance(time.Second)
			take(keyB, "")
		}
		e.Clock.Advance(20 * 24 * time.Hour)
		require.True(t, take(keyA, "E2E-40").Allowed)
		return firstFromMemory, newest
	}

	firstFromMemory, newest := history(3)
	written := e.written(keyA)
	group := written[len(written)-1]
	require.Equal(t, int64(24), group.Count, "one row holds the refusals answered from memory")
	require.Equal(t, newest, group.At, "stamped with the newest refusal")
	require.Empty(t, group.Ref)

	// A prune whose cutoff lies inside the group removes the group: its
	// oldest refusal is past the retention.
	cut := firstFromMemory.Add(time.Second)
	must(e.Limiter.Prune(ctx, throttle.PruneOptions{Retention: e.Clock.Now().Sub(cut), Batch: 1, SkipBuckets: true}))(t)
	require.Zero(t, e.countLedger(refusals), "no refusal of day 0 survives")

	// The chain of keyA is whole: its day-40 take is there and readable.
	rows := e.written(keyA)
	require.Len(t, rows, 1)
	require.Equal(t, "E2E-40", rows[0].Ref)
	require.Len(t, e.written(keyB), 3, "younger rows stay")
	take(keyA, "E2E-41")
	rows = e.written(keyA)
	require.Equal(t, "E2E-40", rows[0].Ref, "a row written after the prune links to the kept rows")
	wq := inspect.LedgerWindowQuery{Key: keyA, From: e.Clock.Now().Add(-time.Hour), To: e.Clock.Now(), Slots: 10}
	require.Equal(t, inspect.FoldLedger(rows, wq), e.window(wq))

	// The same with a 30-day retention at day 40.
	e = NewEnv(t, open, ps, throttle.Config{})
	history(1)
	must(e.Limiter.Prune(ctx, throttle.PruneOptions{Retention: 30 * 24 * time.Hour, SkipBuckets: true}))(t)
	require.Zero(t, e.countLedger(refusals), "a 40-day-old refusal row does not survive a 30-day prune")
	require.Len(t, e.written(keyB), 1)
	require.Len(t, e.written(keyA), 1)
}

func testBadInput(t *testing.T, open OpenStore) {
	ctx := context.Background()
	e := env(t, open, throttle.Policy{Name: "P", Capacity: 3, RefillTokens: 1, RefillPeriod: time.Minute})
	tests := []struct {
		name    string
		charges []throttle.Charge
		want    error
	}{
		{"ErrUnknownPolicy", []throttle.Charge{{Key: throttle.Key{Policy: "NOPE", Env: "test", Identifier: "a"}, Cost: 1}}, throttle.ErrUnknownPolicy},
		{"ErrInvalidKeyEmptyEnv", []throttle.Charge{{Key: throttle.Key{Policy: "P", Identifier: "a"}, Cost: 1}}, throttle.ErrInvalidKey},
		{"ErrInvalidKeyControlChar", []throttle.Charge{{Key: throttle.Key{Policy: "P", Env: "test", Identifier: "a\x00"}, Cost: 1}}, throttle.ErrInvalidKey},
		{"ErrInvalidCostZero", []throttle.Charge{{Key: keyA, Cost: 0}}, throttle.ErrInvalidCost},
		{"ErrInvalidCostAboveCapacity", []throttle.Charge{{Key: keyA, Cost: 4}}, throttle.ErrInvalidCost},
		{"ErrInvalidCostNoCharge", nil, throttle.ErrInvalidCost},
		{"ErrInvalidCostAdmitAboveCost", []throttle.Charge{{Key: keyA, Cost: 2, Admit: 3}}, throttle.ErrInvalidCost},
		{"ErrInvalidCostNegativeAdmit", []throttle.Charge{{Key: keyA, Cost: 2, Admit: -1}}, throttle.ErrInvalidCost},
		// One bad key spoils the whole request: the good one is not charged.
		{"ErrUnknownPolicyInMulti", []throttle.Charge{{Key: keyA, Cost: 1}, {Key: throttle.Key{Policy: "NOPE", Env: "test", Identifier: "a"}, Cost: 1}}, throttle.ErrUnknownPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Limiter.Take(ctx, "", tt.charges...)
			require.ErrorIs(t, err, tt.want)
		})
	}
	adjs := []struct {
		name string
		adj  throttle.Adjustment
	}{
		{"PositivePenalty", throttle.Adjustment{Key: keyA, Delta: 1, Reason: throttle.LedgerPenalty}},
		{"NegativeCredit", throttle.Adjustment{Key: keyA, Delta: -1, Reason: throttle.LedgerCredit, Ref: "x"}},
		{"CreditWithoutRef", throttle.Adjustment{Key: keyA, Delta: 1, Reason: throttle.LedgerCredit}},
		{"TakeIsNotAnAdjustment", throttle.Adjustment{Key: keyA, Delta: -1, Reason: throttle.LedgerTake}},
	}
	for _, tt := range adjs {
		t.Run("ErrInvalidAdjustment"+tt.name, func(t *testing.T) {
			_, err := e.Limiter.Adjust(ctx, throttle.Adjustment{Key: keyA, Delta: -1, Reason: throttle.LedgerPenalty}, tt.adj)
			require.ErrorIs(t, err, throttle.ErrInvalidAdjustment)
		})
	}
	// Nothing above moved a token or wrote a row.
	require.Empty(t, e.list(inspect.Filter{}))
	require.Zero(t, e.countLedger(inspect.LedgerQuery{}))
}

// errUnavailable stands for a database that does not answer.
var errUnavailable = fmt.Errorf("%w: connection refused", throttle.ErrStoreUnavailable)

// TestFailModes checks that a store failure refuses for a fail-closed policy
// and admits, visibly, for a fail-open one.
func TestFailModes(t *testing.T) {
	closed := throttle.Policy{Name: "P", Capacity: 1, RefillTokens: 1, RefillPeriod: time.Minute}
	open := closed
	open.Name, open.FailMode = "Q", throttle.FailOpen
	failing := &Store{Base: NewMemStore(throttle.SystemClock), UpdateFn: func(context.Context, []throttle.Key, []throttle.CreditRef, func(*throttle.Tx) error) error {
		return errUnavailable
	}}
	obs := &countingObserver{}
	lim := must(throttle.NewLimiter(failing, throttle.Policies{"P": closed, "Q": open}, throttle.Config{Observer: obs}))(t)

	_, err := lim.Take(context.Background(), "", throttle.Charge{Key: keyA, Cost: 1})
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)

	d := must(lim.Take(context.Background(), "", throttle.Charge{Key: keyB, Cost: 1}))(t)
	require.True(t, d.Allowed)
	require.True(t, d.FailOpen)
	require.Equal(t, int64(1), obs.failedOpen.Load())

	// Mixed: one closed policy makes the request fail closed.
	_, err = lim.Take(context.Background(), "", throttle.Charge{Key: keyA, Cost: 1}, throttle.Charge{Key: keyB, Cost: 1})
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
	require.Equal(t, int64(1), obs.failedOpen.Load())
}

type countingObserver struct{ failedOpen atomic.Int64 }

func (o *countingObserver) Decided(throttle.Decision, time.Duration) {}
func (o *countingObserver) FailedOpen(throttle.Key, error)           { o.failedOpen.Add(1) }
func (o *countingObserver) SeverityChanged(throttle.SeverityChange)  {}

// testSeverityNow: the store's part of read-time severity — the stored
// level prefilter (Filter.MinSeverity), ExcludePolicies — through
// Reader.List, Reader.CountNow and Limiter.Reevaluate.
func testSeverityNow(t *testing.T, open OpenStore) {
	ctx := context.Background()
	p := throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 10, RefillPeriod: time.Minute}
	q := throttle.Policy{Name: "Q", Capacity: 10, RefillTokens: 10, RefillPeriod: time.Minute}
	e := env(t, open, p, q)
	require.True(t, e.Take(keyA, 10).Allowed) // Critical
	require.True(t, e.Take(keyC, 1).Allowed)  // Healthy
	require.True(t, e.Take(keyB, 10).Allowed) // Critical, policy Q

	keys := func(f inspect.Filter) []throttle.Key {
		var out []throttle.Key
		for _, s := range e.list(f) {
			out = append(out, s.Key)
		}
		return out
	}
	require.Equal(t, []throttle.Key{keyA, keyB}, keys(inspect.Filter{Severity: throttle.SeverityCritical}))
	require.Equal(t, []throttle.Key{keyA, keyC}, keys(inspect.Filter{ExcludePolicies: []string{"Q"}}))
	require.Equal(t, []throttle.Key{keyA, keyB}, keys(inspect.Filter{MinSeverity: throttle.SeverityHigh}))

	e.Clock.Advance(time.Minute) // all full again
	require.Empty(t, keys(inspect.Filter{Severity: throttle.SeverityCritical}))
	c := must(e.Reader.CountNow(ctx, inspect.Filter{}))(t)
	require.Equal(t, int64(3), c.BySeverity[throttle.SeverityHealthy])
	require.Equal(t, int64(0), c.BySeverity[throttle.SeverityCritical])

	n := must(e.Limiter.Reevaluate(ctx))(t)
	require.Equal(t, 2, n)
	stored := must(e.Reader.CountBySeverity(ctx, inspect.Filter{}))(t)
	require.Equal(t, map[throttle.Severity]int64{throttle.SeverityHealthy: 3}, stored, "the recoveries are written")
}
