// Package throttletest has test doubles for the throttle engine: a fake
// clock, an in-memory Store with the same semantics as the SQL one, and a
// Store whose methods can be replaced one by one to inject failures.
package throttletest

import (
	"sync"
	"time"
)

// FakeClock is a clock that moves only when told. Safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock standing at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Epoch is a fixed instant tests start from: 2026-01-02 03:04:05 UTC.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Now returns the clock's time; pass c.Now as a throttle.Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (which may be negative, to test a clock that
// steps back) and returns the new time.
func (c *FakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
