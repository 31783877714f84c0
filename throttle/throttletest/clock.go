// Package throttletest has test doubles for the throttle engine: a fake
// clock, an in-memory Store with the same semantics as the SQL one, and a
// Store whose methods can be replaced one by one to inject failures.
package throttletest

import (
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// FakeClock is a clock that moves only when told (throttle.ManualClock):
// Now, Advance (negative to test a clock that steps back) and Set.
type FakeClock = throttle.ManualClock

// NewFakeClock returns a clock standing at t.
func NewFakeClock(t time.Time) *FakeClock { return throttle.NewManualClock(t) }

// Epoch is a fixed instant tests start from: 2026-01-02 03:04:05 UTC.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
