// Package waitfor bounds the waits of tests: a child process, a channel, a
// WaitGroup or any blocking call is given a deadline, and when the deadline
// passes the test fails with a message saying what it was waiting for,
// instead of hanging until go test's global -timeout kills every test of
// the package at once.
//
// Every function must be called from the test's own goroutine (it may call
// t.Fatalf). The deadline is multiplied by BALDE_TEST_DEADLINE_SCALE when
// that variable holds a number greater than 1 (for a very slow machine).
package waitfor

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// killGrace is how long Cmd waits for a process it killed to be reaped.
const killGrace = 10 * time.Second

// scaled returns d times BALDE_TEST_DEADLINE_SCALE (1 when unset or invalid).
func scaled(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("BALDE_TEST_DEADLINE_SCALE"), 64); err == nil && f > 1 {
		return time.Duration(float64(d) * f)
	}
	return d
}

// Cmd waits up to d for the started cmd to exit and returns what
// cmd.Wait returned. When d passes first, the process is killed (by its
// pid, SIGKILL) and the test fails with "<what>: still running after d".
// what and args are formatted when the failure is reported, so a
// *bytes.Buffer or *strings.Builder holding the child's output shows what
// it had printed by then.
func Cmd(t testing.TB, cmd *exec.Cmd, d time.Duration, what string, args ...any) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	d = scaled(d)
	select {
	case err := <-done:
		return err
	case <-time.After(d):
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
	case <-time.After(killGrace):
	}
	t.Fatalf("%s: still running after %s; killed pid %d", fmt.Sprintf(what, args...), d, cmd.Process.Pid)
	return nil
}

// Recv receives one value from ch within d, or fails the test with
// "<what>: nothing received within d". A closed channel yields its zero
// value, as a plain receive does.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string, args ...any) T {
	t.Helper()
	d = scaled(d)
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing received within %s", fmt.Sprintf(what, args...), d)
		var zero T
		return zero
	}
}

// Group waits up to d for wg, or fails the test with
// "<what>: not done within d". The goroutines still running are left to
// the end of the test binary.
func Group(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string, args ...any) {
	t.Helper()
	Do(t, d, func() { wg.Wait() }, what, args...)
}

// Do runs fn, a call that blocks, in its own goroutine and waits up to d
// for it to return, or fails the test with "<what>: not done within d".
func Do(t testing.TB, d time.Duration, fn func(), what string, args ...any) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	d = scaled(d)
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not done within %s", fmt.Sprintf(what, args...), d)
	}
}

// Until calls cond until it returns true, yielding between calls (at first
// with runtime.Gosched, then sleeping up to a millisecond), or fails the
// test with "<what>: not true within d".
func Until(t testing.TB, d time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	d = scaled(d)
	deadline := time.Now().Add(d)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s", fmt.Sprintf(what, args...), d)
			return
		}
		if i < 1000 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

// HTTPTimeout bounds every request a test makes with http.DefaultClient
// once BoundDefaultClient has run.
const HTTPTimeout = 60 * time.Second

// BoundDefaultClient gives http.DefaultClient a timeout of HTTPTimeout (scaled), so
// that http.Get and friends in tests fail instead of hanging on a server
// that stopped answering. Call it from an init function of a _test.go file:
// the test binary's DefaultClient is the tests' own.
func BoundDefaultClient() {
	http.DefaultClient.Timeout = scaled(HTTPTimeout)
}
