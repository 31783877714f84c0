package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// grainPolicy is a rolling window of capacity per minute, with a grain.
func grainPolicy(capacity int64, grain, block time.Duration) throttle.Policy {
	return throttle.Policy{Name: "INBOUND_IP", Refill: throttle.RefillRolling, Capacity: capacity,
		RefillTokens: capacity, RefillPeriod: time.Minute, RollingGrain: grain, BlockFor: block}
}

// TestRollingGrainNeverAdmitsMoreThanTheLimitInAWindow drives seeded random
// arrivals (bursts, gaps, steps shorter and longer than the grain) through
// rolling windows with grains that divide the window and that do not, and
// checks the promise of decision 0110 on every window that starts at an
// admission: at most Capacity admissions in [t, t+period). It also checks
// that the state stays within period/grain+1 spends whatever the capacity,
// and that the limit is not wasted: the run admits requests in every
// window it is busy in. With quota leases (Config.Lease, decision 0221)
// the arrivals go to two or three Limiters on the store at random ("as
// many processes"), each deciding from its own leases: the promise holds
// all the same, and so does the bound on the state (a lease is a spend of
// its grain).
func TestRollingGrainNeverAdmitsMoreThanTheLimitInAWindow(t *testing.T) {
	for _, tc := range []struct {
		capacity     int64
		grain, block time.Duration
	}{
		{5, time.Second, 0},
		{120, time.Second, 0},
		{120, time.Second, 5 * time.Second},
		{1000, time.Second, 0},
		{1000, 7 * time.Second, 0},
		{37, 1300 * time.Millisecond, 2 * time.Second},
		{3, time.Minute, 0},
	} {
		for _, lease := range []struct {
			procs int
			span  time.Duration
		}{{1, 0}, {2, time.Second}, {3, time.Second}, {3, 5 * time.Second}} {
			name := fmt.Sprintf("capacity=%d/grain=%s/block=%s", tc.capacity, tc.grain, tc.block)
			if lease.span > 0 {
				name += fmt.Sprintf("/leases=%s/procs=%d", lease.span, lease.procs)
			}
			t.Run(name, func(t *testing.T) {
				testRollingGrainWindows(t, tc.capacity, tc.grain, tc.block, lease.procs, lease.span)
			})
		}
	}
}

func testRollingGrainWindows(t *testing.T, capacity int64, grain, block time.Duration, procs int, span time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(capacity), uint64(grain)))
	clock := throttle.NewManualClock(throttletest.Epoch.Add(123456789))
	store := throttletest.NewMemStore(clock.Now)
	p := grainPolicy(capacity, grain, block)
	var lims []*throttle.Limiter
	for range procs {
		lim, err := throttle.NewLimiter(store, throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, Lease: span})
		require.NoError(t, err)
		lims = append(lims, lim)
	}
	key := throttle.Key{Policy: p.Name, Env: "prod", Identifier: "198.51.100.7"}
	maxSpends := int(p.RefillPeriod/p.RollingGrain) + 1
	// The mean gap admits about twice the capacity per window,
	// so the run is refused often and recovers often.
	mean := p.RefillPeriod / time.Duration(2*capacity)
	var admitted []time.Time
	for range 20 * int(capacity) {
		switch rng.IntN(10) {
		case 0: // a burst: no time passes
		case 1:
			clock.Advance(time.Duration(rng.Int64N(int64(3 * p.RefillPeriod / 2))))
		default:
			clock.Advance(time.Duration(rng.Int64N(int64(2 * mean))))
		}
		d, err := lims[rng.IntN(procs)].Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
		require.NoError(t, err)
		if d.Allowed {
			admitted = append(admitted, clock.Now())
		}
		bs, err := store.Buckets(context.Background(), []throttle.Key{key})
		require.NoError(t, err)
		if len(bs) == 1 {
			require.LessOrEqual(t, len(bs[0].Spent), maxSpends, "spends in the state")
		}
	}
	end := 0 // admitted[i:end] lie in [admitted[i], admitted[i]+period)
	for i, at := range admitted {
		for end < len(admitted) && admitted[end].Before(at.Add(p.RefillPeriod)) {
			end++
		}
		require.LessOrEqual(t, int64(end-i), capacity, "admissions in the window from %s", at)
	}
	require.Greater(t, int64(len(admitted)), 3*capacity, "the windows refill")
}

// TestRollingGrainReturnsTokensWithinAGrainOfTheWindow: a token spent at t
// comes back at the end of t's grain plus the window — not sooner, and no
// later than one grain after the exact window — and the wait a refusal
// announces is that instant.
func TestRollingGrainReturnsTokensWithinAGrainOfTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration // of the take into its grain
		back   time.Duration // when the token is back, after the take
	}{
		{"at a grain's start", 0, time.Minute},
		{"inside a grain", 300 * time.Millisecond, time.Minute + 700*time.Millisecond},
		{"at a grain's last nanosecond", time.Second - 1, time.Minute + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := throttletest.Epoch.Truncate(time.Second).Add(tc.offset)
			clock := throttle.NewManualClock(start)
			p := grainPolicy(1, time.Second, 0)
			lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now})
			require.NoError(t, err)
			key := throttle.Key{Policy: p.Name, Env: "prod", Identifier: "198.51.100.7"}
			take := func() throttle.Decision {
				t.Helper()
				d, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1})
				require.NoError(t, err)
				return d
			}
			require.True(t, take().Allowed)
			d := take()
			require.False(t, d.Allowed)
			require.Equal(t, tc.back, d.RetryAfter)
			clock.Set(start.Add(tc.back - 1))
			require.False(t, take().Allowed, "one nanosecond early")
			clock.Set(start.Add(tc.back))
			require.True(t, take().Allowed, "back")
		})
	}
}

// TestALeaseAdmitsAfterItsKeyIsRememberedAsRefused: a process that holds a
// lease's token and was then refused on the key by the store (a take of
// several charges, or one in flight while the lease was granted) admits from the
// lease: the token is spent already, and answering from the refusal memory
// instead would leave it unused while the other processes are refused for
// want of it. Two processes then admit the capacity, no more, no less.
func TestALeaseAdmitsAfterItsKeyIsRememberedAsRefused(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := throttletest.NewMemStore(clock.Now)
	p := grainPolicy(40, time.Second, 0)
	newLimiter := func() *throttle.Limiter {
		lim, err := throttle.NewLimiter(store, throttle.Policies{p.Name: p}, throttle.Config{Clock: clock.Now, Lease: time.Second})
		require.NoError(t, err)
		return lim
	}
	a, b := newLimiter(), newLimiter()
	key := throttle.Key{Identifier: "192.0.2.7", Env: "prod", Policy: p.Name}
	take := func(lim *throttle.Limiter, cost int64) bool {
		d, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: cost})
		require.NoError(t, err)
		return d.Allowed
	}
	admitted := 0
	for range 2 { // the second take of a key seen before leases a token
		require.True(t, take(a, 1))
		admitted++
	}
	for take(b, 1) {
		admitted++
	}
	require.Equal(t, 39, admitted, "a's two takes and b's 37: a's lease holds the 40th token")
	// A take of two charges is never leased: the store decides it and
	// refuses it on key, which a then remembers as refused.
	other := key
	other.Identifier = "192.0.2.8"
	d, err := a.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 1}, throttle.Charge{Key: other, Cost: 1})
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.True(t, take(a, 1), "a admits from its lease although the key is remembered as refused")
	require.False(t, take(a, 1), "the lease is spent")
	require.False(t, take(b, 1))
}
