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

// app is what serve runs: the store and the web server over it.
type app struct {
	store             *sqlstore.Store
	server            *web.Server
	generatedPassword string
}

// openApp wires serve: store → limiters → web server, listening when it
// returns. Each catalog of policies is one resolver in the chain; a key is
// decided by the first resolver that knows its policy name.
func openApp(ctx context.Context, cfg Config, logger *slog.Logger) (*app, error) {
	// Bad configuration is found before the database is touched.
	inbound, err := newInbound(cfg)
	if err != nil {
		return nil, err
	}
	store, err := sqlstore.Open(ctx, cfg.DB, sqlstore.Options{Migrate: true, Logger: logger.WithGroup("sqlstore")})
	if err != nil {
		return nil, err
	}
	a := &app{store: store}
	if err := a.openServer(cfg, inbound, logger); err != nil {
		store.Close()
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

func (a *app) openServer(cfg Config, inbound *web.Inbound, logger *slog.Logger) error {
	metrics := web.NewMetrics()
	var resolvers throttle.Resolvers
	var policyNames []string
	if inbound != nil {
		resolvers = append(resolvers, inbound.Policies())
		policyNames = append(policyNames, inbound.PolicyNames()...)
	}
	// Phase 2: the DICT catalog and the SIFEN policy join the chain here,
	// one line each (resolvers = append(resolvers, ...)).

	limiter, err := throttle.NewLimiter(a.store, resolvers, throttle.Config{
		Thresholds: cfg.Thresholds,
		Ledger:     cfg.Ledger,
		Notifier:   throttle.SlogNotifier{Logger: logger.WithGroup("severity")},
		Observer:   metrics,
		Logger:     logger.WithGroup("throttle"),
	})
	if err != nil {
		return UsageError("%v", err)
	}
	if inbound != nil {
		// The inbound limiter has a Limiter of its own on the same store:
		// every request is a take, and writing a ledger row for each (or
		// for each refusal of a flood) would bury the outbound history.
		// Its decisions are still counted in the metrics.
		inbound.Limiter, err = throttle.NewLimiter(a.store, resolvers, throttle.Config{
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
	s.Limiter = limiter
	s.Inbound = inbound
	s.Admin = creds
	s.TrustedProxies = cfg.TrustedProxies
	s.Metrics = metrics
	s.HealthCheck = storeHealth(a.store)
	s.Logger = logger.WithGroup("web")
	s.Policies = policyNames
	if err := s.Open(); err != nil {
		return err
	}
	a.server = s
	return nil
}

// close stops the server (waiting for requests in flight), then the store.
func (a *app) close() error {
	return errors.Join(a.server.Close(), a.store.Close())
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
		var version int64
		var dirty bool
		err = store.ReadDB().QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty)
		if err != nil {
			return fmt.Errorf("serve: read the schema version: %w: %w", throttle.ErrStoreUnavailable, err)
		}
		if dirty || version != int64(latest) {
			return fmt.Errorf("serve: schema at version %d (dirty %t), want %d", version, dirty, latest)
		}
		return nil
	}
}
