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

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/webhook"
)

// engine is the throttle every command shares: the store, group commit,
// the limiter and the DICT and SIFEN catalogs. serve and the batch commands
// build it with openEngine from the same Config, so that a web process and
// a batch process on one database decide exactly alike.
type engine struct {
	store   *sqlstore.Store
	group   *throttle.GroupCommit // nil when group commit is off
	limiter *throttle.Limiter
	dict    *dict.Catalog
	records *dictsql.Records // DICT lookups and the learned category
	sifen   *sifen.Resolver
	webhook *webhook.Notifier // nil without BALDE_ALERT_WEBHOOK
	logger  *slog.Logger
}

// engineOptions are what a command adds to the engine.
type engineOptions struct {
	// Resolvers come before the DICT and SIFEN catalogs in the chain.
	Resolvers throttle.Resolvers
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

// catalogs builds the DICT catalog and the SIFEN resolver from cfg without
// touching the database; bad settings are usage errors.
func (c Config) catalogs() (*dict.Catalog, *sifen.Resolver, error) {
	catalog := dict.NewCatalog(c.DictEnv)
	if c.DictCategory != "" {
		if err := catalog.SetCategory(c.DictCategory); err != nil {
			return nil, nil, UsageError("--dict-category: %v", err)
		}
	}
	if c.PolicyFile != "" {
		if err := catalog.LoadFile(c.PolicyFile); err != nil {
			return nil, nil, UsageError("%v", err)
		}
	}
	sc := sifen.PolicyConfig{Interval: c.SifenThrottle, PerMinute: c.SifenPerMinute}
	if c.SifenThrottleProd > 0 {
		sc.EnvInterval = map[sifen.Env]time.Duration{sifen.EnvProd: c.SifenThrottleProd}
	}
	resolver, err := sifen.NewResolver(sc)
	if err != nil {
		return nil, nil, UsageError("SIFEN policy: %v", err)
	}
	return catalog, resolver, nil
}

// openEngine opens the store (applying pending migrations) and builds the
// limiter over it.
func openEngine(ctx context.Context, cfg Config, opts engineOptions) (*engine, error) {
	catalog, resolver, err := cfg.catalogs()
	if err != nil {
		return nil, err
	}
	if _, _, err := sqlstore.ParseDSN(cfg.DB); err != nil {
		return nil, UsageError("%v", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	store, err := sqlstore.Open(ctx, cfg.DB, sqlstore.Options{Clock: opts.Clock, Migrate: true, Logger: logger.WithGroup("sqlstore")})
	if err != nil {
		return nil, err
	}
	e := &engine{store: store, dict: catalog, records: dictsql.NewRecords(store.DB(), store.ReadDB()), sifen: resolver, logger: logger}
	var s throttle.Store = store
	if cfg.GroupCommit {
		// SQLite has one writer per database. On PostgreSQL two writers
		// overlap one batch's round trips with another's commit; more make
		// batches smaller (measured, 1M keys, 16 callers: 1 writer 5.8-6.9k
		// decisions/s, 2: 7.0-7.8k, 4: 4.0-5.2k, 8: 3.0-3.5k).
		writers := 1
		if store.Engine() == sqlstore.Postgres {
			writers = 2
		}
		e.group = throttle.NewGroupCommit(store, throttle.GroupCommitOptions{Writers: writers})
		s = e.group
	}
	notifiers := throttle.Notifiers{throttle.SlogNotifier{Logger: logger.WithGroup("severity")}}
	if cfg.AlertWebhook != "" {
		e.webhook = webhook.New(cfg.AlertWebhook, webhook.Options{Logger: logger.WithGroup("webhook")})
		notifiers = append(notifiers, e.webhook)
	}
	resolvers := append(append(throttle.Resolvers{}, opts.Resolvers...), catalog, resolver)
	e.limiter, err = throttle.NewLimiter(s, resolvers, throttle.Config{
		Clock:      store.Now,
		Thresholds: cfg.Thresholds,
		Ledger:     cfg.Ledger,
		Notifier:   notifiers,
		Observer:   opts.Observer,
		Logger:     logger.WithGroup("throttle"),
	})
	if err != nil {
		e.close(ctx)
		return nil, UsageError("%v", err)
	}
	return e, nil
}

// throttleStore is what limiters of this process decide through: the group
// commit when it is on, the store otherwise.
func (e *engine) throttleStore() throttle.Store {
	if e.group != nil {
		return e.group
	}
	return e.store
}

// policyNames lists the DICT and SIFEN policies, for filters on the pages.
func (e *engine) policyNames() []string {
	var names []string
	for _, s := range e.dict.Specs() {
		names = append(names, s.Name)
	}
	return append(names, sifen.PolicyRecepcionLote, sifen.PolicyConsultaLote)
}

// pruneResult counts what engine.prune removed.
type pruneResult struct {
	throttle.PruneResult
	Before      time.Time // rows older than this were removed
	DictLookups int64
}

// prune applies the retention to the ledger and to the DICT lookups and
// removes idle buckets (unless skipBuckets), each in bounded batches of at
// most batch rows (0: the engine's defaults), so that it can run while
// decisions go on. serve runs it periodically and "balde prune" once.
func (e *engine) prune(ctx context.Context, retention time.Duration, batch int, skipBuckets bool) (pruneResult, error) {
	res := pruneResult{Before: e.limiter.Now().Add(-retention)}
	var err error
	res.PruneResult, err = e.limiter.Prune(ctx, throttle.PruneOptions{Retention: retention, Batch: batch, SkipBuckets: skipBuckets})
	if err != nil {
		return res, err
	}
	if batch <= 0 {
		batch = 1000
	}
	for {
		n, err := e.records.PruneLookups(ctx, res.Before, batch)
		res.DictLookups += n
		if err != nil || n < int64(batch) {
			return res, err
		}
	}
}

// close writes the refusals answered from memory, stops group commit and
// the webhook, and closes the store.
func (e *engine) close(ctx context.Context) error {
	var errs []error
	if e.limiter != nil {
		errs = append(errs, e.limiter.FlushRefusals(context.WithoutCancel(ctx)))
	}
	if e.group != nil {
		errs = append(errs, e.group.Close())
	}
	if e.webhook != nil {
		errs = append(errs, e.webhook.Close())
	}
	errs = append(errs, e.store.Close())
	return errors.Join(errs...)
}

// dictClient returns a DICT client for baseURL, with mutual TLS when cfg
// names a certificate, its catalog set to the participant's category as
// the DICT reports it (GET /policies/, learned at start and kept in the
// database; reused while fresh). Until learned, the categorised buckets use
// --dict-category, else the strictest (H). Against a simulator (a loopback
// URL) the "payment sent" of the demo also reaches the simulator.
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
	cc := dict.ClientConfig{
		BaseURL: baseURL, Participant: cfg.DictParticipant,
		Limiter: e.limiter, Catalog: e.dict, Records: e.records,
		HTTPClient: httpClient, Logger: e.logger.WithGroup("dict"),
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

// sifenSender returns the SIFEN send path over client.
func (e *engine) sifenSender(client *sifen.Client) (*sifen.Sender, error) {
	sender, err := sifen.NewSender(e.store, client, e.limiter, sifen.SenderConfig{
		Clock: e.store.Now, Logger: e.logger.WithGroup("sifen"),
	})
	if err != nil {
		return nil, fmt.Errorf("SIFEN sender: %w", err)
	}
	return sender, nil
}
