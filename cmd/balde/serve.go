package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// runServe is "balde serve": the web app. It opens the store (applying
// pending migrations), starts the DICT and SIFEN simulators when no
// endpoint is configured, builds the DICT client and the SIFEN sender,
// settles SIFEN documents a crashed send left in "sending", serves until the
// context ends (Ctrl-C, SIGTERM) with reconciliation and pruning in the
// background, and shuts down gracefully.
func runServe(ctx context.Context, m *Main, args []string) error {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return UsageError("%v", err)
	}
	fs := m.newFlagSet("serve", "serve [--addr HOST:PORT] [--db DSN] [--dict-url URL] [--sifen-url URL] [flags]",
		"BALDE_ADMIN_PASSWORD=... balde serve --addr 127.0.0.1:8080 --db sqlite://balde.db")
	cfg.addStoreFlags(fs)
	cfg.addWebFlags(fs)
	cfg.addDictFlags(fs)
	cfg.addSifenFlags(fs)
	cfg.addPolicyFlags(fs)
	cfg.addBackgroundFlags(fs)
	create := fs.Bool("create", false, "create the SQLite database if its file does not exist (without it, only the default path is created)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("serve: unexpected argument %q", fs.Arg(0))
	}
	// A configured SIFEN is checked before the database is touched; without
	// one the simulator's client is built once it listens.
	var sifenClient *sifen.Client
	if cfg.SifenURL != "" {
		var err error
		if sifenClient, err = cfg.sifenClient(cfg.SifenURL); err != nil {
			return err
		}
	}
	if cfg.AdminPasswordBcrypt != "" {
		if _, err := bcrypt.Cost([]byte(cfg.AdminPasswordBcrypt)); err != nil {
			return UsageError("BALDE_ADMIN_PASSWORD_BCRYPT: not a bcrypt hash: %v", err)
		}
	}

	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	creating, err := checkCreate(cfg.DB, *create)
	if err != nil {
		return err
	}
	app, err := openApp(ctx, cfg, sifenClient, logger)
	if err != nil {
		return err
	}
	logDatabase(app.engine.store, creating, logger)
	if sims := app.sims; sims.dict != nil {
		fmt.Fprintf(m.Stdout, "balde: DICT simulator on %s (%d sample keys, category %s; set BALDE_DICT_URL for a real DICT)\n",
			sims.dict.URL(), sims.entries, cfg.DictCategory)
	} else {
		fmt.Fprintf(m.Stdout, "balde: DICT at %s\n", cfg.DictURL)
	}
	if sims := app.sims; sims.sifen != nil {
		fmt.Fprintf(m.Stdout, "balde: SIFEN simulator on %s (set BALDE_SIFEN_URL=official for SIFEN)\n", sims.sifen.URL()+"/{env}")
	} else if cfg.SifenURL == SifenOfficial {
		fmt.Fprintf(m.Stdout, "balde: SIFEN at its official endpoints (%s, %s)\n", sifen.TestURL, sifen.ProdURL)
	} else {
		fmt.Fprintf(m.Stdout, "balde: SIFEN at %s\n", cfg.SifenURL)
	}
	fmt.Fprintf(m.Stdout, "balde: listening on %s\n", app.server.URL())
	if app.generatedPassword != "" {
		fmt.Fprintf(m.Stdout, "balde: admin user %q, generated password (shown once, set BALDE_ADMIN_PASSWORD to choose one): %s\n",
			cfg.AdminUser, app.generatedPassword)
	}
	<-ctx.Done()
	logger.Info("shutting down")
	return app.close()
}

// app is what serve runs: the engine, the simulators, the DICT client and
// the SIFEN sender, the web server over them, and the background work.
type app struct {
	engine            *engine
	sims              *simulators
	dict              *dict.Client
	sender            *sifen.Sender
	server            *web.Server
	generatedPassword string

	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// openApp wires serve: engine (store, group commit, limiter with the
// inbound, DICT and SIFEN policies) → simulators (when no endpoint is
// configured) → DICT client (its category restored) and SIFEN sender
// (documents left "sending" settled) → web server, listening when it
// returns → background reconciliation and pruning.
func openApp(ctx context.Context, cfg Config, sifenClient *sifen.Client, logger *slog.Logger) (_ *app, err error) {
	// Bad configuration is found before the database is touched.
	inbound, err := newInbound(cfg)
	if err != nil {
		return nil, err
	}
	metrics := web.NewMetrics()
	var resolvers throttle.Resolvers
	if inbound != nil {
		resolvers = append(resolvers, inbound.Policies())
	}
	eng, err := openEngine(ctx, cfg, engineOptions{Resolvers: resolvers, Observer: metrics, Logger: logger})
	if err != nil {
		return nil, err
	}
	a := &app{engine: eng}
	defer func() {
		if err != nil {
			a.sims.close()
			eng.close(ctx)
		}
	}()
	if err := checkWritable(ctx, eng.store); err != nil {
		return nil, err
	}

	sims, dictURL, sifenURL, err := startSimulators(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	a.sims = sims
	if a.dict, err = eng.dictClient(ctx, cfg, dictURL); err != nil {
		return nil, err
	}
	if sifenClient == nil {
		if sifenClient, err = cfg.sifenClient(sifenURL); err != nil {
			return nil, err
		}
	}
	if a.sender, err = eng.sifenSender(sifenClient); err != nil {
		return nil, err
	}
	// Before anything can send: documents a crashed send left in
	// "sending" are settled by asking SIFEN, or stay (and are reported).
	a.resolveSifen(ctx, logger)

	if err := a.openServer(cfg, inbound, metrics, logger); err != nil {
		return nil, err
	}
	a.startBackground(cfg, logger)
	return a, nil
}

// newInbound builds the inbound limiter from cfg (reading
// BALDE_INBOUND_TOKENS_FILE), or nil when it is off.
func newInbound(cfg Config) (*web.Inbound, error) {
	if cfg.InboundIPLimit == 0 {
		return nil, nil
	}
	if cfg.InboundTokensFile != "" {
		f, err := os.Open(cfg.InboundTokensFile)
		if err != nil {
			return nil, UsageError("BALDE_INBOUND_TOKENS_FILE: %v", err)
		}
		tokens, err := web.ParseInboundTokens(f)
		f.Close()
		if err != nil {
			return nil, UsageError("BALDE_INBOUND_TOKENS_FILE %s: %v", cfg.InboundTokensFile, err)
		}
		cfg.InboundTokens = append(slices.Clip(cfg.InboundTokens), tokens...)
	}
	in, err := web.NewInbound(web.InboundConfig{
		IPLimit:  cfg.InboundIPLimit,
		Window:   cfg.InboundWindow,
		Block:    cfg.InboundBlock,
		Tokens:   cfg.InboundTokens,
		Paths:    cfg.InboundPaths,
		Exempt:   cfg.InboundExempt,
		FailMode: cfg.InboundFailMode,
	})
	if err != nil {
		return nil, UsageError("inbound limiter: %v", err)
	}
	return in, nil
}

func (a *app) openServer(cfg Config, inbound *web.Inbound, metrics *web.Metrics, logger *slog.Logger) error {
	eng := a.engine
	policyNames := eng.policyNames()
	if inbound != nil {
		policyNames = append(inbound.PolicyNames(), policyNames...)
		// The inbound limiter has a Limiter of its own on the same store:
		// every request is a take, and writing a ledger row for each (or
		// for each refusal of a flood) would bury the outbound history.
		// Its decisions are still counted in the metrics.
		var err error
		inbound.Limiter, err = throttle.NewLimiter(eng.throttleStore(), inbound.Policies(), throttle.Config{
			Clock:           eng.store.Now,
			Thresholds:      cfg.Thresholds,
			Ledger:          throttle.LedgerNoTakes,
			SkipRefusalRows: true,
			Observer:        metrics,
			Logger:          logger.WithGroup("inbound"),
		})
		if err != nil {
			return UsageError("%v", err)
		}
	}

	creds := web.Credentials{User: cfg.AdminUser, Password: cfg.AdminPassword, PasswordBcrypt: cfg.AdminPasswordBcrypt}
	if creds.Password == "" && creds.PasswordBcrypt == "" {
		// The admin is never open: without a configured password, one is
		// made up and printed once.
		creds.Password = rand.Text()
		a.generatedPassword = creds.Password
	}

	s := web.NewServer()
	s.Addr = cfg.Addr
	s.Limiter = eng.limiter
	s.Inbound = inbound
	s.Admin = creds
	s.TrustedProxies = cfg.TrustedProxies
	s.Metrics = metrics
	s.HealthCheck = storeHealth(eng.store)
	s.Logger = logger.WithGroup("web")
	s.Policies = policyNames
	s.Sifen = a.sender
	s.Dict = a.dict
	s.Scope = web.Scopes(eng.dict)
	s.Panels = []web.PanelFunc{
		web.DictCategoryPanel(eng.dict, cfg.DictParticipant),
		web.AntiScanPanel(eng.records.Monitors, eng.store.Now),
		web.SifenDocumentsPanel(a.sender),
	}
	if err := s.Open(); err != nil {
		return err
	}
	a.server = s
	return nil
}

// close stops the background work, the server (waiting for requests in
// flight), the simulators, then the engine.
func (a *app) close() error {
	a.bgCancel()
	a.bg.Wait()
	return errors.Join(a.server.Close(), a.sims.close(), a.engine.close(context.Background()))
}

// resolveSifen settles the SIFEN documents left in "sending" whose claim
// is old enough (sifen.Sender.Resolve); what it cannot settle now (SIFEN
// unreachable) stays and is logged, and the next maintenance pass tries
// again.
func (a *app) resolveSifen(ctx context.Context, logger *slog.Logger) {
	resolved, err := a.sender.Resolve(ctx)
	for _, r := range resolved {
		logger.Info("SIFEN document settled", slog.Int64("id", r.DocumentID), slog.String("code", r.Code), slog.String("status", string(r.Status)))
	}
	if err != nil {
		logger.Warn("SIFEN documents left in sending could not all be settled", slog.Any("error", err))
	}
}

// startBackground starts the DICT reconciliation (against a real DICT by
// default; see Config.DictReconcileEvery) and the maintenance loop; close
// stops them.
func (a *app) startBackground(cfg Config, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	a.bgCancel = cancel
	if every := reconcilePeriod(cfg.DictReconcileEvery, a.sims.dict != nil); every > 0 {
		logger.Info("DICT reconciliation on", slog.Duration("every", every))
		a.bg.Go(func() { _ = a.dict.RunReconcile(ctx, every, nil) })
	}
	if cfg.PruneEvery > 0 {
		a.bg.Go(func() { a.maintain(ctx, cfg.PruneEvery, cfg.LedgerRetention, logger) })
	}
	a.bg.Go(func() { watchDatabase(ctx, a.engine.store, identityCheckEvery, logger) })
}

// reconcilePeriod resolves Config.DictReconcileEvery: ReconcileAuto is
// DefaultReconcileEvery against a real DICT and off (0) against the
// simulator, whose buckets only ever see this process's traffic; a value
// set explicitly is used as it is, simulator or not.
func reconcilePeriod(every time.Duration, simulated bool) time.Duration {
	if every != ReconcileAuto {
		return every
	}
	if simulated {
		return 0
	}
	return DefaultReconcileEvery
}

// maintain runs every period until ctx ends: it deletes ledger rows and
// DICT lookups older than retention and idle bucket rows (Limiter.Prune,
// Records.PruneLookups), and settles SIFEN documents left in "sending"
// (Resolve). Failures are logged and retried at the next tick.
func (a *app) maintain(ctx context.Context, every, retention time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := a.engine.prune(ctx, retention, 0, false)
		if err != nil && ctx.Err() == nil {
			logger.Warn("prune", slog.Any("error", err))
		}
		logger.Info("pruned", slog.Int64("ledger_rows", res.LedgerRows), slog.Int64("buckets", res.Buckets), slog.Int64("dict_lookups", res.DictLookups))
		a.resolveSifen(ctx, logger)
	}
}

// storeHealth is the readiness check of /readyz and /healthz: a write round
// trip succeeds (retried once on a fresh connection), the SQLite file is
// still the one opened (sqlstore.Store.CheckWrite), and the schema is at
// the latest migration, not dirty.
func storeHealth(store *sqlstore.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := store.CheckWrite(ctx); err != nil {
			return err
		}
		latest, err := migrations.Latest(store.Engine())
		if err != nil {
			return err
		}
		version, dirty, err := store.SchemaVersion(ctx)
		if err != nil {
			return err
		}
		if dirty || version != latest {
			return fmt.Errorf("serve: schema at version %d (dirty %t), want %d", version, dirty, latest)
		}
		return nil
	}
}
