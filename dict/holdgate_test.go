package dict_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// holdGate stands in front of the simulator and holds one request until
// released, so that a forced-order test plays its order whatever the
// machine's load. Once armed, the next request hold matches is held: a
// request whose answer is a read (answerLater) is served at once and its
// answer held (the DICT read its balance now; the client applies it
// later); any other is held before the simulator sees it (not charged
// yet). before, when set, sees every request first and may answer it
// itself (it returns true then).
type holdGate struct {
	hold        func(r *http.Request) bool
	answerLater func(r *http.Request) bool
	before      func(w http.ResponseWriter, r *http.Request) bool

	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

// wrap is the gate as envConfig.Gate.
func (g *holdGate) wrap(sim http.Handler) http.Handler {
	g.held, g.release = make(chan struct{}, 1), make(chan struct{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.before != nil && g.before(w, r) {
			return
		}
		if !g.hold(r) || !g.armed.CompareAndSwap(true, false) {
			sim.ServeHTTP(w, r)
			return
		}
		later := g.answerLater != nil && g.answerLater(r)
		rec := httptest.NewRecorder()
		if later {
			sim.ServeHTTP(rec, r)
		}
		g.held <- struct{}{}
		select {
		case <-g.release:
		case <-time.After(30 * time.Second):
		}
		if !later {
			sim.ServeHTTP(w, r)
			return
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// play arms the gate and runs first until the gate holds its request,
// then meanwhile (if set) and second, then releases first's request and
// waits for first to end. Every wait has a deadline.
func (g *holdGate) play(t *testing.T, first, second func() error, meanwhile func()) {
	t.Helper()
	g.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- first() }()
	select {
	case <-g.held:
	case err := <-done:
		t.Fatalf("the held request ended (%v) before the gate held it", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the gate held nothing within 10 s")
	}
	if meanwhile != nil {
		meanwhile()
	}
	require.NoError(t, second())
	close(g.release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the held request did not end within 10 s of its release")
	}
}
