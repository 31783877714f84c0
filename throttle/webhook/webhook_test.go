package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/throttle/webhook"
)

func TestNotifierPostsSeverityChanges(t *testing.T) {
	got := make(chan webhook.Event, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e webhook.Event
		require.NoError(t, json.NewDecoder(r.Body).Decode(&e))
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		got <- e
	}))
	defer srv.Close()
	n := webhook.New(srv.URL, webhook.Options{})

	// A real limiter driving a bucket down: each level crossed is posted.
	clock := throttletest.NewFakeClock(throttletest.Epoch)
	p := throttle.Policy{Name: "P", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour}
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), throttle.Policies{"P": p}, throttle.Config{Clock: clock.Now, Notifier: n})
	require.NoError(t, err)
	key := throttle.Key{Policy: "P", Env: "prod", Identifier: "12345678"}
	_, err = lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 10})
	require.NoError(t, err)
	// Refilled while nobody sends: the maintenance pass posts the recovery.
	clock.Advance(10 * time.Hour)
	changed, err := lim.Reevaluate(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, changed)
	require.NoError(t, n.Close())

	require.Len(t, got, 2)
	require.Equal(t, webhook.Event{Policy: "P", Env: "prod", Identifier: "12345678", From: "Healthy", To: "Critical",
		Tokens: 0, Capacity: 10, At: throttletest.Epoch, Status: "firing"}, <-got)
	require.Equal(t, webhook.Event{Policy: "P", Env: "prod", Identifier: "12345678", From: "Critical", To: "Healthy",
		Tokens: 10, Capacity: 10, At: throttletest.Epoch.Add(10 * time.Hour), Status: "resolved"}, <-got)
	require.Zero(t, n.Failed())
}

func TestNotifierCountsFailuresAndDrops(t *testing.T) {
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
		case <-time.After(30 * time.Second):
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	defer release() // before Close, even when the test fails half-way
	n := webhook.New(srv.URL, webhook.Options{Queue: 1})
	c := throttle.SeverityChange{Key: throttle.Key{Policy: "P", Env: "e", Identifier: "i"}, From: throttle.SeverityHealthy, To: throttle.SeverityHigh}
	// The first is taken by the poster (stuck on the endpoint) or waits in
	// the queue of one; at least one of the next two cannot fit.
	for range 3 {
		n.Notify(context.Background(), c)
	}
	require.Positive(t, n.Dropped())
	release()
	require.NoError(t, n.Close())
	require.Equal(t, 3-n.Dropped(), n.Failed())
}
