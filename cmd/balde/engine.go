package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensql"
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
}

// SifenOfficial is the value of --sifen-url / BALDE_SIFEN_URL that selects
// SIFEN's official endpoints (sifen-test.set.gov.py and sifen.set.gov.py);
// an empty value starts the simulator (serve) or is refused (batch commands).
const SifenOfficial = "official"

// engineConfig is the balde.Config of cfg: every command migrates.
func (c Config) engineConfig(opts engineOptions) balde.Config {
	sc := sifen.PolicyConfig{Interval: c.SifenThrottle, PerMinute: c.SifenPerMinute}
	if c.SifenThrottleProd > 0 {
		sc.EnvInterval = map[sifen.Env]time.Duration{sifen.EnvProd: c.SifenThrottleProd}
	}
	return balde.Config{
		DB:           c.DB,
		Migrate:      true,
		Clock:        opts.Clock,
		GroupCommit:  c.GroupCommit,
		Ledger:       c.Ledger,
		Thresholds:   c.Thresholds,
		AlertWebhook: c.AlertWebhook,
		DictEnv:      c.DictEnv,
		DictCategory: c.DictCategory,
		PolicyFile:   c.PolicyFile,
		Sifen:        sc,
		Inbound:      opts.Inbound,
		Resolvers:    opts.Resolvers,
		Observer:     opts.Observer,
		Logger:       opts.Logger,
	}
}

// settingNames are the flags of balde.Config's settings, for messages.
var settingNames = map[string]string{"DictCategory": "--dict-category: ", "Sifen": "SIFEN policy: ", "Inbound": "inbound limiter: "}

// openEngine opens the engine (balde.Open, applying pending migrations).
// Bad settings are usage errors, found before the database is touched.
func openEngine(ctx context.Context, cfg Config, opts engineOptions) (*engine, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
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

// pruneResult counts what engine.prune removed.
type pruneResult = balde.PruneResult

// prune is balde.Engine.Prune: the retention applied to the ledger and the
// DICT lookups, idle buckets removed (unless skipBuckets), in batches of at
// most batch rows (0: the defaults). serve runs it periodically and "balde
// prune" once.
func (e *engine) prune(ctx context.Context, retention time.Duration, batch int, skipBuckets bool) (pruneResult, error) {
	return e.Prune(ctx, throttle.PruneOptions{Retention: retention, Batch: batch, SkipBuckets: skipBuckets})
}

// close closes the engine (balde.Engine.Close: refusals, group commit,
// webhook, store, in that order).
func (e *engine) close(ctx context.Context) error { return e.Close(ctx) }

// dictClient returns a DICT client for baseURL, with mutual TLS when cfg
// names a certificate, its catalog set to the participant's category as
// the DICT reports it (GET /policies/, learned at start and kept in the
// database; reused while fresh). Until learned, the categorised buckets use
// --dict-category, else the strictest (H). Against a simulator (a loopback
// URL) the "payment sent" of the demo also reaches the simulator.
// GET /policies/ goes to cfg.DictPoliciesURL when set (its own host).
//
// learn false leaves the category to the caller (dict-reconcile asks the
// DICT itself); the one recorded is still restored.
func (e *engine) dictClient(ctx context.Context, cfg Config, baseURL string, learn bool) (*dict.Client, error) {
	if err := dict.ValidateISPB(cfg.DictParticipant); err != nil {
		return nil, UsageError("--dict-participant: %v", err)
	}
	var httpClient *http.Client
	if cfg.DictCert != "" || cfg.DictKey != "" || cfg.DictCA != "" {
		c, err := dict.NewTLSClient(cfg.DictCert, cfg.DictKey, cfg.DictCA)
		if err != nil {
			return nil, UsageError("DICT TLS: %v", err)
		}
		httpClient = c
	}
	signer, verifier, err := cfg.dictSigning()
	if err != nil {
		return nil, err
	}
	cc := dict.ClientConfig{
		BaseURL: baseURL, PoliciesURL: cfg.DictPoliciesURL, Participant: cfg.DictParticipant,
		Limiter: e.limiter, Catalog: e.dict, Records: e.records,
		HTTPClient: httpClient, Signer: signer, Verifier: verifier, Logger: e.logger.WithGroup("dict"),
	}
	if u, err := url.Parse(baseURL); err == nil && isLoopbackHost(u.Hostname()) {
		cc.PaymentNoticeURL = strings.TrimSuffix(baseURL, "/") + "/sim/payments"
	}
	client, err := dict.NewClient(cc)
	if err != nil {
		return nil, UsageError("DICT client: %v", err)
	}
	if !learn {
		if _, err := client.RestoreCategory(ctx); err != nil {
			return nil, err
		}
		return client, nil
	}
	learned, err := client.LearnCategory(ctx, dict.CategoryFresh)
	switch {
	case err != nil && errors.Is(err, throttle.ErrStoreUnavailable):
		return nil, err
	case err != nil:
		e.logger.Warn("dict: category not learned from the DICT: the strictest category applies until it is",
			slog.String("category", e.dict.Category()), slog.Any("error", err))
	default:
		e.logger.Info("dict: category", slog.String("category", learned.Category), slog.String("source", learned.Source))
	}
	return client, nil
}

// isLoopbackHost reports whether host is a loopback address, where the
// simulators listen.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sifenClient returns a SIFEN client for baseURL: SifenOfficial for
// SIFEN's own endpoints, or a base URL in which "{env}" becomes test or
// prod (the simulator's). It touches no database, so commands build it
// before opening the engine: a bad URL or certificate changes nothing.
func (c Config) sifenClient(baseURL string) (*sifen.Client, error) {
	cc := sifen.ClientConfig{CertFile: c.SifenCert, KeyFile: c.SifenKey, CAFile: c.SifenCA}
	if baseURL != SifenOfficial {
		cc.BaseURL = baseURL
	}
	client, err := sifen.NewClient(cc)
	if err != nil {
		return nil, UsageError("--sifen-url: %v", err)
	}
	return client, nil
}

// sifenSender returns the SIFEN send path over client, with cfg's local
// block after 0301; allowUnsigned lets unsigned DEs into the test
// environment (never prod).
func (e *engine) sifenSender(cfg Config, client *sifen.Client, allowUnsigned bool) (*sifen.Sender, error) {
	sender, err := sifen.NewSender(sifensql.New(e.store), client, e.limiter, sifen.SenderConfig{
		Clock: e.store.Now, Logger: e.logger.WithGroup("sifen"),
		RemoteBlock: cfg.SifenBlockStep, RemoteBlockMax: cfg.SifenBlockMax,
		AllowUnsigned: allowUnsigned,
	})
	if err != nil {
		return nil, fmt.Errorf("SIFEN sender: %w", err)
	}
	return sender, nil
}
