package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// engine is balde.Engine as every command opens it. serve and the batch
// commands build it with openEngine from the same Config, so that a web
// process and a batch process on one database decide exactly alike.
type engine struct {
	*balde.Engine
	limiter *throttle.Limiter // Engine.Limiter()
}

// engineOptions are what a command adds to the engine's Config.
type engineOptions struct {
	// Resolvers come before the DICT and SIFEN catalogs in the chain.
	Resolvers throttle.Resolvers
	// Inbound builds the inbound limiter (serve, the gateways).
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

// settingNames are the flags of balde.Config's settings, for messages.
var settingNames = map[string]string{"DictCategory": "--dict-category: ", "SifenPolicy": "SIFEN policy: ",
	"Inbound": "inbound limiter: ", "Dict": "DICT client: ", "Sifen": "--sifen-url: "}

// openEngine opens the engine (balde.Open, applying pending migrations,
// logging severity changes). Bad settings are usage errors, found before
// the database is touched.
func openEngine(ctx context.Context, cfg Config, opts engineOptions) (*engine, error) {
	if opts.Dict != nil {
		if err := settingUsage(cfg.CheckDictClient()); err != nil {
			return nil, err
		}
	}
	bc := cfg.Config()
	bc.Migrate, bc.Clock, bc.LogSeverity = true, opts.Clock, true
	bc.Dict, bc.Sifen, bc.Jobs = opts.Dict, opts.Sifen, opts.Jobs
	bc.Inbound, bc.Resolvers, bc.Observer, bc.Logger = opts.Inbound, opts.Resolvers, opts.Observer, opts.Logger
	e, err := balde.Open(ctx, bc)
	var ce *balde.ConfigError
	if errors.As(err, &ce) {
		return nil, UsageError("%s%v", settingNames[ce.Setting], ce.Err)
	}
	if err != nil {
		return nil, err
	}
	return &engine{Engine: e, limiter: e.Limiter()}, nil
}

// sifenClient is settings.Settings.SifenClient, its error a usage error.
func sifenClient(cfg Config, baseURL string) (*sifen.Client, error) {
	client, err := cfg.SifenClient(baseURL)
	if err != nil {
		return nil, UsageError("--sifen-url: %v", err)
	}
	return client, nil
}
