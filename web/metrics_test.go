package web_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

func TestMetricsAfterDecisions(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 50}), withServer(func(s *web.Server) { s.RuntimeMetrics = true }))
	k := key("SLOW", "ruc-1")
	e.take(k, 1)
	require.False(t, e.take(k, 1).Allowed) // cooldown
	e.take(key("P", "x"), 8)               // 2 of 10 left: Healthy -> High
	e.get("/admin/buckets/P/prod/%3Csecret-id%3E", asAdmin)

	resp := e.get("/metrics")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	m := body(t, resp)
	for _, want := range []string{
		`balde_throttle_decisions_total{policy="SLOW",result="allowed"} 1`,
		`balde_throttle_decisions_total{policy="SLOW",result="refused"} 1`,
		`balde_throttle_decisions_total{policy="P",result="allowed"} 1`,
		`balde_throttle_refusals_total{policy="SLOW",reason="cooldown"} 1`,
		`balde_throttle_decision_seconds_count{policy="SLOW"} 2`,
		`balde_throttle_severity_changes_total{from="Healthy",policy="P",to="High"} 1`,
		// The inbound limiter reports through the same observer (the
		// admin's page is charged to the admin's own bucket).
		`balde_throttle_decisions_total{policy="INBOUND_ADMIN",result="allowed"} 1`,
		// HTTP requests are labelled by route template.
		`balde_http_requests_total{code="200",method="GET",route="/admin/buckets/{policy}/{env}/{identifier}"} 1`,
		`balde_http_request_seconds_count{route="/admin/buckets/{policy}/{env}/{identifier}"} 1`,
		"go_goroutines",
	} {
		require.True(t, strings.Contains(m, want), "metrics lack %s", want)
	}
	require.NotContains(t, m, "secret-id", "no raw path or identifier in a label")
}

func TestMetricsFailOpenAndUnboundedMethods(t *testing.T) {
	m := web.NewMetrics()
	m.StoreFailed(key("P", "x"), fmt.Errorf("%w: %w", throttle.ErrStoreUnavailable, throttle.ErrStoreTimeout))
	m.StoreFailed(key("P", "x"), throttle.ErrStoreUnavailable)
	m.FailedOpen(key("P", "x"), throttle.ErrStoreUnavailable)
	m.Decided(throttle.Decision{Allowed: true, FailOpen: true, Buckets: []throttle.BucketDecision{{Key: key("P", "x")}}}, 0)
	e := newEnv(t, withServer(func(s *web.Server) { s.Metrics = m }))
	e.do("BREW", "/nope", nil)
	out := body(t, e.get("/metrics"))
	for _, want := range []string{
		`balde_throttle_fail_open_total{policy="P"} 1`,
		`balde_throttle_store_failures_total{cause="timeout",policy="P"} 1`,
		`balde_throttle_store_failures_total{cause="unavailable",policy="P"} 1`,
		`balde_throttle_decisions_total{policy="P",result="fail_open"} 1`,
		`balde_http_requests_total{code="404",method="other",route="unmatched"} 1`,
	} {
		require.True(t, strings.Contains(out, want), "metrics lack %s", want)
	}
	require.NotContains(t, out, "BREW")
}

func TestHealthz(t *testing.T) {
	tests := []struct {
		name       string
		check      func(context.Context) error
		wantStatus int
		wantRetry  string
	}{
		{"NoCheck", nil, http.StatusOK, ""},
		{"Healthy", func(context.Context) error { return nil }, http.StatusOK, ""},
		{"StoreDown", func(context.Context) error { return throttle.ErrStoreUnavailable }, http.StatusServiceUnavailable, "5"},
		{"MigrationsBehind", func(context.Context) error { return context.DeadlineExceeded }, http.StatusServiceUnavailable, "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, withServer(func(s *web.Server) { s.HealthCheck = tt.check }))
			resp := e.get("/healthz")
			require.Equal(t, tt.wantStatus, resp.StatusCode)
			require.Equal(t, tt.wantRetry, resp.Header.Get("Retry-After"))
			got := decode[map[string]any](t, resp)
			if tt.wantStatus == http.StatusOK {
				require.Equal(t, map[string]any{"status": "ok"}, got)
			} else {
				require.Contains(t, got["error"], "unhealthy")
			}
		})
	}
}

func TestHealthCheckGetsADeadline(t *testing.T) {
	var deadline time.Time
	e := newEnv(t, withServer(func(s *web.Server) {
		s.HealthCheck = func(ctx context.Context) error {
			deadline, _ = ctx.Deadline()
			return nil
		}
	}))
	require.Equal(t, http.StatusOK, e.get("/healthz").StatusCode)
	require.False(t, deadline.IsZero(), "a probe must not hang on a stuck database")
}

// Issue 19: an application gathers balde's metrics from its own registry,
// beside the default one (Go and process collectors), with no duplicate;
// the bucket gauges are counted at that gather too, not only at a scrape
// of balde's /metrics. Without RuntimeMetrics balde's /metrics serves
// balde's metrics alone.
func TestMetricsInTheApplicationsRegistry(t *testing.T) {
	e := newEnv(t)
	e.take(key("P", "x"), 10) // 0 of 10 left: Critical

	// The application's registry beside the default one, …
	app := prometheus.NewRegistry()
	app.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "app_orders_total", Help: "The app's own."}))
	require.NoError(t, app.Register(e.metrics))
	// … or one registry with the runtime collectors of its own.
	own := prometheus.NewRegistry()
	own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	require.NoError(t, own.Register(e.metrics))
	for _, g := range []prometheus.Gatherers{
		{prometheus.DefaultGatherer, app},
		{own},
		{prometheus.DefaultGatherer, e.metrics.Registry}, // the example
	} {
		families, err := g.Gather()
		require.NoError(t, err)
		names := map[string]bool{}
		critical := -1.0
		for _, f := range families {
			names[f.GetName()] = true
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if f.GetName() == "balde_buckets" && l.GetName() == "severity" && l.GetValue() == "Critical" {
						critical = max(critical, 0) + m.GetGauge().GetValue() // summed over the scopes
					}
				}
			}
		}
		require.True(t, names["go_goroutines"])
		require.True(t, names["balde_throttle_decisions_total"])
		require.Equal(t, 1.0, critical, "balde_buckets counted at gather time")
	}

	out := body(t, e.get("/metrics"))
	require.Contains(t, out, "balde_throttle_decisions_total")
	require.NotContains(t, out, "go_goroutines", "runtime collectors only with RuntimeMetrics")
}

// Request lines reach the server's Logger only with LogRequests; warnings
// still do without it.
func TestRequestLogIsOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("LogRequests=", on), func(t *testing.T) {
			var buf syncBuffer
			e := newEnv(t, withServer(func(s *web.Server) {
				s.Logger = slog.New(slog.NewTextHandler(&buf, nil))
				s.LogRequests = on
			}))
			e.get("/admin/buckets", asAdmin)
			require.Equal(t, on, strings.Contains(buf.String(), "msg=request"), "log: %s", buf.String())
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
