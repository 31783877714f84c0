// Package throttletest has test doubles for the throttle engine (the fake
// clock is throttle.ManualClock): an in-memory Store with the same semantics as the SQL one, and a
// Store whose methods can be replaced one by one to inject failures.
package throttletest

import "time"

// Epoch is a fixed instant tests start from: 2026-01-02 03:04:05 UTC.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
