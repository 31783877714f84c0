package throttle

import "time"

// Clock returns the current time. The engine never calls time.Now directly:
// stores and limiters are given a Clock so tests can use a fake one
// (throttletest.FakeClock). A Clock must be safe for concurrent use.
type Clock func() time.Time

// SystemClock is the wall clock.
func SystemClock() time.Time { return time.Now() }
