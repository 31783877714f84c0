package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/balde-throttle/balde"
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
// throttled by the mirror (balde.Engine.DictGateway), for DICT clients not
// written in Go, with /metrics, /healthz, /readyz and /livez, behind the
// inbound limiter, serving the clients of --clients only. It shares the
// database (and so the buckets) with serve and the batch commands.
func runGateway(ctx context.Context, m *Main, args []string) error {
	var service string
	if len(args) > 0 {
		service, args = args[0], args[1:]
	}
	switch service {
	case "dict":
		return runDictGateway(ctx, m, args)
	case "sifen":
		return runSifenGateway(ctx, m, args)
	case "-h", "--help":
		fmt.Fprint(m.Stdout, "Usage: balde gateway SERVICE [flags]\n\nServices:\n"+
			"  dict   a throttled reverse proxy for the DICT API (its flags: balde gateway dict --help)\n"+
			"  sifen  a SOAP endpoint for SIFEN's services, lots and single DEs through the RUC gate (balde gateway sifen --help)\n"+
			"\nExample:\n  balde gateway dict --help\n")
		return nil
	}
	return UsageError("gateway: want \"gateway dict\" or \"gateway sifen\"")
}

func runDictGateway(ctx context.Context, m *Main, args []string) error {
	g, fs, parse := m.newGateway("gateway dict", "BALDE_GATEWAY_ADDR", DefaultGatewayAddr,
		"gateway dict [--addr HOST:PORT] [--db DSN] --clients FILE --dict-url URL --dict-participant ISPB [flags]",
		"BALDE_DICT_CERT=/etc/balde/dict-client.pem BALDE_DICT_KEY=/etc/balde/dict-client.key BALDE_DICT_CA=/etc/balde/rsfn-ca.pem BALDE_DICT_VERIFY_CERT=/etc/balde/dict-answers.pem balde gateway dict --addr 127.0.0.1:8081 --clients /etc/balde/clients --db postgres://balde@db/balde --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url https://dict-ratelimit.pi.rsfn.net.br:16422 --dict-participant \"$ISPB\"",
		dictFlags)
	cfg := g.cfg
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("gateway dict: unexpected argument %q", fs.Arg(0))
	}
	if err := checkDict(*cfg, UsageError("gateway dict: no DICT URL configured (set --dict-url or BALDE_DICT_URL)")); err != nil {
		return err
	}
	if err := settings.CheckListenAddr(g.addr); err != nil {
		return UsageError("gateway dict: --addr %q: %v", g.addr, err)
	}
	dc := cfg.DictConfig(cfg.DictURL)
	e, err := g.open(ctx, m, balde.Config{Dict: &dc})
	if err != nil {
		return err
	}
	defer e.Close(context.Background())
	api, err := e.DictGateway(web.DictGatewayConfig{Authenticate: g.access.Authenticate})
	if err != nil {
		return UsageError("gateway dict: %v", errors.Unwrap(err))
	}
	return g.serve(ctx, m, e, api, func(at string) string {
		return fmt.Sprintf("DICT gateway on %s://%s in front of %s (participant %s)", g.access.Scheme(), at, cfg.DictURL, cfg.Participant())
	})
}

// gatewayCmd is one gateway command: its settings, address, clients
// (reloaded on SIGHUP and when their file changes, or anyone on loopback
// with --no-client-auth) and TLS (with --tls-cert).
type gatewayCmd struct {
	cfg    *settings.Settings
	addr   string
	noAuth *bool
	access settings.GatewayAccess
}

// newGateway starts a gateway command (newCommand) with the flags both
// gateways take: --addr (over the variable addrEnv, else def), the
// clients and TLS, the store, policies and background work, the trusted
// proxies and the inbound limiter; and those of groups.
func (m *Main) newGateway(name, addrEnv, def, synopsis, example string, groups ...[]string) (*gatewayCmd, *flag.FlagSet, func([]string) error) {
	cfg, fs, parse := m.newCommand(name, synopsis, example, append(groups, storeFlags, policyFlags, backgroundFlags,
		[]string{"clients", "tls-cert", "tls-key", "client-ca", "trusted-proxies", "inbound-ip-limit", "inbound-client-limit", "inbound-window"})...)
	g := &gatewayCmd{cfg: cfg, addr: cmp.Or(m.Getenv(addrEnv), def)}
	fs.StringVar(&g.addr, "addr", g.addr, "address the gateway listens on, HOST:PORT (env "+addrEnv+")")
	g.noAuth = fs.Bool("no-client-auth", false, "development only: serve without client credentials; --addr must then be a loopback address")
	return g, fs, parse
}

// open loads the clients and TLS (settings.Gateway.GatewayAccess: none
// configured is a usage error) and opens the engine of opts with the
// inbound limiter charging each client its own bucket, the metrics and the
// background work.
func (g *gatewayCmd) open(ctx context.Context, m *Main, opts balde.Config) (*balde.Engine, error) {
	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	var err error
	if g.access, err = g.cfg.GatewayAccess(g.addr, *g.noAuth, logger); err != nil {
		return nil, settingUsage(err)
	}
	if opts.Inbound, err = g.cfg.InboundConfig(); err != nil {
		return nil, settingUsage(err)
	}
	if opts.Inbound != nil {
		opts.Inbound.Client = g.access.Authenticate
	}
	opts.Observer, opts.Logger, opts.Jobs = web.NewMetrics(), logger, g.cfg.Jobs()
	return openEngine(ctx, *g.cfg, opts)
}

// serve serves api as web.GatewayHandler has it on the address, over TLS
// when configured, with the engine's background work (balde.Engine.Serve)
// until ctx ends, printing the banner of the address once listening.
func (g *gatewayCmd) serve(ctx context.Context, m *Main, e *balde.Engine, api http.Handler, banner func(addr string) string) error {
	ops, err := e.OpsHandler(g.cfg.MetricsToken)
	if err != nil {
		return err
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // the clients file is reread on SIGHUP (systemctl reload)
	defer signal.Stop(hup)
	h := web.GatewayHandler(watchCtx, api, ops, e.Inbound(), g.access.Clients, hup)
	listening := func(at string) { fmt.Fprintln(m.Stdout, "balde: "+banner(at)) }
	if g.access.TLS != nil {
		err = e.ServeTLS(ctx, g.addr, h, g.access.TLS, listening)
	} else {
		err = e.Serve(ctx, g.addr, h, listening)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// runSifenGateway is "balde gateway sifen": balde.Engine.SifenGateway in
// front of SIFEN (or a simulator), sharing the RUC gates of serve and
// sifen-send through the database.
func runSifenGateway(ctx context.Context, m *Main, args []string) error {
	g, fs, parse := m.newGateway("gateway sifen", "BALDE_SIFEN_GATEWAY_ADDR", DefaultSifenGatewayAddr,
		"gateway sifen [--addr HOST:PORT] [--db DSN] --clients FILE --sifen-url URL [--env test|prod] [--hold D] [flags]",
		"balde gateway sifen --addr 127.0.0.1:8082 --clients /etc/balde/clients --db postgres://balde@db/balde --sifen-url official --env prod",
		sifenFlags)
	cfg := g.cfg
	envName := fs.String("env", string(sifen.EnvTest), "SIFEN environment the gateway stands for: test or prod")
	hold := fs.Duration("hold", web.DefaultSifenGatewayHold, "longest time a lot or DE is held for its RUC's gate, in order of arrival, before a fault with Retry-After is answered; clients' timeouts must exceed it by SIFEN's answer time; 0 never holds")
	allowUnsigned := fs.Bool("allow-unsigned", false, "accept DEs and events without a signature (test environment only; SIFEN rejects them)")
	if err := parse(args); err != nil {
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
	sc, err := sifenConfig(*cfg, cfg.SifenURL, UsageError(`gateway sifen: no SIFEN URL configured (set --sifen-url or BALDE_SIFEN_URL; "official" for SIFEN's endpoints)`))
	if err != nil {
		return err
	}
	if err := settings.CheckListenAddr(g.addr); err != nil {
		return UsageError("gateway sifen: --addr %q: %v", g.addr, err)
	}
	sc.AllowUnsigned = *allowUnsigned
	e, err := g.open(ctx, m, balde.Config{Sifen: sc})
	if err != nil {
		return err
	}
	defer e.Close(context.Background())
	holdFor := *hold
	if holdFor == 0 {
		holdFor = -1 // web.SifenGatewayConfig: negative never holds
	}
	api, err := e.SifenGateway(web.SifenGatewayConfig{AllowUnsigned: *allowUnsigned, Env: env, Hold: holdFor, Authenticate: g.access.Authenticate})
	if err != nil {
		return UsageError("gateway sifen: %v", errors.Unwrap(err))
	}
	return g.serve(ctx, m, e, api, func(at string) string {
		return fmt.Sprintf("SIFEN gateway (%s) on %s://%s in front of %s", env, g.access.Scheme(), at, cfg.SifenURL)
	})
}
