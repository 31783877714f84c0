package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// runServe is "balde serve": the web app. It starts the DICT and SIFEN
// simulators when no endpoint is configured, opens the engine (the store,
// pending migrations applied, the DICT client and the SIFEN sender), runs
// its background work (balde.Engine.Run: SIFEN documents a crashed send
// left in "sending" settled before the server opens, then lot polling,
// re-grading, reconciliation, pruning), serves until the context ends
// (Ctrl-C, SIGTERM), and shuts down gracefully.
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
	if err := cfg.checkSifenBlock(); err != nil {
		return err
	}
	if err := cfg.checkDictURLs(); err != nil {
		return err
	}
	for _, a := range []struct{ flag, addr string }{{"--addr", cfg.Addr}, {"--dict-sim-addr", cfg.DictSimAddr}, {"--sifen-sim-addr", cfg.SifenSimAddr}} {
		if err := checkListenAddr(a.addr); a.addr != "" && err != nil {
			return UsageError("serve: %s %q: %v", a.flag, a.addr, err)
		}
	}
	// The background prune keeps the floor of balde prune unless forced.
	if cfg.PruneEvery > 0 && cfg.LedgerRetention < MinRetention && !cfg.LedgerRetentionForce {
		return UsageError("serve: BALDE_LEDGER_RETENTION %s would erase the audit trail of the last day; use at least %s, or set BALDE_LEDGER_RETENTION_FORCE=on", cfg.LedgerRetention, MinRetention)
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
	if errors.Is(err, syscall.EADDRINUSE) {
		// The operator must choose another --addr: bad input, nothing done.
		addr := cfg.Addr
		var op *net.OpError
		if errors.As(err, &op) && op.Addr != nil {
			addr = op.Addr.String()
		}
		return UsageError("serve: %s is already in use; choose another --addr (BALDE_ADDR) or stop what listens there", addr)
	}
	if err != nil {
		return err
	}
	logDatabase(app.engine.store, creating, logger)
	if sims := app.sims; sims.dict != nil {
		category := app.engine.Dict().Catalog().Category() // learned from its GET /policies/
		if category == "" {
			category = "H (strictest, not learned)"
		}
		fmt.Fprintf(m.Stdout, "balde: DICT simulator on %s (%d sample keys, category %s; set BALDE_DICT_URL for a real DICT)\n",
			sims.dict.URL(), sims.entries, category)
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
	switch {
	case app.generatedPassword != "":
		fmt.Fprintf(m.Stdout, "balde: admin user %q, generated password (shown once, kept in %s; set BALDE_ADMIN_PASSWORD or BALDE_ADMIN_PASSWORD_FILE to choose one): %s\n",
			cfg.AdminUser, app.passwordFile, app.generatedPassword)
	case app.passwordFile != "":
		fmt.Fprintf(m.Stdout, "balde: admin user %q, password in %s\n", cfg.AdminUser, app.passwordFile)
	}
	err = app.wait(ctx)
	logger.Info("shutting down")
	return errors.Join(err, app.close())
}

// app is what serve runs: the simulators, the engine (with the DICT client
// and the SIFEN sender, and its background work running), and the web
// server over them.
type app struct {
	engine            *engine
	sims              *simulators
	server            *web.Server
	generatedPassword string
	passwordFile      string // where the password was read or kept

	stop    context.CancelFunc // ends the engine's Run
	stopped chan error         // Run's result
}

// openApp wires serve: simulators (when no endpoint is configured) →
// engine (store, group commit, limiter with the inbound, DICT and SIFEN
// policies, DICT client, SIFEN sender; the database checked writable) →
// the engine's background work (balde.Engine.Run: the DICT category
// learned, documents left "sending" settled, then polling, re-grading,
// reconciliation, pruning, the database watch) → web server, listening
// when it returns.
func openApp(ctx context.Context, cfg Config, sifenClient *sifen.Client, logger *slog.Logger) (_ *app, err error) {
	// Bad configuration is found before the database is touched.
	inbound, err := newInboundConfig(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DictCategory != "" {
		if err := dict.ValidateCategory(cfg.DictCategory); err != nil {
			return nil, UsageError("%s%v", settingNames["DictCategory"], err)
		}
	}
	if err := checkDictClient(cfg); err != nil {
		return nil, err
	}
	sims, dictURL, sifenURL, err := startSimulators(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	a := &app{sims: sims}
	defer func() {
		if err != nil {
			if a.engine != nil {
				a.engine.close(ctx)
			}
			a.sims.close()
		}
	}()
	if sifenClient == nil {
		if sifenClient, err = cfg.sifenClient(sifenURL); err != nil {
			return nil, err
		}
	}
	dc := cfg.dictConfig(dictURL, true)
	dc.Simulator = sims.dict != nil // automatic reconciliation stays off against it
	sc := cfg.sifenConfig(sifenClient, false)
	a.engine, err = openEngine(ctx, cfg, engineOptions{Inbound: inbound, Observer: web.NewMetrics().SetVersion(Version), Logger: logger,
		Dict: &dc, Sifen: &sc, Jobs: cfg.jobs()})
	if err != nil {
		return nil, err
	}
	if err := checkWritable(ctx, a.engine.store); err != nil {
		return nil, err
	}
	if err := a.run(ctx); err != nil {
		return nil, err
	}
	if err := a.openServer(cfg); err != nil {
		a.stopRun()
		return nil, err
	}
	return a, nil
}

// run starts the engine's background work, until ctx ends or close, and
// waits for its start work (before anything can send: the SIFEN interval
// shared, documents a crashed send left in "sending" settled).
func (a *app) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	a.stop, a.stopped = cancel, make(chan error, 1)
	go func() { a.stopped <- a.engine.Run(ctx) }()
	select {
	case <-a.engine.Started():
		return nil
	case err := <-a.stopped:
		cancel()
		return err
	}
}

// stopRun ends the engine's background work and waits for it.
func (a *app) stopRun() error {
	a.stop()
	if a.stopped == nil {
		return nil
	}
	return <-a.stopped
}

// jobs are the periods of serve's background work (balde.Settings.Jobs).
func (c Config) jobs() balde.Jobs { return c.Settings.Jobs() }

// reconcileEvery is Config.DictReconcileEvery as balde.Jobs has it:
// ReconcileAuto is 0 (automatic), 0 is balde.Off.
func reconcileEvery(every time.Duration) time.Duration {
	switch {
	case every == ReconcileAuto:
		return 0
	case every <= 0:
		return balde.Off
	}
	return every
}

// DefaultSeverityEvery is how often serve grades again the buckets that are
// not Healthy (Config.SeverityEvery; balde.DefaultSeverityEvery).
const DefaultSeverityEvery = balde.DefaultSeverityEvery

// reconcilePeriod resolves Config.DictReconcileEvery as balde.Engine.Run
// does (balde.ReconcilePeriod): ReconcileAuto is DefaultReconcileEvery
// against a real DICT and off (0) against the simulator, whose buckets only
// ever see this process's traffic; a value set explicitly is used as it
// is, simulator or not.
func reconcilePeriod(every time.Duration, simulated bool) time.Duration {
	return balde.ReconcilePeriod(reconcileEvery(every), simulated)
}

// newInbound builds the inbound limiter from cfg (reading
// BALDE_INBOUND_TOKENS_FILE), or nil when it is off.
func newInbound(cfg Config) (*web.Inbound, error) {
	ic, err := newInboundConfig(cfg)
	if ic == nil || err != nil {
		return nil, err
	}
	in, err := web.NewInbound(*ic)
	if err != nil {
		return nil, UsageError("inbound limiter: %v", err)
	}
	return in, nil
}

// newInboundConfig is the inbound limiter's configuration from cfg
// (reading BALDE_INBOUND_TOKENS_FILE), or nil when it is off.
func newInboundConfig(cfg Config) (*web.InboundConfig, error) {
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
	return &web.InboundConfig{
		IPLimit:  cfg.InboundIPLimit,
		Window:   cfg.InboundWindow,
		Block:    cfg.InboundBlock,
		Tokens:   cfg.InboundTokens,
		Paths:    cfg.InboundPaths,
		Exempt:   cfg.InboundExempt,
		FailMode: cfg.InboundFailMode,
	}, nil
}

// openServer opens the web server over the engine (balde.Engine.NewServer,
// with its DICT client and SIFEN sender) with serve's credential, the
// runtime metrics and one log line per request.
func (a *app) openServer(cfg Config) error {
	creds := web.Credentials{User: cfg.AdminUser, Password: cfg.AdminPassword, PasswordBcrypt: cfg.AdminPasswordBcrypt}
	if creds.Password == "" && creds.PasswordBcrypt == "" {
		// The admin is never open: without a configured password, one is
		// read from a file, or made up once, kept and printed once.
		var err error
		creds.Password, a.passwordFile, a.generatedPassword, err = adminPassword(cfg)
		if err != nil {
			return err
		}
	}
	users, err := cfg.AllUsers()
	if err != nil {
		return UsageError("%v", err)
	}
	s := a.engine.NewServer(cfg.DictParticipant)
	s.Addr = cfg.Addr
	s.Admin = creds
	s.Users = users
	s.TrustedProxies = cfg.TrustedProxies
	s.MetricsToken = cfg.MetricsToken
	s.RuntimeMetrics = true // a process of its own: Go and process collectors too
	s.LogRequests = true
	s.HealthCheck = storeHealth(a.engine.store)
	s.TimeZone = cfg.TimeZone
	if err := s.Open(); err != nil {
		return err
	}
	a.server = s
	return nil
}

// wait returns when ctx ends (nil) or when the engine's background work
// stopped on its own (its error).
func (a *app) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-a.stopped:
		a.stopped = nil // received: close does not wait for it again
		return err
	}
}

// close stops the background work, the server (waiting for requests in
// flight), the simulators, then the engine.
func (a *app) close() error {
	return errors.Join(a.stopRun(), a.server.Close(), a.sims.close(), a.engine.close(context.Background()))
}

// storeHealth is the readiness check of /readyz and /healthz: a write round
// trip succeeds (retried once on a fresh connection), the SQLite file is
// still the one opened (sqlstore.Store.CheckWrite), and the schema is at
// the latest migration, not dirty.
func storeHealth(store *sqlstore.Store) func(context.Context) error {
	return func(ctx context.Context) error { return balde.CheckStoreHealth(ctx, store) }
}

// adminPassword finds serve's admin password when none is configured in
// the environment: the first line of AdminPasswordFile, else
// DataDir/admin-password, else a new one written there (0600) and returned
// as generated, to be printed once. It returns the file it used.
func adminPassword(cfg Config) (password, file, generated string, err error) {
	if cfg.AdminPasswordFile != "" {
		b, err := os.ReadFile(cfg.AdminPasswordFile)
		if err != nil {
			return "", "", "", UsageError("BALDE_ADMIN_PASSWORD_FILE: %v", err)
		}
		password, _, _ = strings.Cut(string(b), "\n")
		if password = strings.TrimSpace(password); password == "" {
			return "", "", "", UsageError("BALDE_ADMIN_PASSWORD_FILE %s: the first line is empty", cfg.AdminPasswordFile)
		}
		return password, cfg.AdminPasswordFile, "", nil
	}
	dir, err := cfg.dataDir()
	if err != nil {
		return "", "", "", err
	}
	file = filepath.Join(dir, "admin-password")
	if b, err := os.ReadFile(file); err == nil {
		if password = strings.TrimSpace(string(b)); password != "" {
			return password, file, "", nil
		}
	}
	password = rand.Text()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", fmt.Errorf("serve: keep the admin password: %w", err)
	}
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		return "", "", "", fmt.Errorf("serve: keep the admin password: %w", err)
	}
	return password, file, password, nil
}

// dataDir resolves Config.DataDir: as given, else the SQLite database's
// directory, else the user's config directory's balde/.
func (c Config) dataDir() (string, error) {
	if c.DataDir != "" {
		return c.DataDir, nil
	}
	if path, ok := sqlitePath(c.DB); ok {
		return filepath.Dir(path), nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", UsageError("serve: no BALDE_DATA_DIR and no user config directory: %v", err)
	}
	return filepath.Join(dir, "balde"), nil
}

// checkListenAddr reports whether addr is a HOST:PORT a listener can take:
// a port number in 0..65535 (0: any free port).
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}
