package main

import "github.com/balde-throttle/balde/internal/waitfor"

// Requests of these tests with http.DefaultClient fail after a deadline
// instead of hanging (no test waits without one).
func init() { waitfor.BoundDefaultClient() }
