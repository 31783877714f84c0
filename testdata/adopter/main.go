// Command adopter is a throwaway application that imports balde as a module
// would: its own database (with its own schema_migrations at version 57 and
// a documents table), its own router, balde mounted in it. module_test.go
// builds it in a temporary module whose go.mod replaces balde with this
// checkout, and runs the steps it names, in order, on SQLite or
// PostgreSQL. Each step prints "ok NAME" or exits 1 with the failure.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// app is the adopting application.
type app struct {
	engine sqlstore.Engine
	db     *sql.DB
	eng    *balde.Engine
	server *web.Server
	mux    *http.ServeMux
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
	// balde on the application's pool, migrating beside its tables.
	"migrate": func(ctx context.Context, a *app) error {
		eng, err := balde.Open(ctx, balde.Config{SQLDB: a.db, Dialect: a.engine, Migrate: true,
			Inbound: &web.InboundConfig{IPLimit: 2, Window: time.Minute, Block: time.Minute}})
		if err != nil {
			return err
		}
		a.eng = eng
		return eng.CheckHealth(ctx)
	},
	// The admin pages under /balde/ in the application's router.
	"handler": func(ctx context.Context, a *app) error {
		a.server = a.eng.NewServer("12345678")
		a.server.BasePath = "/balde"
		a.server.Admin = web.Credentials{User: "ops", Password: "pw"}
		h, err := a.server.Handler()
		if err != nil {
			return err
		}
		a.mux.Handle("/balde/", h)
		status, body := get(a.mux, "/balde/admin/buckets", func(r *http.Request) { r.SetBasicAuth("ops", "pw") })
		if status != http.StatusOK || !strings.Contains(body, `href="/balde/admin/buckets`) {
			return fmt.Errorf("GET /balde/admin/buckets: %d, links under /balde/: %t", status, strings.Contains(body, `href="/balde/`))
		}
		if status, body := get(a.mux, "/balde/healthz"); status != http.StatusOK {
			return fmt.Errorf("GET /balde/healthz: %d %s", status, body)
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
		sim, err := dictsim.NewServer(ctx, dictsim.Config{Entries: []dictsim.Entry{{
			Key: "maria.souza@example.com", KeyType: "EMAIL",
			Account: dictsim.Account{Participant: "12345678", Branch: "0001", AccountNumber: "0001234567", AccountType: "CACC"},
			Owner:   dictsim.Owner{Type: "NATURAL_PERSON", TaxIDNumber: "52998224725", Name: "Maria Souza"},
		}}})
		if err != nil {
			return err
		}
		if err := sim.Open("127.0.0.1:0"); err != nil {
			return err
		}
		defer sim.Close()
		appClient := &http.Client{Timeout: 10 * time.Second} // the application's own, signed, client
		catalog := a.eng.DictCatalog()
		appClient.Transport = &dict.Transport{Base: http.DefaultTransport,
			Meter: dict.Meter{Limiter: a.eng.Limiter(), Catalog: catalog}, Participant: "12345678", Records: a.eng.DictRecords()}
		const e2e = "E12345678202601020304abcdefghij1"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, sim.URL()+"/api/v2/entries/maria.souza@example.com", nil)
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
	// balde closes; the application's pool stays open.
	"close": func(ctx context.Context, a *app) error {
		if err := a.server.Close(); err != nil {
			return err
		}
		if err := a.eng.Close(ctx); err != nil {
			return err
		}
		return a.db.PingContext(ctx)
	},
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: adopter sqlite|postgres DSN STEP,STEP,...")
		os.Exit(2)
	}
	ctx := context.Background()
	a := &app{engine: sqlstore.Engine(os.Args[1]), mux: http.NewServeMux()}
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
