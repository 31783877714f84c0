package balde_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"    // the tests run on PostgreSQL too
	_ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver" // balde.Open's engine: a blank import registers it
	"github.com/balde-throttle/balde/web"
)

// The engine on SQLite: one Open, then every outbound send asks the
// limiter first. A refusal is a value with the exact wait.
func Example() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	sms := throttle.PerMinute("SMS_PROVIDER", 2, 2) // the app's own policy, beside DICT's and SIFEN's
	eng, err := balde.Open(ctx, balde.Config{
		DB:        "sqlite://" + filepath.Join(dir, "balde.db"),
		Migrate:   true,
		Resolvers: throttle.Resolvers{throttle.Policies{sms.Name: sms}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)

	key := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: "+5561988880000"}
	for range 3 {
		d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%t reason=%q retry after %s\n", d.Allowed, d.Reason, d.RetryAfter.Round(time.Second))
	}
	// Output:
	// allowed=true reason="" retry after 0s
	// allowed=true reason="" retry after 0s
	// allowed=false reason="empty" retry after 30s
}

// balde on the application's own pool: its tables are balde_*, its
// versions in balde_schema_migrations; Close leaves the pool open.
func Example_applicationPool() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, _ := sql.Open("sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "app.db"))) // the app's pool
	defer db.Close()
	eng, err := balde.Open(ctx, balde.Config{SQLDB: db, Dialect: sqlstore.SQLite, Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(eng.CheckHealth(ctx))
	fmt.Println(eng.Close(ctx), db.Ping())
	// Output:
	// <nil>
	// <nil> <nil>
}

// The inbound limiter in front of an application's own API on a plain
// ServeMux: 2 requests a minute per client IP here, then 429 with
// Retry-After and a block of a minute.
func ExampleEngine_Inbound() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) // the system clock by default

	eng, err := balde.Open(ctx, balde.Config{
		DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true, Clock: clock.Now,
		Inbound: &web.InboundConfig{IPLimit: 2, Window: time.Minute, Block: time.Minute},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/orders", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "orders") })
	h := eng.Inbound().Middleware(mux)

	for range 3 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/orders", nil)
		req.RemoteAddr = "203.0.113.7:50000"
		h.ServeHTTP(rec, req)
		fmt.Printf("%d %s Retry-After=%q\n", rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 "ip";r=1;t=60 Retry-After=""
	// 200 "ip";r=0;t=60 Retry-After=""
	// 429 "ip";r=0;t=60 Retry-After="60"
}

// balde's admin pages, DICT lookup, documents and /policies/ mounted under
// /balde/ in an application's router: no listener of balde's own, every
// link under the prefix. Set Authenticate instead of Admin to use the
// application's login.
func ExampleEngine_NewServer() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)

	s := eng.NewServer("12345678") // the DICT participant's ISPB
	s.BasePath = "/balde"
	s.Admin = web.Credentials{User: "ops", Password: "correct horse"}
	h, err := s.Handler()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	mux := http.NewServeMux() // the application's router
	mux.Handle("/balde/", h)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/balde/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Location"))

	req := httptest.NewRequest(http.MethodGet, "/balde/admin/buckets", nil)
	req.SetBasicAuth("ops", "correct horse")
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output:
	// 303 /balde/admin/buckets
	// 200 text/html; charset=utf-8
}

// The engine's background jobs: with Config.Sifen the engine builds the
// SIFEN sender, and Run polls the lots it sent until SIFEN has their result
// (the first query 10 minutes after the send): the document reaches
// approved with no call of the application's. balde serve is Open + Run.
func ExampleEngine_Run() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
	sim, _ := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Processing: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(sim) // SIFEN: without BaseURL, its official endpoints and CertFile/KeyFile
	defer srv.Close()

	eng, err := balde.Open(ctx, balde.Config{
		DB:      "sqlite://" + filepath.Join(dir, "balde.db"),
		Migrate: true,
		Clock:   clock.Now,
		Sifen:   &balde.SifenConfig{BaseURL: srv.URL + "/{env}"},
		Jobs:    balde.Jobs{SifenPollEvery: 10 * time.Millisecond}, // default 30 s
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			fmt.Println("Run did not stop")
		}
	}()

	docs, _ := eng.Sifen().Import(ctx, sifentest.Lote(sifentest.Docs("80069563", 1, 1)...), sifen.EnvTest)
	out, _ := eng.Sifen().Send(ctx, docs[0].ID)
	fmt.Println(out.Status, out.Code)

	clock.Advance(11 * time.Minute)
	doc, _ := eng.Sifen().Get(ctx, docs[0].ID)
	for deadline := time.Now().Add(10 * time.Second); doc.Status != sifen.StatusApproved && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		doc, _ = eng.Sifen().Get(ctx, docs[0].ID)
	}
	fmt.Println(doc.Status)
	// Output:
	// sent 0300
	// approved
}
