package throttle

import (
	"sync"
	"time"
)

// Clock returns the current time. The engine never calls time.Now directly:
// stores and limiters are given a Clock so tests can use a fake one
// (throttle.ManualClock). A Clock must be safe for concurrent use.
type Clock func() time.Time

// SystemClock is the wall clock.
func SystemClock() time.Time { return time.Now() }

// ManualClock is a clock that stands still until it is moved: the
// simulators' --fake-clock, and tests (throttle.ManualClock is this type).
// Pass its Now method as a Clock. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// move sets the clock to f of its time and returns the new time.
func (c *ManualClock) move(f func(now time.Time) time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = f(c.now)
	return c.now
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	return c.move(func(now time.Time) time.Time { return now })
}

// Advance moves the clock by d (negative d steps it back) and returns the
// new time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	return c.move(func(now time.Time) time.Time { return now.Add(d) })
}

// AdvanceTo moves the clock forward to t, and leaves it where it is when
// it is at or past t already; it returns the clock's time. Concurrent fake
// sleepers each wake at their own instant this way: two sleeps of 10 s
// started together end at +10 s, not at +20 s as two Advance calls would.
func (c *ManualClock) AdvanceTo(t time.Time) time.Time {
	return c.move(func(now time.Time) time.Time { return later(t, now) })
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.move(func(time.Time) time.Time { return t })
}
