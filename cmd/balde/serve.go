package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/devsims"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/web"
)

// runServe is "balde serve": the web app (openApp) with the engine's
// background work (balde.Engine.Serve) until the context ends (Ctrl-C,
// SIGTERM), then a graceful shutdown.
func runServe(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("serve", "serve [--addr HOST:PORT] [--db DSN] [--dict-url URL] [--sifen-url URL] [flags]",
		"BALDE_ADMIN_PASSWORD=... balde serve --addr 127.0.0.1:8080 --db sqlite://balde.db\n"+
			"  BALDE_DICT_CERT=/etc/balde/dict-client.pem BALDE_DICT_KEY=/etc/balde/dict-client.key BALDE_DICT_CA=/etc/balde/rsfn-ca.pem BALDE_DICT_VERIFY_CERT=/etc/balde/dict-answers.pem "+
			"BALDE_ADMIN_PASSWORD=... balde serve --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url https://dict-ratelimit.pi.rsfn.net.br:16422 --dict-participant \"$ISPB\" --db postgres://balde@127.0.0.1:5432/balde", storeFlags, webFlags, dictFlags, sifenFlags, policyFlags, backgroundFlags)
	create := fs.Bool("create", false, "create the SQLite database if its file does not exist (without it, only the default path is created)")
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("serve: unexpected argument %q", fs.Arg(0))
	}
	for _, err := range []error{cfg.CheckSifenBlock(), cfg.CheckDictURLs(), cfg.CheckDictClient(), cfg.CheckServe()} {
		if err := settingUsage(err); err != nil {
			return err
		}
	}
	for _, a := range []struct{ flag, addr string }{{"--addr", cfg.Addr}, {"--dict-sim-addr", cfg.DictSimAddr}, {"--sifen-sim-addr", cfg.SifenSimAddr}} {
		if err := settings.CheckListenAddr(a.addr); a.addr != "" && err != nil {
			return UsageError("serve: %s %q: %v", a.flag, a.addr, err)
		}
	}
	// A configured SIFEN is checked before the database is touched; without
	// one the simulator's client is built once it listens.
	var sc *balde.SifenConfig
	if cfg.SifenURL != "" {
		if sc, err = sifenConfig(*cfg, cfg.SifenURL, nil); err != nil {
			return err
		}
	}

	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	creating, err := settings.CheckCreate(cfg.DB, *create)
	if errors.Is(err, settings.ErrNoDatabase) {
		path, _ := settings.SQLiteFile(cfg.DB)
		return UsageError("serve: no database at %s; pass --create to create a new, empty one (was it deleted or moved?)", path)
	} else if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	a, err := openApp(ctx, *cfg, sc, logger)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.close()) }()
	err = a.engine.Serve(ctx, cfg.Addr, a.handler, func(addr string) {
		msg, level := "database opened", slog.LevelInfo
		if creating {
			msg, level = "created a new, empty database", slog.LevelWarn
		}
		logger.Log(ctx, level, msg, slog.String("identity", a.engine.Store().Identity().String()))
		report.WriteServeBanners(m.Stdout, *cfg, a.sims, a.engine.DictCatalog().Category(), "http://"+addr, a.login)
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		// The operator must choose another --addr: bad input, nothing done.
		addr := cfg.Addr
		var op *net.OpError
		if errors.As(err, &op) && op.Addr != nil {
			addr = op.Addr.String()
		}
		return UsageError("serve: %s is already in use; choose another --addr (BALDE_ADDR) or stop what listens there", addr)
	}
	return err
}

// app is what serve runs: the simulators, the engine (with the DICT client
// and the SIFEN sender) and the web server's handler over them.
type app struct {
	engine  *balde.Engine
	sims    *devsims.Simulators
	server  *web.Server
	handler http.Handler
	login   settings.AdminLogin
}

// openApp wires serve: simulators (when no endpoint is configured), the
// engine (the database checked writable), then the web server
// (settings.Settings.Server). sc nil is the SIFEN simulator's.
func openApp(ctx context.Context, cfg settings.Settings, sc *balde.SifenConfig, logger *slog.Logger) (_ *app, err error) {
	// Bad configuration is found before the database is touched.
	inbound, err := cfg.InboundConfig()
	if err != nil {
		return nil, settingUsage(err)
	}
	if cfg.DictCategory != "" {
		if err := dict.ValidateCategory(cfg.DictCategory); err != nil {
			return nil, UsageError("%s%v", settingNames["DictCategory"], err)
		}
	}
	sims, err := devsims.Start(ctx, devsims.Config{DictURL: cfg.DictURL, SifenURL: cfg.SifenURL, DictCategory: cfg.DictCategory,
		DictAddr: cfg.DictSimAddr, SifenAddr: cfg.SifenSimAddr, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	a := &app{sims: sims}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	dc := cfg.DictConfig(sims.DictURL)
	dc.Simulator = sims.Dict != nil // automatic reconciliation stays off against it
	if sc == nil {
		if sc, err = sifenConfig(cfg, sims.SifenURL, nil); err != nil {
			return nil, err
		}
	}
	a.engine, err = openEngine(ctx, cfg, balde.Config{Inbound: inbound, Observer: web.NewMetrics().SetVersion(Version), Logger: logger,
		Dict: &dc, Sifen: sc, Jobs: cfg.Jobs()})
	if err != nil {
		return nil, err
	}
	// serve refuses a database it cannot write (a read-only or immutable
	// file, a read-only PostgreSQL session).
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.engine.Store().CheckWrite(wctx); err != nil {
		return nil, fmt.Errorf("serve: the database cannot be written, refusing to start: %w", err)
	}
	if a.server, a.login, err = cfg.Server(a.engine); err != nil {
		return nil, settingUsage(err)
	}
	if a.handler, err = a.server.Handler(); err != nil {
		return nil, settingUsage(err)
	}
	return a, nil
}

// close stops the server's background work, the simulators, then the
// engine.
func (a *app) close() error {
	var errs []error
	if a.server != nil {
		errs = append(errs, a.server.Close())
	}
	if a.engine != nil {
		errs = append(errs, a.engine.Close(context.Background()))
	}
	return errors.Join(append(errs, a.sims.Close())...)
}
