// Package simkit is the scaffolding the DICT and SIFEN simulators
// (dict/dictsim, sifen/sifensim) and their commands share: serving on a
// loopback address, the latency wait and the commands' main. Like the simulators, it imports
// nothing of balde.
package simkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Listener serves a simulator on a loopback address; the zero value is not
// listening.
type Listener struct {
	ln  net.Listener
	srv *http.Server
}

// Open listens on addr, a loopback address only (the simulators serve
// made-up data without authentication; port 0 picks a free port), and serves
// h in the background until Close. name prefixes its errors and logs.
func (l *Listener) Open(name, addr string, h http.Handler, logger *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: address %q: %w", name, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: address %q: the simulator listens on loopback only (127.0.0.1, ::1, localhost)", name, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", name, err)
	}
	// The goroutine serves its own copy: Close clears l.srv first.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	l.ln, l.srv = ln, srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(name+": serve", slog.Any("error", err))
		}
	}()
	return nil
}

// URL returns "http://ADDR" of an opened listener ("" before Open).
func (l *Listener) URL() string {
	if l.ln == nil {
		return ""
	}
	return "http://" + l.ln.Addr().String()
}

// Close stops serving, if opened, letting requests in progress finish for
// up to 5 s.
func (l *Listener) Close() error {
	srv := l.srv
	if srv == nil {
		return nil
	}
	l.srv = nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// Sleep waits d (nothing when d <= 0), or until ctx is done: a simulator's
// latency, in wall time.
func Sleep(ctx context.Context, d time.Duration) {
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
}

// Main runs a simulator command's run with the process's arguments and
// standard streams, its ctx cancelled by SIGINT or SIGTERM; an error other
// than flag.ErrHelp is printed as "NAME: error" and exits with status 2.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
}
