package main

import (
	"context"
	"errors"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/settings"
)

// settingNames are the flags of balde.Config's settings, for messages.
var settingNames = map[string]string{"DictCategory": "--dict-category: ", "SifenPolicy": "SIFEN policy: ",
	"Inbound": "inbound limiter: ", "Dict": "DICT client: ", "Sifen": "--sifen-url: "}

// openEngine opens the engine as every command does, so that a web
// process and a batch process on one database decide exactly alike: cfg's
// settings with what the command adds in opts (Resolvers, Inbound,
// Observer, Logger, Clock, Dict, Sifen, Jobs; the rest of opts is
// ignored), pending migrations applied, severity changes logged. Bad
// settings are usage errors, found before the database is touched (the
// DICT client's checked first by the caller: checkDict).
func openEngine(ctx context.Context, cfg settings.Settings, opts balde.Config) (*balde.Engine, error) {
	bc := cfg.Config()
	bc.Migrate, bc.Clock, bc.LogSeverity = true, opts.Clock, true
	bc.Dict, bc.Sifen, bc.Jobs = opts.Dict, opts.Sifen, opts.Jobs
	bc.Inbound, bc.Resolvers, bc.Observer, bc.Logger = opts.Inbound, opts.Resolvers, opts.Observer, opts.Logger
	e, err := balde.Open(ctx, bc)
	var ce *balde.ConfigError
	if errors.As(err, &ce) {
		return nil, UsageError("%s%v", settingNames[ce.Setting], ce.Err)
	}
	return e, err
}

// sifenConfig is settings.Settings.SifenConfig with the client of baseURL
// (settings.Settings.SifenClient): no baseURL is noURL (the command's usage
// error), bad block settings, URL or certificate a usage error.
func sifenConfig(cfg settings.Settings, baseURL string, noURL error) (*balde.SifenConfig, error) {
	if baseURL == "" {
		return nil, noURL
	}
	if err := settingUsage(cfg.CheckSifenBlock()); err != nil {
		return nil, err
	}
	client, err := cfg.SifenClient(baseURL)
	if err != nil {
		return nil, UsageError("--sifen-url: %v", err)
	}
	sc := cfg.SifenConfig(client)
	return &sc, nil
}
