package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// engine is the throttle every command shares: balde.Engine (store, group
// commit, limiter, DICT and SIFEN catalogs) and what the commands add over
// it. serve and the batch commands build it with openEngine from the same
// Config, so that a web process and a batch process on one database decide
// exactly alike. The fields are shorthands for the Engine's parts.
type engine struct {
	*balde.Engine
	store   *sqlstore.Store
	limiter *throttle.Limiter
	dict    *dict.Catalog
	records *dictsql.Records // DICT lookups and the learned category
	sifen   *sifen.Resolver
	logger  *slog.Logger
}

// engineOptions are what a command adds to the engine.
type engineOptions struct {
	// Resolvers come before the DICT and SIFEN catalogs in the chain.
	Resolvers throttle.Resolvers
	// Inbound builds the inbound limiter (serve).
	Inbound *web.InboundConfig
	// Observer receives the limiter's measurements (serve's metrics).
	Observer throttle.Observer
	Logger   *slog.Logger
	// Clock is the engine's time: the store's, and so the limiter's and the
	// SIFEN sender's. Nil is the system clock; tests of the batch commands
	// give a fake one.
	Clock throttle.Clock
	// Dict and Sifen build the engine's DICT client and SIFEN sender, and
	// Jobs the periods of its background work (serve).
	Dict  *balde.DictConfig
	Sifen *balde.SifenConfig
	Jobs  balde.Jobs
}

// SifenOfficial selects SIFEN's official endpoints (balde.SifenOfficial).
const SifenOfficial = balde.SifenOfficial

// engineConfig is the balde.Config of cfg: every command migrates and logs
// severity changes.
func (c Config) engineConfig(opts engineOptions) balde.Config {
	bc := c.Config()
	bc.Migrate, bc.Clock, bc.LogSeverity = true, opts.Clock, true
	bc.Dict, bc.Sifen, bc.Jobs = opts.Dict, opts.Sifen, opts.Jobs
	bc.Inbound, bc.Resolvers, bc.Observer, bc.Logger = opts.Inbound, opts.Resolvers, opts.Observer, opts.Logger
	return bc
}

// dictConfig is balde.Settings.DictConfig, learning the category or not.
func (c Config) dictConfig(baseURL string, learn bool) balde.DictConfig {
	dc := c.DictConfig(baseURL)
	dc.LearnCategory = learn
	return dc
}

// sifenConfig is balde.Settings.SifenConfig; allowUnsigned lets unsigned
// DEs into the test environment (never prod).
func (c Config) sifenConfig(client sifen.SOAPServices, allowUnsigned bool) balde.SifenConfig {
	sc := c.SifenConfig(client)
	sc.AllowUnsigned = allowUnsigned
	return sc
}

// settingNames are the flags of balde.Config's settings, for messages.
var settingNames = map[string]string{"DictCategory": "--dict-category: ", "SifenPolicy": "SIFEN policy: ",
	"Inbound": "inbound limiter: ", "Dict": "DICT client: ", "Sifen": "--sifen-url: "}

// openEngine opens the engine (balde.Open, applying pending migrations).
// Bad settings are usage errors, found before the database is touched.
func openEngine(ctx context.Context, cfg Config, opts engineOptions) (*engine, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Dict != nil {
		if err := checkDictClient(cfg); err != nil {
			return nil, err
		}
	}
	e, err := balde.Open(ctx, cfg.engineConfig(opts))
	var ce *balde.ConfigError
	if errors.As(err, &ce) {
		return nil, UsageError("%s%v", settingNames[ce.Setting], ce.Err)
	}
	if err != nil {
		return nil, err
	}
	return &engine{Engine: e, store: e.Store(), limiter: e.Limiter(), dict: e.DictCatalog(),
		records: e.DictRecords(), sifen: e.SifenResolver(), logger: opts.Logger}, nil
}

// checkDictClient is balde.Settings.CheckDictClient, a usage error.
func checkDictClient(cfg Config) error { return settingUsage(cfg.CheckDictClient()) }

// close closes the engine (balde.Engine.Close: refusals, group commit,
// webhook, store, in that order).
func (e *engine) close(ctx context.Context) error { return e.Close(ctx) }

// dictClient returns a DICT client for baseURL (balde.Engine.NewDictClient):
// mutual TLS when cfg names a certificate, its catalog set to the
// participant's category as the DICT reports it (learned at start and kept
// in the database; reused while fresh), or, with learn false, the one
// recorded restored (dict-reconcile asks the DICT itself). Until learned,
// the categorised buckets use --dict-category, else the strictest (H).
func (e *engine) dictClient(ctx context.Context, cfg Config, baseURL string, learn bool) (*dict.Client, error) {
	if err := checkDictClient(cfg); err != nil {
		return nil, err
	}
	client, err := e.NewDictClient(ctx, cfg.dictConfig(baseURL, learn))
	var ce *balde.ConfigError
	if errors.As(err, &ce) {
		return nil, UsageError("DICT client: %v", ce.Err)
	}
	return client, err
}

// sifenClient is balde.Settings.SifenClient, its error a usage error.
func (c Config) sifenClient(baseURL string) (*sifen.Client, error) {
	client, err := c.SifenClient(baseURL)
	if err != nil {
		return nil, UsageError("--sifen-url: %v", err)
	}
	return client, nil
}

// sifenSender returns the SIFEN send path over client
// (balde.Engine.NewSifenSender), with cfg's local block after 0301;
// allowUnsigned lets unsigned DEs into the test environment (never prod).
func (e *engine) sifenSender(cfg Config, client *sifen.Client, allowUnsigned bool) (*sifen.Sender, error) {
	return e.NewSifenSender(cfg.sifenConfig(client, allowUnsigned))
}
