package balde

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/balde-throttle/balde/web"
)

// OpsHandler serves the engine's probes and metrics and nothing else:
// /metrics (with the Go and process collectors, for a process of its own;
// a bearer token when metricsToken is set), /healthz (the database
// answers a write and its schema is current), /readyz and /livez. Any other
// path is 404. An application mounts it where it likes (mux.Handle for
// each path, or under a prefix with http.StripPrefix); balde gateway
// mounts it beside the gateway.
func (e *Engine) OpsHandler(metricsToken string) (http.Handler, error) {
	s := e.NewServer("")
	s.MetricsToken = metricsToken
	s.RuntimeMetrics = true
	s.Authenticate = func(*http.Request) (string, bool) { return "", false }
	ops, err := s.Handler()
	if err != nil {
		return nil, err
	}
	e.ops = append(e.ops, s)
	mux := http.NewServeMux()
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/livez"} {
		mux.Handle(p, ops)
	}
	return mux, nil
}

// serveShutdownTimeout is how long Engine.Serve waits for requests in
// flight once ctx ends.
const serveShutdownTimeout = 10 * time.Second

// Serve runs the engine's background jobs (Run, returning once their start
// work is done), then serves h on addr (HOST:PORT; port 0 picks a free one)
// with web.NewHTTPServer's timeouts until ctx ends (nil), the jobs stop on
// their own or the server fails (their error); then it shuts the server
// down (waiting up to 10 s for requests in flight) and stops the jobs.
// listening, when set, is told the address once the listener is open. It
// does not close the engine. balde serve and balde gateway are Serve.
func (e *Engine) Serve(ctx context.Context, addr string, h http.Handler, listening func(addr string)) (err error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	select {
	case <-e.Started():
	case err := <-ran: // the start work failed
		return err
	}
	// The jobs stop with ctx; their error is Serve's unless Serve failed
	// first.
	defer func() {
		stop()
		if runErr, ok := <-ran; ok {
			err = errors.Join(err, runErr)
		}
	}()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("balde: serve: %w", err)
	}
	srv := web.NewHTTPServer(h, e.logger)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if listening != nil {
		listening(ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err = <-ran:
		close(ran) // received: the deferred wait is over
	case err = <-served:
	}
	e.logger.Info("shutting down", slog.String("addr", ln.Addr().String()))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), serveShutdownTimeout)
	defer cancel()
	if err = errors.Join(err, srv.Shutdown(shutdownCtx)); errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
