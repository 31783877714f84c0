package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/webhook"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
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
	clock := throttle.NewManualClock(throttletest.Epoch)
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

// post sends one severity change of key through a Notifier with opts to
// url and waits for it (Close drains the queue).
func post(t *testing.T, url string, key throttle.Key, opts webhook.Options) *webhook.Notifier {
	t.Helper()
	n := webhook.New(url, opts)
	n.Notify(context.Background(), throttle.SeverityChange{Key: key, From: throttle.SeverityHealthy, To: throttle.SeverityCritical, Capacity: 100, At: throttletest.Epoch})
	require.NoError(t, n.Close())
	return n
}

// Issue 23.6: the webhook followed a redirect to another host and sent the
// body there.
func TestNotifierRefusesRedirectsToAnotherHost(t *testing.T) {
	var elsewhere, here []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere = append(elsewhere, r.URL.Path)
	}))
	defer other.Close()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		here = append(here, r.URL.Path+" "+string(body))
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, r, srv.URL+"/hook", http.StatusPermanentRedirect)
		case "/loop":
			http.Redirect(w, r, srv.URL+"/loop", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	key := throttle.Key{Policy: "P", Env: "prod", Identifier: "12345678"}

	n := post(t, srv.URL+"/away", key, webhook.Options{})
	require.Equal(t, int64(1), n.Failed())
	require.Empty(t, elsewhere, "nothing reaches the other host")

	// A client of the caller's own is given the same rule.
	n = post(t, srv.URL+"/away", key, webhook.Options{Client: &http.Client{Timeout: 5 * time.Second}})
	require.Equal(t, int64(1), n.Failed())
	require.Empty(t, elsewhere)

	here = nil
	n = post(t, srv.URL+"/moved", key, webhook.Options{})
	require.Zero(t, n.Failed(), "a redirect on the same host is followed")
	require.Len(t, here, 2)
	require.Contains(t, here[1], `/hook {"policy":"P"`, "the body goes to the new path of the same host")

	here = nil
	n = post(t, srv.URL+"/loop", key, webhook.Options{})
	require.Equal(t, int64(1), n.Failed())
	require.Len(t, here, 4, "the first post and 3 redirects")
}

// Issue 23.6: the payload carried the payer's CPF.
func TestNotifierMasksPersonalIdentifiers(t *testing.T) {
	got := make(chan webhook.Event, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e webhook.Event
		require.NoError(t, json.NewDecoder(r.Body).Decode(&e))
		got <- e
	}))
	defer srv.Close()
	personal := func(k throttle.Key) bool { return k.Policy == "SMS_PER_PERSON" }
	tests := []struct {
		name string
		key  throttle.Key
		opts webhook.Options
		want string
	}{
		{"PayerCPF", throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "12345678901"}, webhook.Options{}, "***.456.789-**"},
		{"PayerCPFPunctuated", throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "123.456.789-01"}, webhook.Options{}, "***.456.789-**"},
		{"PayerCNPJ", throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "12345678000195"}, webhook.Options{}, "**.345.678/0001-**"},
		{"ParticipantISPB", throttle.Key{Policy: "ENTRIES_READ_PARTICIPANT_ANTISCAN", Env: "prod", Identifier: "12345678"}, webhook.Options{}, "12345678"},
		{"SifenRUC", throttle.Key{Policy: "SIFEN_RECEPCION_LOTE", Env: "test", Identifier: "80069563-1"}, webhook.Options{}, "80069563-1"},
		{"PersonalByTheApplication", throttle.Key{Policy: "SMS_PER_PERSON", Env: "prod", Identifier: "maria@example.com"}, webhook.Options{Personal: personal}, "***"},
		{"OptedOut", throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "12345678901"}, webhook.Options{RevealIdentifiers: true}, "12345678901"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			post(t, srv.URL, tt.key, tt.opts)
			e := <-got
			require.Equal(t, tt.want, e.Identifier)
			require.Equal(t, tt.key.Policy, e.Policy)
		})
	}
}

func TestMaskIdentifier(t *testing.T) {
	for in, want := range map[string]string{
		"12345678901":        "***.456.789-**",
		"12.345.678/0001-95": "**.345.678/0001-**",
		"1234567890":         "1234567890",
		"12345678901x":       "12345678901x",
		"":                   "",
	} {
		require.Equal(t, want, webhook.MaskIdentifier(in), in)
	}
}
