package web_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// TestProbes: /livez answers whatever the store does; /readyz (and its
// alias /healthz) answers 503 with Retry-After while the readiness check
// fails, 200 once it passes.
func TestProbes(t *testing.T) {
	ready := errors.New("the store cannot be written")
	e := newEnv(t, withServer(func(s *web.Server) {
		s.HealthCheck = func(context.Context) error { return ready }
	}))
	tests := []struct {
		path      string
		whenDown  int
		whenReady int
	}{
		{"/livez", http.StatusOK, http.StatusOK},
		{"/readyz", http.StatusServiceUnavailable, http.StatusOK},
		{"/healthz", http.StatusServiceUnavailable, http.StatusOK},
	}
	for _, tc := range tests {
		resp := e.get(tc.path)
		require.Equal(t, tc.whenDown, resp.StatusCode, tc.path)
		if tc.whenDown == http.StatusServiceUnavailable {
			require.Equal(t, "5", resp.Header.Get("Retry-After"), tc.path)
			require.Contains(t, decode[map[string]any](t, resp)["error"], "unhealthy", tc.path)
		} else {
			require.Equal(t, map[string]any{"status": "ok"}, decode[map[string]any](t, resp), tc.path)
		}
	}
	ready = nil
	for _, tc := range tests {
		require.Equal(t, tc.whenReady, e.get(tc.path).StatusCode, tc.path)
	}
}

// TestProbesAreExactAndNotLimited: the probes are never counted by the
// inbound limiter, even when the exempt list does not name them, and only
// their exact paths are probes (a look-alike path is limited and 404).
func TestProbesAreExactAndNotLimited(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Block: time.Minute, Exempt: []string{"/nothing-exempt"}}))
	for range 5 {
		for _, p := range []string{"/livez", "/readyz", "/healthz"} {
			resp := e.get(p)
			require.Equal(t, http.StatusOK, resp.StatusCode, p)
			require.Empty(t, resp.Header.Get("RateLimit-Policy"), p)
		}
	}
	first := e.get("/livezX")
	require.Equal(t, http.StatusNotFound, first.StatusCode)
	require.NotEmpty(t, first.Header.Get("RateLimit-Policy"), "a look-alike path is limited")
	require.Equal(t, http.StatusTooManyRequests, e.get("/readyz/").StatusCode, "the limit counted the look-alike")
	require.Equal(t, http.StatusOK, e.get("/readyz").StatusCode, "the probe still answers")
}

// TestReadinessFailsWhenTheStoreIsDown checks the answer a load balancer
// sees for a store error, the way serve wires it.
func TestReadinessFailsWhenTheStoreIsDown(t *testing.T) {
	e := newEnv(t, withServer(func(s *web.Server) {
		s.HealthCheck = func(context.Context) error { return throttle.ErrStoreUnavailable }
	}))
	require.Equal(t, http.StatusServiceUnavailable, e.get("/readyz").StatusCode)
	require.Equal(t, http.StatusOK, e.get("/livez").StatusCode)
}
