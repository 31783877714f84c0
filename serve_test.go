package balde_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/web"
)

// openServeEngine opens an engine on a new SQLite file with an inbound
// limiter of limit requests per minute per IP (0: none).
func openServeEngine(t *testing.T, limit int64) *balde.Engine {
	t.Helper()
	cfg := balde.Config{DB: "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), Migrate: true, Observer: web.NewMetrics()}
	if limit > 0 {
		cfg.Inbound = &web.InboundConfig{IPLimit: limit, Window: time.Minute}
	}
	eng, err := balde.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
	return eng
}

// Serve starts the jobs and listens only once their start work is done,
// and returns nil once its context ends, the jobs stopped with it.
func TestServeStartsTheJobsFirstAndStopsWithItsContext(t *testing.T) {
	eng := openServeEngine(t, 0)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		served <- eng.Serve(ctx, "127.0.0.1:0", http.NotFoundHandler(), func(string) {
			select {
			case <-eng.Started():
			default:
				t.Error("listening before the start work was done")
			}
			cancel()
		})
	}()
	require.NoError(t, waitfor.Recv(t, served, 20*time.Second, "Serve after its context ended"))
	require.ErrorContains(t, eng.Run(t.Context()), "called twice", "the jobs ran, and stopped")
}

// Serve is what balde gateway runs: the engine's jobs, then a handler (here
// an API behind the inbound limiter with OpsHandler's /metrics and probes
// beside it, no admin pages) until ctx ends, then a clean shutdown.
func TestServeAPIAndOps(t *testing.T) {
	eng := openServeEngine(t, 2)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api") })
	ops, err := eng.OpsHandler("")
	require.NoError(t, err)
	h := http.NewServeMux()
	h.Handle("/", eng.Inbound().Middleware(api))
	for _, p := range []string{"/metrics", "/livez"} {
		h.Handle(p, ops)
	}

	ctx, cancel := context.WithCancel(t.Context())
	addrs := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ctx, "127.0.0.1:0", h, func(a string) { addrs <- a }) }()
	base := "http://" + waitfor.Recv(t, addrs, 10*time.Second, "Serve listening")
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	for range 2 {
		code, body := get("/anything")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "api", body)
	}
	code, _ := get("/anything")
	require.Equal(t, http.StatusTooManyRequests, code, "the API is behind the inbound limiter")
	code, _ = get("/livez")
	require.Equal(t, http.StatusOK, code, "the probes are not")
	code, body := get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "go_goroutines", "a process of its own: the runtime collectors")
	code, _ = get("/admin/")
	require.NotEqual(t, http.StatusOK, code, "no admin pages here")

	cancel()
	require.NoError(t, waitfor.Recv(t, served, 20*time.Second, "Serve after its context ended"))
	_, err = client.Get(base + "/livez")
	require.Error(t, err, "the listener is closed")
}

// A port already taken is Serve's error, and the jobs it started stop.
func TestServeListenFails(t *testing.T) {
	eng := openServeEngine(t, 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrs := make(chan string, 1)
	go func() {
		_ = eng.Serve(ctx, "127.0.0.1:0", http.NotFoundHandler(), func(a string) { addrs <- a })
	}()
	taken := waitfor.Recv(t, addrs, 10*time.Second, "the first Serve listening")
	eng2 := openServeEngine(t, 0)
	err := eng2.Serve(t.Context(), taken, http.NotFoundHandler(), nil)
	require.ErrorContains(t, err, "address already in use")
}
