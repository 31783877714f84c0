// Command adopter is a throwaway application that imports balde as a module
// would: its own database (with its own schema_migrations at version 57 and
// a documents table), its own router, login, logger and Prometheus
// registry, balde mounted in them and running its background jobs.
// module_test.go builds it in a temporary module whose go.mod replaces
// balde with this checkout, and runs the steps it names, in order, on
// SQLite or PostgreSQL. Each step prints "ok NAME" or exits 1 with the
// failure.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"    // registers PostgreSQL (and database/sql's "pgx")
	_ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver" // registers SQLite (and database/sql's "sqlite")
	"github.com/balde-throttle/balde/web"
)

// app is the adopting application.
type app struct {
	engine sqlstore.Engine
	db     *sql.DB
	eng    *balde.Engine
	server *web.Server
	mux    *http.ServeMux // the application's router
	root   http.Handler   // mux behind balde's inbound middleware

	clock      *throttle.ManualClock // the engine's and the SIFEN simulator's time
	sifenURL   string
	dictURL    string
	httpClient *http.Client // the application's own, counting what it sends
	sent       atomic.Int64
	stopSims   func()
	metrics    *web.Metrics
	logger     *slog.Logger  // the application's logger, writing to logs
	logs       *lockedBuffer // the application's log
	defaultLog *lockedBuffer // what reaches slog.Default()
	stopRun    context.CancelFunc
	runDone    chan error
}

// appSession is the application's own login: a session cookie naming the
// user. balde's admin pages use it through Server.Authenticate.
func appSession(r *http.Request) (string, bool) {
	c, err := r.Cookie("app_session")
	if err != nil || c.Value != "ops-session" {
		return "", false
	}
	return "ops", true
}

// steps are what the test can ask for, by name.
var steps = map[string]func(context.Context, *app) error{
	// The application's own history and table, before balde arrives.
	"app-schema": func(ctx context.Context, a *app) error {
		return exec(ctx, a.db,
			`CREATE TABLE schema_migrations (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`,
			`INSERT INTO schema_migrations (version, dirty) VALUES (57, false)`,
			`CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT NOT NULL)`,
			`INSERT INTO documents (id, title) VALUES (1, 'invoice 2026-001')`)
	},
	// The SIFEN simulator on the application's clock and the DICT
	// simulator (category C, one key), each on 127.0.0.1:0.
	"sims": func(ctx context.Context, a *app) error {
		quiet := slog.New(slog.DiscardHandler)
		ss, err := sifensim.NewServer(sifensim.Config{Clock: a.clock.Now, Processing: time.Minute, Logger: quiet})
		if err != nil {
			return err
		}
		if err := ss.Open("127.0.0.1:0"); err != nil {
			return err
		}
		a.sifenURL = ss.URL() + "/{env}"
		ds, err := dictsim.NewServer(ctx, dictsim.Config{Category: "C", Entries: []dictsim.Entry{{
			Key: "maria.souza@example.com", KeyType: "EMAIL",
			Account: dictsim.Account{Participant: "12345678", Branch: "0001", AccountNumber: "0001234567", AccountType: "CACC"},
			Owner:   dictsim.Owner{Type: "NATURAL_PERSON", TaxIDNumber: "52998224725", Name: "Maria Souza"},
		}}, Logger: quiet})
		if err != nil {
			ss.Close()
			return err
		}
		if err := ds.Open("127.0.0.1:0"); err != nil {
			ss.Close()
			return err
		}
		a.dictURL = ds.URL()
		a.stopSims = func() { ss.Close(); ds.Close() }
		return nil
	},
	// balde on the application's pool, migrating beside its tables, with
	// the SIFEN sender, the application's logger and metrics.
	"migrate": func(ctx context.Context, a *app) error {
		a.metrics = web.NewMetrics()
		eng, err := balde.Open(ctx, balde.Config{SQLDB: a.db, Dialect: a.engine, Migrate: true,
			Clock:   a.clock.Now,
			Inbound: &web.InboundConfig{IPLimit: 2, Window: time.Minute, Block: time.Minute},
			Sifen:   &balde.SifenConfig{BaseURL: a.sifenURL},
			// The engine's DICT client sends through the application's
			// own client (its TLS, its signing proxy, here a counter).
			Dict: &balde.DictConfig{BaseURL: a.dictURL, Participant: "12345678", HTTPClient: a.httpClient,
				LearnCategory: true, Simulator: true},
			Jobs:     balde.Jobs{SifenPollEvery: 10 * time.Millisecond},
			Observer: a.metrics,
			Logger:   a.logger,
		})
		if err != nil {
			return err
		}
		a.eng = eng
		a.root = eng.Inbound().Middleware(a.mux)
		return eng.CheckHealth(ctx)
	},
	// The engine's background jobs (lot polling among them), until close.
	"run": func(ctx context.Context, a *app) error {
		runCtx, stop := context.WithCancel(ctx)
		a.stopRun, a.runDone = stop, make(chan error, 1)
		go func() { a.runDone <- a.eng.Run(runCtx) }()
		select {
		case <-a.eng.Started():
			return nil
		case err := <-a.runDone:
			return fmt.Errorf("engine run ended at start: %v", err)
		case <-time.After(30 * time.Second):
			return errors.New("the engine's start work took more than 30 s")
		}
	},
	// The admin pages under /balde/ in the application's router, behind
	// its own login, inside balde's inbound middleware (which limits every
	// request of the application; the handler does not charge a request
	// the middleware charged).
	"handler": func(ctx context.Context, a *app) error {
		a.server = a.eng.NewServer("12345678")
		a.server.BasePath = "/balde"
		a.server.Authenticate = appSession
		h, err := a.server.Handler()
		if err != nil {
			return err
		}
		a.mux.Handle("/balde/", h)
		from := func(ip string) func(*http.Request) { return func(r *http.Request) { r.RemoteAddr = ip + ":4000" } }
		session := func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "app_session", Value: "ops-session"}) }
		status, body := get(a.root, "/balde/admin/buckets", from("198.51.100.7"), session)
		if status != http.StatusOK || !strings.Contains(body, `href="/balde/admin/buckets`) {
			return fmt.Errorf("GET /balde/admin/buckets: %d, links under /balde/: %t", status, strings.Contains(body, `href="/balde/`))
		}
		if status, body := get(a.root, "/balde/healthz", from("198.51.100.7")); status != http.StatusOK {
			return fmt.Errorf("GET /balde/healthz: %d %s", status, body)
		}
		// Without the application's session: its login refuses, and the
		// request was charged first (guessing is limited too).
		var got []int
		for range 3 {
			status, _ := get(a.root, "/balde/admin/buckets", from("198.51.100.8"))
			got = append(got, status)
		}
		if fmt.Sprint(got) != "[401 401 429]" {
			return fmt.Errorf("3 requests without a session, a limit of 2: %v", got)
		}
		return nil
	},
	// The inbound limiter in front of the application's own API.
	"middleware": func(ctx context.Context, a *app) error {
		api := http.NewServeMux()
		api.HandleFunc("GET /api/orders", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "orders") })
		h := a.eng.Inbound().Middleware(api)
		var got []int
		for range 3 {
			status, _ := get(h, "/api/orders", func(r *http.Request) { r.RemoteAddr = "203.0.113.9:4000" })
			got = append(got, status)
		}
		if fmt.Sprint(got) != "[200 200 429]" {
			return fmt.Errorf("3 requests with a limit of 2: %v", got)
		}
		return nil
	},
	// One DICT lookup through dict.Transport wrapping the application's own
	// transport, against dictsim on 127.0.0.1:0: charged to the payer's and
	// the participant's buckets of the engine's limiter (the worst case held,
	// the difference refunded), recorded for payment credits.
	"dict-transport": func(ctx context.Context, a *app) error {
		appClient := &http.Client{Timeout: 10 * time.Second} // the application's own, signed, client
		catalog := a.eng.DictCatalog()
		appClient.Transport = &dict.Transport{Base: http.DefaultTransport,
			Meter: dict.Meter{Limiter: a.eng.Limiter(), Catalog: catalog}, Participant: "12345678", Records: a.eng.DictRecords(),
			Logger: a.logger}
		const e2e = "E12345678202601020304abcdefghij1"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.dictURL+"/api/v2/entries/maria.souza@example.com", nil)
		if err != nil {
			return err
		}
		req.Header.Set(dict.HeaderPayerID, "11144477735")
		req.Header.Set(dict.HeaderEndToEndID, e2e)
		resp, err := appClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("lookup: status %d", resp.StatusCode)
		}
		payer, err := a.eng.Limiter().State(ctx, catalog.Key(dict.PolicyEntriesReadUserAntiscan, "11144477735"))
		if err != nil {
			return err
		}
		participant, err := a.eng.Limiter().State(ctx, catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, "12345678"))
		if err != nil {
			return err
		}
		if payer.Tokens != 99 || participant.Tokens != participant.Policy.Capacity-1 {
			return fmt.Errorf("after a 200: payer %d (want 99), participant %d (want %d)", payer.Tokens, participant.Tokens, participant.Policy.Capacity-1)
		}
		if _, err := a.eng.DictRecords().FindLookup(ctx, e2e); err != nil {
			return fmt.Errorf("the lookup was not recorded: %w", err)
		}
		return nil
	},

	// Two SIFEN drafts sent through the engine's sender reach approved by
	// Run's lot polling alone, once the lot's first query is due.
	"sifen": func(ctx context.Context, a *app) error {
		sender := a.eng.Sifen()
		docs, err := sender.Import(ctx, sifentest.Lote(sifentest.Docs("80069563", 1, 2)...), sifen.EnvTest)
		if err != nil {
			return err
		}
		out, err := sender.Send(ctx, docs[0].ID, docs[1].ID)
		if err != nil {
			return err
		}
		if out.Status != sifen.OutcomeSent {
			return fmt.Errorf("send: %s %s", out.Status, out.Message)
		}
		a.clock.Advance(11 * time.Minute) // the lot's first query is due 10 min after the send
		deadline := time.Now().Add(30 * time.Second)
		for {
			approved := 0
			for _, d := range docs {
				got, err := sender.Get(ctx, d.ID)
				if err != nil {
					return err
				}
				if got.Status == sifen.StatusApproved {
					approved++
				}
			}
			if approved == len(docs) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d documents approved after 30 s of lot polling", approved, len(docs))
			}
			time.Sleep(10 * time.Millisecond)
		}
	},
	// balde's metrics gathered from the application's registry, beside the
	// default one (Go and process collectors): no duplicate, the bucket
	// gauges counted at the gather.
	"metrics": func(ctx context.Context, a *app) error {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "app_orders_total", Help: "The application's own."}))
		if err := reg.Register(a.metrics); err != nil {
			return err
		}
		families, err := prometheus.Gatherers{prometheus.DefaultGatherer, reg}.Gather()
		if err != nil {
			return err
		}
		want := map[string]bool{"go_goroutines": false, "app_orders_total": false, "balde_throttle_decisions_total": false, "balde_buckets": false}
		for _, f := range families {
			if _, ok := want[f.GetName()]; ok {
				want[f.GetName()] = true
			}
		}
		for name, found := range want {
			if !found {
				return fmt.Errorf("%s not gathered", name)
			}
		}
		return nil
	},

	// A lookup through the engine's DICT client goes out through the
	// application's own http.Client, with the category Run learned.
	"dict-client": func(ctx context.Context, a *app) error {
		if c := a.eng.DictCatalog().Category(); c != "C" {
			return fmt.Errorf("category %q, want C (learned by Run from the DICT)", c)
		}
		before := a.sent.Load()
		res, err := a.eng.Dict().GetEntry(ctx, dict.LookupRequest{Key: "maria.souza@example.com", PayerID: "52998224725"})
		if err != nil {
			return err
		}
		if res.Response == nil || !res.Decision.Allowed {
			return fmt.Errorf("lookup: entry %v, decision %+v", res.Response, res.Decision)
		}
		if n := a.sent.Load() - before; n != 1 {
			return fmt.Errorf("%d requests through the application's client, want 1", n)
		}
		return nil
	},

	// The application's history and table as they were.
	"untouched": func(ctx context.Context, a *app) error {
		var version int64
		var dirty bool
		if err := a.db.QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty); err != nil {
			return err
		}
		var n int
		if err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
			return err
		}
		var title string
		if err := a.db.QueryRowContext(ctx, `SELECT title FROM documents WHERE id = 1`).Scan(&title); err != nil {
			return err
		}
		if version != 57 || dirty || n != 1 || title != "invoice 2026-001" {
			return fmt.Errorf("the application's schema changed: version %d dirty %t rows %d, document %q", version, dirty, n, title)
		}
		var baldeVersion uint
		if err := a.db.QueryRowContext(ctx, `SELECT version FROM `+migrations.VersionTable).Scan(&baldeVersion); err != nil {
			return err
		}
		if latest, _ := migrations.Latest(a.engine); baldeVersion != latest {
			return fmt.Errorf("balde at version %d, want %d", baldeVersion, latest)
		}
		return nil
	},
	// balde's jobs stop, balde closes; the application's pool stays open.
	"close": func(ctx context.Context, a *app) error {
		a.stopRun()
		select {
		case err := <-a.runDone:
			if err != nil {
				return fmt.Errorf("engine run: %w", err)
			}
		case <-time.After(30 * time.Second):
			return errors.New("the engine still running 30 s after its context ended")
		}
		if err := a.server.Close(); err != nil {
			return err
		}
		if err := a.eng.Close(ctx); err != nil {
			return err
		}
		a.stopSims()
		return a.db.PingContext(ctx)
	},
	// balde logged through the application's logger, never slog.Default().
	"logs": func(ctx context.Context, a *app) error {
		if got := a.defaultLog.String(); got != "" {
			return fmt.Errorf("balde wrote to slog.Default(): %s", got)
		}
		if !strings.Contains(a.logs.String(), "lot queued") || !strings.Contains(a.logs.String(), "SIFEN lot queried") {
			return fmt.Errorf("the application's log lacks the SIFEN sender's lines: %s", a.logs.String())
		}
		return nil
	},
}

// countingTransport counts the requests the application's client sends.
type countingTransport struct{ n *atomic.Int64 }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// lockedBuffer is a log destination safe for balde's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: adopter sqlite|postgres DSN STEP,STEP,...")
		os.Exit(2)
	}
	ctx := context.Background()
	a := &app{engine: sqlstore.Engine(os.Args[1]), mux: http.NewServeMux(),
		clock: throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC)),
		logs:  &lockedBuffer{}, defaultLog: &lockedBuffer{}}
	a.logger = slog.New(slog.NewTextHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a.httpClient = &http.Client{Timeout: 10 * time.Second, Transport: countingTransport{&a.sent}}
	slog.SetDefault(slog.New(slog.NewTextHandler(a.defaultLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	driver, dsn := "sqlite", sqlstore.SQLiteDSN(os.Args[2])
	if a.engine == sqlstore.Postgres {
		driver, dsn = "pgx", os.Args[2]
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer db.Close()
	a.db = db
	for _, name := range strings.Split(os.Args[3], ",") {
		step, ok := steps[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no step %q\n", name)
			os.Exit(2)
		}
		if err := step(ctx, a); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Println("ok", name)
	}
}

func exec(ctx context.Context, db *sql.DB, stmts ...string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func get(h http.Handler, target string, opts ...func(*http.Request)) (int, string) {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for _, o := range opts {
		o(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}
