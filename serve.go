package balde

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Background is an engine's background jobs (Engine.Run) running on a
// goroutine of their own, as balde serve and balde gateway run them.
type Background struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, once done is closed
}

// Start runs e.Run on a goroutine until ctx ends or Stop, and returns once
// its start work is done (Engine.Started: before that nothing may send),
// or Run's error when it ended before (the database cannot answer).
func (e *Engine) Start(ctx context.Context) (*Background, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &Background{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.err = e.Run(ctx)
	}()
	select {
	case <-e.Started():
		return b, nil
	case <-b.done:
		cancel()
		return nil, b.err
	}
}

// Done is closed when the jobs have stopped: after Stop, once ctx ended,
// or on their own (Err says why).
func (b *Background) Done() <-chan struct{} { return b.done }

// Err is Run's result once Done is closed (nil before).
func (b *Background) Err() error {
	select {
	case <-b.done:
		return b.err
	default:
		return nil
	}
}

// Stop ends the jobs and waits for them; it returns Run's error. Stop it
// before Engine.Close.
func (b *Background) Stop() error {
	b.cancel()
	<-b.done
	return b.err
}

// OpsOptions configures Engine.OpsHandler.
type OpsOptions struct {
	// Participant is the DICT participant whose category panel and scopes
	// the engine's server knows (Engine.NewServer).
	Participant string
	// TrustedProxies are the peers whose X-Forwarded-For is believed (by
	// the inbound limiter and the request logs).
	TrustedProxies []netip.Prefix
	// MetricsToken, when set, protects /metrics (web.Server.MetricsToken).
	MetricsToken string
}

// OpsHandler serves api behind the engine's inbound limiter (when the
// engine has one), and /metrics (with the Go and process collectors: a
// process of its own), /healthz, /readyz and /livez of the engine's web
// server: what balde gateway serves. The admin pages are not served (every
// credential is refused): balde serve has them, on the same database.
func (e *Engine) OpsHandler(api http.Handler, opts OpsOptions) (http.Handler, error) {
	s := e.NewServer(opts.Participant)
	s.TrustedProxies = opts.TrustedProxies
	s.MetricsToken = opts.MetricsToken
	s.RuntimeMetrics = true
	s.Authenticate = func(*http.Request) (string, bool) { return "", false }
	ops, err := s.Handler()
	if err != nil {
		return nil, err
	}
	if in := e.Inbound(); in != nil {
		api = in.Middleware(api)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/livez"} {
		mux.Handle(p, ops)
	}
	return mux, nil
}

// ServeShutdownTimeout is how long Engine.Serve waits for requests in
// flight once ctx ends.
const ServeShutdownTimeout = 10 * time.Second

// Serve runs the engine's background jobs (Start), then serves h on addr
// (HOST:PORT; port 0 picks a free one) until ctx ends (nil), the jobs stop
// on their own or the server fails (their error); then it shuts the
// server down (waiting up to ServeShutdownTimeout for requests in flight)
// and stops the jobs. listening, when set, is told the address once the
// listener is open. It does not close the engine.
func (e *Engine) Serve(ctx context.Context, addr string, h http.Handler, listening func(addr string)) error {
	bg, err := e.Start(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(fmt.Errorf("balde: serve: %w", err), bg.Stop())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if listening != nil {
		listening(ln.Addr().String())
	}
	jobsEnded := false
	select {
	case <-ctx.Done():
	case <-bg.Done():
		err, jobsEnded = bg.Err(), true
	case err = <-served:
	}
	e.logger.Info("shutting down", slog.String("addr", ln.Addr().String()))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), ServeShutdownTimeout)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(shutdownCtx))
	if stopErr := bg.Stop(); !jobsEnded {
		err = errors.Join(err, stopErr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
