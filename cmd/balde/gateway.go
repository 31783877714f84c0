package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/web"
)

// DefaultGatewayAddr is where "balde gateway dict" listens by default
// (BALDE_GATEWAY_ADDR): beside serve's 127.0.0.1:8080.
const DefaultGatewayAddr = "127.0.0.1:8081"

// DefaultSifenGatewayAddr is where "balde gateway sifen" listens by
// default (BALDE_SIFEN_GATEWAY_ADDR).
const DefaultSifenGatewayAddr = "127.0.0.1:8082"

// runGateway is "balde gateway dict": a reverse proxy for the DICT API
// throttled by the mirror (web.DictGateway), for DICT clients not written in
// Go, with /metrics, /healthz, /readyz and /livez, behind the inbound
// limiter, serving the clients of --clients only. It shares the database
// (and so the buckets) with serve and the batch commands.
func runGateway(ctx context.Context, m *Main, args []string) error {
	if len(args) > 0 && args[0] == "sifen" {
		return runSifenGateway(ctx, m, args[1:])
	}
	if len(args) == 0 || args[0] != "dict" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(m.Stdout, "Usage: balde gateway SERVICE [flags]\n\nServices:\n"+
				"  dict   a throttled reverse proxy for the DICT API (its flags: balde gateway dict --help)\n"+
				"  sifen  a SOAP endpoint for SIFEN's services, lots and single DEs through the RUC gate (balde gateway sifen --help)\n"+
				"\nExample:\n  balde gateway dict --help\n")
			return nil
		}
		return UsageError("gateway: want \"gateway dict\" or \"gateway sifen\"")
	}
	return runDictGateway(ctx, m, args[1:])
}

func runDictGateway(ctx context.Context, m *Main, args []string) error {
	cfg, err := m.envConfig()
	if err != nil {
		return err
	}
	addr := DefaultGatewayAddr
	if v := m.Getenv("BALDE_GATEWAY_ADDR"); v != "" {
		addr = v
	}
	fs := m.newFlagSet("gateway dict", "gateway dict [--addr HOST:PORT] [--db DSN] --clients FILE --dict-url URL --dict-participant ISPB [flags]",
		"BALDE_DICT_CERT=/etc/balde/dict-client.pem BALDE_DICT_KEY=/etc/balde/dict-client.key BALDE_DICT_CA=/etc/balde/rsfn-ca.pem BALDE_DICT_VERIFY_CERT=/etc/balde/dict-answers.pem balde gateway dict --addr 127.0.0.1:8081 --clients /etc/balde/clients --db postgres://balde@db/balde --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url https://dict-ratelimit.pi.rsfn.net.br:16422 --dict-participant \"$ISPB\"")
	noAuth := cfg.addGatewayFlags(fs, &addr, "BALDE_GATEWAY_ADDR")
	cfg.addDictFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("gateway dict: unexpected argument %q", fs.Arg(0))
	}
	if cfg.DictURL == "" {
		return UsageError("gateway dict: no DICT URL configured (set --dict-url or BALDE_DICT_URL)")
	}
	if err := settingUsage(cfg.CheckDictURLs()); err != nil {
		return err
	}
	if err := settingUsage(cfg.CheckDictClient()); err != nil {
		return err
	}
	if err := settings.CheckListenAddr(addr); err != nil {
		return UsageError("gateway dict: --addr %q: %v", addr, err)
	}
	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	access, err := newGatewayAccess(cfg, addr, *noAuth, logger)
	if err != nil {
		return err
	}
	inbound, err := newInboundConfig(cfg)
	if err != nil {
		return err
	}
	if inbound != nil {
		inbound.Client = access.authenticate
	}
	dc := cfg.DictConfig(cfg.DictURL)
	e, err := openEngine(ctx, cfg, engineOptions{Inbound: inbound, Observer: web.NewMetrics(), Logger: logger, Dict: &dc, Jobs: cfg.Jobs()})
	if err != nil {
		return err
	}
	defer e.close(context.Background())
	api, err := e.DictGateway(web.DictGatewayConfig{Authenticate: access.authenticate})
	if err != nil {
		return UsageError("gateway dict: %v", errors.Unwrap(err))
	}
	return serveGateway(ctx, m, e, cfg, addr, api, access, func(at string) string {
		return fmt.Sprintf("DICT gateway on %s://%s in front of %s (participant %s)", access.scheme(), at, cfg.DictURL, cfg.Participant())
	})
}

// gatewayAccess is how a gateway's clients reach it: the clients of
// --clients (reloaded on SIGHUP and when the file changes), or anyone on
// loopback with --no-client-auth, over TLS with --tls-cert.
type gatewayAccess struct {
	clients      *web.GatewayClients // nil with --no-client-auth
	authenticate func(*http.Request) (string, bool)
	tls          *tls.Config
}

// newGatewayAccess checks and loads the gateway's clients and TLS
// (settings.Gateway.GatewayAccess): a gateway with no client configured is
// a usage error, exit 2.
func newGatewayAccess(cfg Config, addr string, noAuth bool, logger *slog.Logger) (gatewayAccess, error) {
	clients, config, err := cfg.GatewayAccess(addr, noAuth, logger)
	if err != nil {
		return gatewayAccess{}, settingUsage(err)
	}
	a := gatewayAccess{clients: clients, tls: config}
	if clients != nil {
		a.authenticate = clients.Authenticate
	} else {
		logger.Warn("--no-client-auth: the gateway serves anyone who reaches " + addr + " (development only)")
		a.authenticate = func(*http.Request) (string, bool) { return "anonymous", true }
	}
	return a, nil
}

func (a gatewayAccess) scheme() string {
	if a.tls != nil {
		return "https"
	}
	return "http"
}

// serveGateway serves api behind the inbound limiter, with /metrics (behind
// cfg's token) and the probes beside it (balde.Engine.OpsHandler), on addr
// (balde.Engine.Serve: the engine's background work, then the server,
// until ctx ends), and prints the banner of the address once listening.
func serveGateway(ctx context.Context, m *Main, e *engine, cfg Config, addr string, api http.Handler, access gatewayAccess, banner func(addr string) string) error {
	ops, err := e.OpsHandler(cfg.MetricsToken)
	if err != nil {
		return err
	}
	if in := e.Inbound(); in != nil {
		api = in.Middleware(api)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/livez"} {
		mux.Handle(p, ops)
	}
	if access.clients != nil {
		// A client's token or certificate is rotated without a restart.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		watchCtx, stop := context.WithCancel(ctx)
		defer stop()
		go access.clients.Watch(watchCtx, clientsCheckEvery, hup)
	}
	listening := func(at string) { fmt.Fprintln(m.Stdout, "balde: "+banner(at)) }
	if access.tls != nil {
		err = e.ServeTLS(ctx, addr, mux, access.tls, listening)
	} else {
		err = e.Serve(ctx, addr, mux, listening)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// clientsCheckEvery is how often a gateway looks whether its clients file
// changed.
const clientsCheckEvery = 2 * time.Second

// addGatewayFlags registers the flags both gateways share: --addr (over
// the variable addrEnv), the clients and TLS, the store, policies and
// background work, the trusted proxies and the inbound limiter. It
// returns --no-client-auth.
func (c *Config) addGatewayFlags(fs *flag.FlagSet, addr *string, addrEnv string) *bool {
	fs.StringVar(addr, "addr", *addr, "address the gateway listens on, HOST:PORT (env "+addrEnv+")")
	c.AddFlags(fs, "clients", "tls-cert", "tls-key", "client-ca")
	noAuth := fs.Bool("no-client-auth", false, "development only: serve without client credentials; --addr must then be a loopback address")
	c.addStoreFlags(fs)
	c.addPolicyFlags(fs)
	c.addBackgroundFlags(fs)
	c.AddFlags(fs, "trusted-proxies", "inbound-ip-limit", "inbound-client-limit", "inbound-window")
	return noAuth
}

// runSifenGateway is "balde gateway sifen": web.SifenGateway in front of
// SIFEN (or a simulator), sharing the RUC gates of serve and sifen-send
// through the database.
func runSifenGateway(ctx context.Context, m *Main, args []string) error {
	cfg, err := m.envConfig()
	if err != nil {
		return err
	}
	addr := DefaultSifenGatewayAddr
	if v := m.Getenv("BALDE_SIFEN_GATEWAY_ADDR"); v != "" {
		addr = v
	}
	fs := m.newFlagSet("gateway sifen", "gateway sifen [--addr HOST:PORT] [--db DSN] --clients FILE --sifen-url URL [--env test|prod] [--hold D] [flags]",
		"balde gateway sifen --addr 127.0.0.1:8082 --clients /etc/balde/clients --db postgres://balde@db/balde --sifen-url official --env prod")
	noAuth := cfg.addGatewayFlags(fs, &addr, "BALDE_SIFEN_GATEWAY_ADDR")
	envName := fs.String("env", string(sifen.EnvTest), "SIFEN environment the gateway stands for: test or prod")
	hold := fs.Duration("hold", web.DefaultSifenGatewayHold, "longest time a lot or DE is held for its RUC's gate, in order of arrival, before a fault with Retry-After is answered; clients' timeouts must exceed it by SIFEN's answer time; 0 never holds")
	allowUnsigned := fs.Bool("allow-unsigned", false, "accept DEs and events without a signature (test environment only; SIFEN rejects them)")
	cfg.addSifenFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("gateway sifen: unexpected argument %q", fs.Arg(0))
	}
	env, err := sifen.ParseEnv(*envName)
	if err != nil {
		return UsageError("gateway sifen: --env %q: want test or prod", *envName)
	}
	if *allowUnsigned && env != sifen.EnvTest {
		return UsageError("gateway sifen: --allow-unsigned is for the test environment only")
	}
	if *hold < 0 {
		return UsageError("gateway sifen: --hold %s: want 0 or more", *hold)
	}
	if cfg.SifenURL == "" {
		return UsageError(`gateway sifen: no SIFEN URL configured (set --sifen-url or BALDE_SIFEN_URL; "official" for SIFEN's endpoints)`)
	}
	if err := settingUsage(cfg.CheckSifenBlock()); err != nil {
		return err
	}
	if err := settings.CheckListenAddr(addr); err != nil {
		return UsageError("gateway sifen: --addr %q: %v", addr, err)
	}
	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	access, err := newGatewayAccess(cfg, addr, *noAuth, logger)
	if err != nil {
		return err
	}
	inbound, err := newInboundConfig(cfg)
	if err != nil {
		return err
	}
	if inbound != nil {
		inbound.Client = access.authenticate
	}
	client, err := sifenClient(cfg, cfg.SifenURL)
	if err != nil {
		return err
	}
	sc := cfg.SifenConfig(client)
	sc.AllowUnsigned = *allowUnsigned
	e, err := openEngine(ctx, cfg, engineOptions{Inbound: inbound, Observer: web.NewMetrics(), Logger: logger, Sifen: &sc, Jobs: cfg.Jobs()})
	if err != nil {
		return err
	}
	defer e.close(context.Background())
	holdFor := *hold
	if holdFor == 0 {
		holdFor = -1 // web.SifenGateway: negative never holds
	}
	api, err := e.SifenGateway(web.SifenGatewayConfig{AllowUnsigned: *allowUnsigned, Env: env, Hold: holdFor, Authenticate: access.authenticate})
	if err != nil {
		return UsageError("gateway sifen: %v", errors.Unwrap(err))
	}
	return serveGateway(ctx, m, e, cfg, addr, api, access, func(at string) string {
		return fmt.Sprintf("SIFEN gateway (%s) on %s://%s in front of %s", env, access.scheme(), at, cfg.SifenURL)
	})
}
