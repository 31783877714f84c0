// Package balde is the engine's face: Open builds the throttle from a
// Config (the SQL store on its own database or the application's pool,
// group commit, the limiter with the DICT and SIFEN policies, the inbound
// limiter, the DICT client, the SIFEN sender), Run does its background
// work and Close takes it down in order. The handlers an application
// mounts come from the Engine: the admin pages (NewServer), the gateways
// (DictGateway, SifenGateway), the probes and /metrics (OpsHandler); Serve
// runs one on an address with the jobs.
//
// The driver registers where the application chooses it, as database/sql's
// do: a blank import of throttle/sqlstore/sqlitedriver or .../pgxdriver
// links that engine alone (docs/decisions/0129). The parts stay usable one
// by one (throttle, throttle/sqlstore, dict, sifen, web).
package balde

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/internal/audit/auditsql"
	"github.com/balde-throttle/balde/internal/dictsetup"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/shadow"
	"github.com/balde-throttle/balde/internal/webhook"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// Config is what Open builds the engine from. The zero value is not
// usable: set DB or SQLDB.
type Config struct {
	// DB is the DSN of a database balde opens and closes itself
	// (sqlstore.ParseDSN: "sqlite://balde.db", "postgres://…"), through the
	// driver of its engine the application imported (sqlitedriver,
	// pgxdriver; a *ConfigError naming the package when it did not).
	DB string
	// SQLDB is the application's own pool, used instead of DB
	// (sqlstore.OpenDB: on SQLite open it with sqlstore.SQLiteDSN; on
	// PostgreSQL it must be pgx's); Close leaves it open. Dialect names its
	// engine, sqlstore.SQLite or sqlstore.Postgres (with SQLDB only).
	SQLDB   *sql.DB
	Dialect sqlstore.Engine
	// Migrate applies balde's pending migrations at Open (tables balde_*,
	// versions in balde_schema_migrations, beside the application's own).
	Migrate bool
	// Clock is the engine's time (nil: the system clock).
	Clock throttle.Clock
	// DisableGroupCommit decides each decision in a transaction of its
	// own. By default the concurrent decisions of the process share
	// transactions (group commit: one writer on SQLite, two on PostgreSQL).
	DisableGroupCommit bool
	// Ledger is how routine takes are written (zero: one row each),
	// Thresholds grade severity (zero: throttle's), AlertWebhook receives
	// severity changes as JSON.
	Ledger       throttle.LedgerGranularity
	Thresholds   throttle.Thresholds
	AlertWebhook string

	// DictEnv is the env of the DICT catalog's keys ("": dict.DefaultEnv),
	// DictCategory the participant's category until learned (A–H; "": the
	// strictest), PolicyFile a policy file over the catalog
	// (dict.Catalog.LoadFile).
	DictEnv, DictCategory, PolicyFile string
	// SifenPolicy configures the SIFEN lot policies (zero: SIFEN's).
	SifenPolicy sifen.PolicyConfig

	// Dict and Sifen, when set, build the DICT client (Engine.Dict, Run's
	// reconciliation, DictGateway) and the SIFEN sender (Engine.Sifen,
	// Run's lot polling and resolution, SifenGateway).
	Dict  *DictConfig
	Sifen *SifenConfig
	// Jobs are the periods of Run's background work (zero: the defaults).
	Jobs Jobs

	// Inbound, when set, builds the inbound limiter (Engine.Inbound), a
	// limiter of its own that writes no ledger rows for routine requests.
	Inbound *web.InboundConfig

	// Resolvers (the application's own policies) come before the DICT and
	// SIFEN catalogs in the limiter's chain.
	Resolvers throttle.Resolvers
	// Observer receives the limiters' measurements: a web.Metrics is
	// served at /metrics by NewServer and OpsHandler, or registered in the
	// application's Prometheus registry (its bucket gauges count the
	// engine's buckets at each scrape).
	Observer throttle.Observer
	// Logger receives everything every part logs (Engine.Logger). Nil
	// discards; slog.Default() is never written to.
	Logger *slog.Logger
	// LogSeverity logs every severity change to Logger at Warn/Info
	// (throttle.SlogNotifier). Off by default: an application's own
	// policies may empty by design; balde serve turns it on.
	LogSeverity bool
}

// ConfigError is a setting of Config that Open (or a handler of the
// Engine) refused before touching any database.
type ConfigError struct {
	// Setting is the field of Config: "DB", "Dialect", "DictCategory",
	// "PolicyFile", "SifenPolicy", "Thresholds", "Dict", "Sifen", "Inbound"
	// or "Limiter".
	Setting string
	Err     error
}

func (e *ConfigError) Error() string { return fmt.Sprintf("balde: %s: %v", e.Setting, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

// Engine is the assembled throttle; its parts are safe for concurrent use.
type Engine struct {
	store    *sqlstore.Store
	group    *throttle.GroupCommit // nil when group commit is off
	limiter  *throttle.Limiter
	reader   *inspect.Reader
	inbound  *web.Inbound // nil without Config.Inbound
	catalog  *dict.Catalog
	records  *dictsql.Records
	audit    *auditsql.Store
	webhook  *webhook.Notifier // nil without Config.AlertWebhook
	observer throttle.Observer
	logger   *slog.Logger
	shadows  shadow.Set

	inboundGroup *throttle.GroupCommit // the inbound limiter's (inboundStore)

	dict        *dict.Client     // nil without Config.Dict
	dictConfig  dictsetup.Config // Config.Dict (Run, DictGateway)
	sender      *sifen.Sender    // nil without Config.Sifen
	sifenClient *sifen.Client    // Config.Sifen's client (nil with its Transport)
	jobs        Jobs
	ops         []*web.Server // OpsHandler's, closed by Close
	running     atomic.Bool   // Run was called
	started     chan struct{} // closed when Run's start work is done
}

// Open builds the engine (see the package doc). A bad setting is a
// *ConfigError returned before any database is touched; the DICT client's
// category is restored from the database. Nothing is sent, and no
// background work starts, before Run.
func Open(ctx context.Context, cfg Config) (_ *Engine, err error) {
	catalog := dict.NewCatalog(cfg.DictEnv)
	if cfg.DictCategory != "" {
		if err := catalog.SetCategory(cfg.DictCategory); err != nil {
			return nil, &ConfigError{"DictCategory", err}
		}
	}
	if cfg.PolicyFile != "" {
		if err := catalog.LoadFile(cfg.PolicyFile); err != nil {
			return nil, &ConfigError{"PolicyFile", err}
		}
	}
	resolver, err := sifen.NewResolver(cfg.SifenPolicy)
	if err != nil {
		return nil, &ConfigError{"SifenPolicy", err}
	}
	if cfg.Dict != nil {
		if err := dictsetup.Config(*cfg.Dict).Check(); err != nil {
			return nil, &ConfigError{"Dict", err}
		}
	}
	var sifenClient *sifen.Client // a bad URL or certificate is found before any database is touched
	if cfg.Sifen != nil && cfg.Sifen.Transport == nil {
		sc := cfg.Sifen
		if sifenClient, err = sifen.NewClient(sifen.ClientConfig{BaseURL: sc.BaseURL, CertFile: sc.CertFile, KeyFile: sc.KeyFile, CAFile: sc.CAFile}); err != nil {
			return nil, &ConfigError{"Sifen", err}
		}
	}
	if err := cfg.Thresholds.Validate(); err != nil { // the zero value is valid
		return nil, &ConfigError{"Thresholds", err}
	}
	var inbound *web.Inbound
	if cfg.Inbound != nil {
		if inbound, err = web.NewInbound(*cfg.Inbound); err != nil {
			return nil, &ConfigError{"Inbound", err}
		}
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	engine := cfg.Dialect
	switch {
	case cfg.SQLDB != nil:
		if engine != sqlstore.SQLite && engine != sqlstore.Postgres {
			return nil, &ConfigError{"Dialect", fmt.Errorf("%q: with SQLDB, say which database it is (sqlstore.SQLite or sqlstore.Postgres)", engine)}
		}
	case cfg.DB != "":
		if engine, _, err = sqlstore.ParseDSN(cfg.DB); err != nil {
			return nil, &ConfigError{"DB", err}
		}
	default:
		return nil, &ConfigError{"DB", errors.New("set DB (a DSN) or SQLDB (the application's pool)")}
	}
	// The engine's driver registers where the application imports it
	// (docs/decisions/0129).
	driver, err := sqlstore.DriverOf(engine)
	if err != nil {
		return nil, &ConfigError{"DB", err}
	}
	opts := sqlstore.Options{Driver: driver, Clock: cfg.Clock, Migrate: cfg.Migrate, Logger: logger.WithGroup("sqlstore")}
	var store *sqlstore.Store
	if cfg.SQLDB != nil {
		store, err = sqlstore.OpenDB(ctx, cfg.SQLDB, opts)
	} else {
		store, err = sqlstore.Open(ctx, cfg.DB, opts)
	}
	if err != nil {
		return nil, err
	}
	// The DICT lookups and the audit trail live in the store's database,
	// each statement retried like the store's own after a transient failure.
	e := &Engine{store: store, catalog: catalog, records: dictsql.NewRecords(store.DB(), store.ReadDB()),
		audit: auditsql.New(store), inbound: inbound, observer: cfg.Observer,
		logger: logger, jobs: cfg.Jobs, started: make(chan struct{})}
	e.records.Retry = store.Retry
	defer func() {
		if err != nil {
			e.Close(ctx)
		}
	}()
	if !cfg.DisableGroupCommit {
		// One writer per SQLite database; on PostgreSQL two overlap one
		// batch's round trips with another's commit (docs/decisions/0035).
		writers := 1
		if engine == sqlstore.Postgres {
			writers = 2
		}
		e.group = throttle.NewGroupCommit(store, throttle.GroupCommitOptions{Writers: writers})
	}
	if err := e.shadows.Load(ctx, store); err != nil {
		// Every policy enforces until Run reloads them.
		logger.Warn("policies in shadow mode not read: every policy enforces", slog.Any("error", err))
	}
	var notifiers throttle.Notifiers
	if cfg.LogSeverity {
		notifiers = append(notifiers, throttle.SlogNotifier{Logger: logger.WithGroup("severity")})
	}
	if cfg.AlertWebhook != "" {
		e.webhook = webhook.New(cfg.AlertWebhook, webhook.Options{Logger: logger.WithGroup("webhook")})
		notifiers = append(notifiers, e.webhook)
	}
	resolvers := append(throttle.Resolvers{}, cfg.Resolvers...)
	if inbound != nil {
		resolvers = append(resolvers, inbound.Policies())
	}
	resolvers = append(resolvers, catalog, resolver)
	base := throttle.Config{Clock: store.Now, Thresholds: cfg.Thresholds, Observer: cfg.Observer, Shadow: e.shadows.Has}
	tc := base
	tc.Ledger, tc.Notifier, tc.Logger = cfg.Ledger, notifiers, logger.WithGroup("throttle")
	// The DICT category (learned at start, then by reconciliation) and a
	// policy file change capacities: stored levels are graded again
	// (Limiter.Reevaluate) when these change.
	tc.Definitions = func() string { return fmt.Sprint(catalog.Category(), catalog.Specs()) }
	if e.limiter, err = throttle.NewLimiter(e.throttleStore(), resolvers, tc); err != nil {
		return nil, &ConfigError{"Limiter", err}
	}
	e.reader = inspect.New(e.limiter, e.store)
	if inbound != nil {
		// A limiter of its own on the same store (see Inbound.UseStore),
		// whose commits need not be durable (inboundStore).
		base.Logger = logger.WithGroup("inbound")
		if err = inbound.UseStore(e.inboundStore(!cfg.DisableGroupCommit), base); err != nil {
			return nil, &ConfigError{"Inbound", err}
		}
	}
	if m := e.metrics(); m != nil {
		m.CountFrom(e.reader, logger.WithGroup("metrics"))
	}
	if cfg.Dict != nil {
		e.dictConfig = dictsetup.Config(*cfg.Dict)
		cc := dict.ClientConfig{Limiter: e.limiter, Catalog: catalog, Records: e.records, Logger: logger.WithGroup("dict")}
		if e.dict, err = e.dictConfig.NewClient(cc); err != nil {
			return nil, &ConfigError{"Dict", err}
		}
		// The category is learned by Run (a request to the DICT, and a
		// write): Open only restores the one recorded.
		if _, err = e.dict.RestoreCategory(ctx); err != nil {
			return nil, err
		}
		unverified := e.dictConfig.Unverified()
		if m := e.metrics(); m != nil {
			m.SetDictUnverified(unverified)
		}
		if unverified { // docs/decisions/0181
			logger.Error("dict: the DICT's answers are NOT verified: their XMLDSig signature is not checked (set BALDE_DICT_VERIFY_CERT, dict.XMLVerifier)",
				slog.String("dict", cfg.Dict.BaseURL), slog.String("metric", "balde_dict_answers_unverified 1"))
		}
	}
	if sc := cfg.Sifen; sc != nil {
		transport := cmp.Or[sifen.SOAPServices](sc.Transport, sifenClient)
		e.sifenClient, _ = transport.(*sifen.Client)
		e.sender, err = sifen.NewSender(sifensql.New(e.store), transport, e.limiter, sifen.SenderConfig{
			Clock: e.store.Now, Logger: e.logger.WithGroup("sifen"), Resolver: resolver,
			RemoteBlock: sc.RemoteBlock, RemoteBlockMax: sc.RemoteBlockMax, AllowUnsigned: sc.AllowUnsigned,
		})
		if err != nil {
			return nil, &ConfigError{"Sifen", err}
		}
	}
	return e, nil
}

// Store is the SQL store (for its own tables' neighbours: dictsql.Records,
// the SIFEN documents).
func (e *Engine) Store() *sqlstore.Store { return e.store }

// Logger is Config.Logger (one that discards when it was nil), for a part
// an application builds beside the engine's (its own dict.Transport).
func (e *Engine) Logger() *slog.Logger { return e.logger }

// throttleStore is what limiters of this process decide through: group
// commit when it is on, the store otherwise.
func (e *Engine) throttleStore() throttle.Store {
	if e.group != nil {
		return e.group
	}
	return e.store
}

// inboundStore is what the inbound limiter decides through: on PostgreSQL
// the store's NonDurable view (docs/decisions/0111), with group commit of
// its own when on, so that no batch mixes its commits with the durable
// ones; on SQLite the one writer of the file.
func (e *Engine) inboundStore(group bool) throttle.Store {
	if e.store.Engine() != sqlstore.Postgres {
		return e.throttleStore()
	}
	if !group {
		return e.store.NonDurable()
	}
	// One writer: a second did not decide faster in BenchmarkInbound and
	// raced the first on the same keys and pages (docs/decisions/0116).
	e.inboundGroup = throttle.NewGroupCommit(e.store.NonDurable(), throttle.GroupCommitOptions{Writers: 1})
	return e.inboundGroup
}

// metrics is the engine's observer when it is web's Metrics.
func (e *Engine) metrics() *web.Metrics {
	m, _ := e.observer.(*web.Metrics)
	return m
}

// Limiter is the limiter of every outbound decision (DICT, SIFEN, the
// application's Resolvers) and of the admin pages.
func (e *Engine) Limiter() *throttle.Limiter { return e.limiter }

// Reader reads the buckets and the ledger as Limiter sees them (listings,
// counts, the ledger and its chart window).
func (e *Engine) Reader() *inspect.Reader { return e.reader }

// Inbound is the inbound limiter, ready to use (its Limiter set), or nil
// without Config.Inbound. Inbound().Middleware limits any router.
func (e *Engine) Inbound() *web.Inbound { return e.inbound }

// Dict is the DICT client built from Config.Dict, or nil without it.
func (e *Engine) Dict() *dict.Client { return e.dict }

// Sifen is the SIFEN sender built from Config.Sifen, or nil without it.
func (e *Engine) Sifen() *sifen.Sender { return e.sender }

// DictCatalog is the DICT policy catalog.
func (e *Engine) DictCatalog() *dict.Catalog { return e.catalog }

// DictRecords keeps DICT lookups (for payment credits) and the learned
// participant category.
func (e *Engine) DictRecords() *dictsql.Records { return e.records }

// Audit is the operators' audit trail (table balde_audit): the admin
// pages record their resets, sends and lookups in it, an application its
// own operator actions.
func (e *Engine) Audit() *auditsql.Store { return e.audit }

// CheckHealth reports whether the database answers and its schema is at
// balde's latest migration, not dirty (the web server's /healthz).
func (e *Engine) CheckHealth(ctx context.Context) error {
	// A write round trip, not a ping: a database that answers reads but
	// refuses writes is not ready; and a SQLite file deleted or replaced
	// under the process is not either (decision 0022).
	if err := e.store.CheckWrite(ctx); err != nil {
		return err
	}
	latest, err := migrations.Latest(e.store.Engine())
	if err != nil {
		return err
	}
	version, dirty, err := e.store.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if dirty || version != latest {
		return fmt.Errorf("balde: schema at version %d (dirty %t), want %d", version, dirty, latest)
	}
	return nil
}

// NewServer returns the admin pages' web.Server over the engine's parts
// (limiters, reader, audit trail, health check, logger, the DICT client and
// the SIFEN sender, the Observer as its metrics when it is a *web.Metrics)
// with participant's DICT category among its panels. Set the admin
// credential (or Authenticate), then mount its Handler in the
// application's router, or Serve it.
func (e *Engine) NewServer(participant string) *web.Server {
	s := web.NewServer()
	s.Limiter, s.Reader, s.Inbound, s.Metrics = e.limiter, e.reader, e.inbound, e.metrics()
	s.HealthCheck, s.Audit, s.Shadows = e.CheckHealth, e.audit, e
	s.Logger, s.Policies, s.Scope = e.logger.WithGroup("web"), e.PolicyNames(), web.Scopes(e.catalog)
	s.Panels = []web.PanelFunc{
		web.DictCategoryPanel(e.catalog, participant),
		web.AntiScanPanel(e.records.Monitors, e.store.Now),
	}
	if e.dict != nil {
		s.Dict = e.dict
	}
	if e.sender != nil {
		s.Sifen = e.sender
		s.Panels = append(s.Panels, web.SifenDocumentsPanel(e.sender))
	}
	return s
}

// Close writes the refusals answered from memory, stops group commit and
// the webhook, and closes the store (not Config.SQLDB), in that order.
func (e *Engine) Close(ctx context.Context) error {
	var errs []error
	ctx = context.WithoutCancel(ctx)
	for _, s := range e.ops {
		errs = append(errs, s.Close())
	}
	if e.limiter != nil {
		errs = append(errs, e.limiter.FlushRefusals(ctx))
	}
	if e.inbound != nil && e.inbound.Limiter != nil {
		errs = append(errs, e.inbound.Limiter.FlushRefusals(ctx))
	}
	if e.group != nil {
		errs = append(errs, e.group.Close())
	}
	if e.inboundGroup != nil {
		errs = append(errs, e.inboundGroup.Close())
	}
	if e.webhook != nil {
		errs = append(errs, e.webhook.Close())
	}
	errs = append(errs, e.store.Close())
	return errors.Join(errs...)
}
