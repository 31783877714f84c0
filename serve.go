package balde

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/balde-throttle/balde/web"
)

// OpsHandler serves /metrics (with the Go and process collectors; a bearer
// token when metricsToken is set), /healthz (CheckHealth), /readyz and
// /livez, and answers 404 to any other path: for an application to mount
// where it likes; balde gateway mounts it beside the gateway.
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

// Serve runs the engine's jobs (Run) and, once their start work is done,
// serves h on addr (port 0: a free one) with web.NewHTTPServer until ctx
// ends (nil), the jobs stop on their own or the server fails (their
// error); then it shuts down, waiting up to 10 s for requests in flight.
// listening, when set, gets the address once the listener is open. balde
// serve and balde gateway are Serve; it does not close the engine.
func (e *Engine) Serve(ctx context.Context, addr string, h http.Handler, listening func(addr string)) (err error) {
	return e.serve(ctx, addr, h, nil, listening)
}

// ServeTLS is Serve over TLS with config (its certificate, and its
// ClientCAs and ClientAuth for clients that present certificates, as the
// gateways' do): net/http's ListenAndServeTLS for the engine.
func (e *Engine) ServeTLS(ctx context.Context, addr string, h http.Handler, config *tls.Config, listening func(addr string)) error {
	if config == nil {
		return errors.New("balde: ServeTLS needs a tls.Config")
	}
	return e.serve(ctx, addr, h, config, listening)
}

func (e *Engine) serve(ctx context.Context, addr string, h http.Handler, config *tls.Config, listening func(addr string)) (err error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	select {
	case <-e.Started():
	case err := <-ran: // the start work failed
		return err
	}
	defer func() { // the jobs stop with ctx
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
	if config != nil {
		srv.TLSConfig = config
		ln = tls.NewListener(ln, config)
	}
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
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err = errors.Join(err, srv.Shutdown(shutdownCtx)); errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
