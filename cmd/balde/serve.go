package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/crypto/bcrypt"

	"balde/migrations"
	"balde/throttle"
	"balde/throttle/sqlstore"
	"balde/web"
)

// runServe is "balde serve": the web app. It opens the store (applying
// pending migrations), builds the limiters and the web server, serves until
// the context ends (Ctrl-C, SIGTERM) and shuts down gracefully.
func runServe(ctx context.Context, m *Main, args []string) error {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return UsageError("%v", err)
	}
	fs := m.newFlagSet("serve", "serve [--addr HOST:PORT] [--db DSN] [flags]",
		"BALDE_ADMIN_PASSWORD=... balde serve --addr 127.0.0.1:8080 --db sqlite://balde.db")
	cfg.addStoreFlags(fs)
	cfg.addWebFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("serve: unexpected argument %q", fs.Arg(0))
	}
	if _, _, err := sqlstore.ParseDSN(cfg.DB); err != nil {
		return UsageError("%v", err)
	}
	if cfg.AdminPasswordBcrypt != "" {
		if _, err := bcrypt.Cost([]byte(cfg.AdminPasswordBcrypt)); err != nil {
			return UsageError("BALDE_ADMIN_PASSWORD_BCRYPT: not a bcrypt hash: %v", err)
		}
	}
	if cfg.InboundTokensFile != "" {
		f, err := os.Open(cfg.InboundTokensFile)
		if err != nil {
			return UsageError("BALDE_INBOUND_TOKENS_FILE: %v", err)
		}
		tokens, err := web.ParseInboundTokens(f)
		f.Close()
		if err != nil {
			return UsageError("BALDE_INBOUND_TOKENS_FILE %s: %v", cfg.InboundTokensFile, err)
		}
		cfg.InboundTokens = append(cfg.InboundTokens, tokens...)
	}

	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	app, err := openApp(ctx, cfg, logger)
	if err != nil {
		return err
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

// app is what serve runs: the engine and the web server over it.
type app struct {
	engine            *engine
	server            *web.Server
	generatedPassword string
}

// openApp wires serve: engine (store, group commit, limiter with the
// inbound, DICT and SIFEN policies) → web server, listening when it returns.
func openApp(ctx context.Context, cfg Config, logger *slog.Logger) (*app, error) {
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
	if err := a.openServer(cfg, inbound, metrics, logger); err != nil {
		eng.close(ctx)
		return nil, err
	}
	return a, nil
}

// newInbound builds the inbound limiter from cfg, or nil when it is off.
func newInbound(cfg Config) (*web.Inbound, error) {
	if cfg.InboundIPLimit == 0 {
		return nil, nil
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
	if err := s.Open(); err != nil {
		return err
	}
	a.server = s
	return nil
}

// close stops the server (waiting for requests in flight), then the engine.
func (a *app) close() error {
	return errors.Join(a.server.Close(), a.engine.close(context.Background()))
}

// storeHealth is the health check of /healthz: the database answers and
// its schema is at the latest migration, not dirty.
func storeHealth(store *sqlstore.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := store.Ping(ctx); err != nil {
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
