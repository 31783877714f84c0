package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/web"
)

// DefaultGatewayAddr is where "balde gateway dict" listens by default
// (BALDE_GATEWAY_ADDR): beside serve's 127.0.0.1:8080.
const DefaultGatewayAddr = "127.0.0.1:8081"

// runGateway is "balde gateway dict": a reverse proxy for the DICT API
// throttled by the mirror (web.DictGateway), for DICT clients not written in
// Go, with /metrics, /healthz, /readyz and /livez, behind the inbound
// limiter. It shares the database (and so the buckets) with serve and the
// batch commands.
func runGateway(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 || args[0] != "dict" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(m.Stderr, "Usage: balde gateway SERVICE [flags]\n\nServices:\n"+
				"  dict   a throttled reverse proxy for the DICT API (its flags: balde gateway dict --help)\n"+
				"\nExample:\n  balde gateway dict --help\n")
			return nil
		}
		return UsageError("gateway: want \"gateway dict\"")
	}
	return runDictGateway(ctx, m, args[1:])
}

func runDictGateway(ctx context.Context, m *Main, args []string) error {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return UsageError("%v", err)
	}
	addr := DefaultGatewayAddr
	if v := m.Getenv("BALDE_GATEWAY_ADDR"); v != "" {
		addr = v
	}
	fs := m.newFlagSet("gateway dict", "gateway dict [--addr HOST:PORT] [--db DSN] --dict-url URL --dict-participant ISPB [flags]",
		"balde gateway dict --addr 127.0.0.1:8081 --db postgres://balde@db/balde --dict-url https://dict.pi.rsfn.net.br:16522 --dict-participant 12345678")
	fs.StringVar(&addr, "addr", addr, "address the gateway listens on, HOST:PORT (env BALDE_GATEWAY_ADDR)")
	cfg.addStoreFlags(fs)
	cfg.addDictFlags(fs)
	cfg.addPolicyFlags(fs)
	cfg.addBackgroundFlags(fs)
	fs.Var(proxiesFlag{&cfg.TrustedProxies}, "trusted-proxies", "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)")
	fs.Var(parsedFlag[int64]{&cfg.InboundIPLimit, parseInboundIPLimit}, "inbound-ip-limit", "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)")
	fs.Var(parsedFlag[time.Duration]{&cfg.InboundWindow, parseInboundWindow}, "inbound-window", "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("gateway dict: unexpected argument %q", fs.Arg(0))
	}
	if cfg.DictURL == "" {
		return UsageError("gateway dict: no DICT URL configured (set --dict-url or BALDE_DICT_URL)")
	}
	if err := cfg.checkDictURLs(); err != nil {
		return err
	}
	if err := checkListenAddr(addr); err != nil {
		return UsageError("gateway dict: --addr %q: %v", addr, err)
	}
	inbound, err := newInboundConfig(cfg)
	if err != nil {
		return err
	}
	if err := checkDictClient(cfg); err != nil {
		return err
	}
	dc := cfg.dictConfig(cfg.DictURL, true)
	httpClient, err := balde.NewDictHTTPClient(dc)
	if err != nil {
		return UsageError("DICT TLS: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	e, err := openEngine(ctx, cfg, engineOptions{Inbound: inbound, Observer: web.NewMetrics(), Logger: logger, Dict: &dc, Jobs: cfg.jobs()})
	if err != nil {
		return err
	}
	defer e.close(context.Background())

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	stopped := make(chan error, 1)
	go func() { stopped <- e.Run(runCtx) }()
	select {
	case <-e.Started():
	case err := <-stopped:
		return err
	}

	h, err := newDictGatewayHandler(e, cfg, httpClient, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		stopRun()
		<-stopped
		return fmt.Errorf("gateway dict: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(m.Stdout, "balde: DICT gateway on http://%s in front of %s (participant %s)\n", ln.Addr(), cfg.DictURL, cfg.DictParticipant)

	select {
	case <-ctx.Done():
		err = nil
	case err = <-stopped:
		stopped <- err
	case err = <-served:
	}
	logger.Info("gateway: shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(shutdownCtx))
	stopRun()
	if runErr := <-stopped; runErr != nil && !errors.Is(runErr, context.Canceled) {
		err = errors.Join(err, runErr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// newDictGatewayHandler is the gateway's whole handler: the DICT API
// (/api/v2/…) and the payment endpoint through web.DictGateway behind the
// inbound limiter, and the probes and /metrics of a web.Server over the
// engine (its admin pages are not served here: balde serve has them, on
// the same database). cfg.MetricsToken protects /metrics.
func newDictGatewayHandler(e *engine, cfg Config, httpClient *http.Client, logger *slog.Logger) (http.Handler, error) {
	client := e.Dict()
	var base http.RoundTripper
	if httpClient != nil {
		base = httpClient.Transport
	}
	g, err := web.NewDictGateway(web.DictGatewayConfig{
		Target: cfg.DictURL, PoliciesURL: cfg.DictPoliciesURL, Participant: cfg.DictParticipant,
		Meter: client.Meter(), Records: e.records, Payments: client, Base: base,
		Logger: logger.WithGroup("gateway"),
	})
	if err != nil {
		return nil, UsageError("gateway dict: %v", err)
	}
	s := e.NewServer(cfg.DictParticipant)
	s.TrustedProxies = cfg.TrustedProxies
	s.MetricsToken = cfg.MetricsToken
	s.RuntimeMetrics = true
	s.HealthCheck = storeHealth(e.store)
	// No admin here: every credential is refused.
	s.Authenticate = func(*http.Request) (string, bool) { return "", false }
	ops, err := s.Handler()
	if err != nil {
		return nil, err
	}
	var api http.Handler = g
	if in := e.Inbound(); in != nil {
		api = in.Middleware(g)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle(web.DictGatewayPaymentsPath, api)
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/livez"} {
		mux.Handle(p, ops)
	}
	return mux, nil
}
