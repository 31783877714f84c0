package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
	"github.com/balde-throttle/balde/web"
)

// The admin pages mounted under /balde/ in an application's own router,
// behind the application's own login (Authenticate): no listener of
// balde's, every link under the prefix. balde.Engine.NewServer fills the
// fields from an assembled engine; here the server is built by hand over a
// limiter.
func ExampleServer_Handler() {
	dir, _ := os.MkdirTemp("", "web-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	store, err := sqlitedriver.Open(ctx, "sqlite://"+filepath.Join(dir, "balde.db"), sqlstore.Options{Migrate: true, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	sms := throttle.PerMinute("SMS_PROVIDER", 2, 2)
	limiter, _ := throttle.NewLimiter(store, throttle.Policies{sms.Name: sms}, throttle.Config{Logger: quiet})

	s := web.NewServer()
	s.Limiter = limiter
	s.Reader = inspect.New(limiter, store)
	s.BasePath = "/balde"
	s.Authenticate = func(r *http.Request) (string, bool) { // the application's session
		c, err := r.Cookie("session")
		return "ops", err == nil && c.Value == "valid"
	}
	h, err := s.Handler()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	mux := http.NewServeMux() // the application's router
	mux.Handle("/balde/", h)

	for _, cookie := range []string{"", "valid"} {
		req := httptest.NewRequest(http.MethodGet, "/balde/admin/buckets", nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "session", Value: cookie})
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// 401 text/html; charset=utf-8
	// 200 text/html; charset=utf-8
}

// balde's metrics in the application's own Prometheus registry, beside
// its metrics and the default registry's Go and process collectors: no
// duplicate. Give the same Metrics to the limiters as their Observer.
func ExampleMetrics() {
	m := web.NewMetrics()
	app := prometheus.NewRegistry()
	app.MustRegister(m)

	m.Decided(throttle.Decision{Allowed: true, Buckets: []throttle.BucketDecision{{Key: throttle.Key{Policy: "SMS_PROVIDER"}}}}, 0)
	families, err := prometheus.Gatherers{prometheus.DefaultGatherer, app}.Gather()
	fmt.Println("error:", err)
	for _, f := range families {
		if f.GetName() == "balde_throttle_decisions_total" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// error: <nil>
	// balde_throttle_decisions_total 1
}
