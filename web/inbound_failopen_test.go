package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// An inbound limiter configured as the README's snippet does (no fail
// setting) keeps serving the application's pages while its store cannot
// answer: it fails open, as InboundConfig says, each admission counted.
// With the zero value failing closed, every page answered 503.
func TestInboundZeroConfigFailsOpen(t *testing.T) {
	down := func() error { return throttle.ErrStoreUnavailable }
	store := &throttletest.Store{
		Base: throttletest.NewMemStore(throttle.SystemClock),
		UpdateFn: func(context.Context, []throttle.Key, []throttle.CreditRef, func(*throttle.Tx) error) error {
			return down()
		},
		BucketsFn: func(context.Context, []throttle.Key) ([]throttle.Bucket, error) { return nil, down() },
		ListFn:    func(context.Context, inspect.Filter) ([]throttle.Bucket, error) { return nil, down() },
	}
	in, err := web.NewInbound(web.InboundConfig{IPLimit: 120})
	require.NoError(t, err)
	metrics := web.NewMetrics()
	require.NoError(t, in.UseStore(store, throttle.Config{Observer: metrics}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "stats") })
	h := in.Middleware(mux)
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "stats", rec.Body.String())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), `balde_throttle_fail_open_total{policy="INBOUND_IP"} 3`, "each admission counted")
}
