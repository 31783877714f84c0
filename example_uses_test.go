package balde_test

// One example per command of balde's binary: what an application writes
// to do what the command does (decision 0096 counts these lines).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// balde serve in an application: the engine's background jobs and its
// admin pages (behind the application's credential) served on an address
// until ctx ends; the application's own router may mount the same handler.
func ExampleEngine_Serve() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(context.Background())
	s := eng.NewServer("12345678") // the DICT participant's ISPB
	s.Admin = web.Credentials{User: "ops", Password: "correct horse"}
	h, err := s.Handler()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	err = eng.Serve(ctx, "127.0.0.1:0", h, func(addr string) {
		resp, err := http.Get("http://" + addr + "/admin/buckets")
		if err == nil {
			fmt.Println(resp.StatusCode) // the admin's credential is needed
			resp.Body.Close()
		}
		stop() // SIGTERM, in a process of its own
	})
	fmt.Println(err)
	// Output:
	// 401
	// <nil>
}

// balde gateway in an application: the DICT gateway behind the inbound
// limiter, with the probes mounted beside it, while the engine's jobs run.
// The gateway serves the DICT API and nothing else.
func ExampleEngine_DictGateway() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true,
		Dict:    &balde.DictConfig{BaseURL: "http://127.0.0.1:8091", Participant: "12345678"}, // make run's simulator
		Inbound: &web.InboundConfig{IPLimit: 100}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(context.Background())
	// The gateway's clients, each with its bearer token's SHA-256 (or a
	// client certificate's CN); web.GatewayHandler rereads it when it
	// changes (and on a reload channel: balde gateway passes its SIGHUP).
	sum := sha256.Sum256([]byte("s3cret-token"))
	clientsFile := filepath.Join(dir, "clients")
	_ = os.WriteFile(clientsFile, []byte("erp sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o600)
	clients, err := web.LoadGatewayClients(clientsFile, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	gateway, err := eng.DictGateway(web.DictGatewayConfig{Authenticate: clients.Authenticate})
	if err != nil {
		fmt.Println(err)
		return
	}
	ops, err := eng.OpsHandler("") // a token would protect /metrics
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v2/", eng.Inbound().Middleware(gateway))
	mux.Handle("/livez", ops)

	err = eng.Serve(ctx, "127.0.0.1:0", mux, func(addr string) {
		for _, path := range []string{"/livez", "/metrics", "/api/v2/entries/x"} {
			resp, err := http.Get("http://" + addr + path)
			if err == nil {
				fmt.Println(path, resp.StatusCode)
				resp.Body.Close()
			}
		}
		stop() // SIGTERM, in a process of its own
	})
	fmt.Println(err)
	// Output:
	// /livez 200
	// /metrics 404
	// /api/v2/entries/x 401
	// <nil>
}

// balde sifen-send in an application's own command: import DEs, send them
// through the RUC gates (SendDocuments waits each RUC's interval), and
// draw the results and the summary as the binary does.
func Example_sifenSend() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
	sim, _ := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true, Clock: clock.Now,
		Sifen: &balde.SifenConfig{BaseURL: srv.URL + "/{env}"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)

	docs, _ := eng.Sifen().Import(ctx, sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2, Type: 5}), sifen.EnvTest)
	rc := report.NewClock(clock.Now, func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil }) // nil: real waits
	rep := report.New(os.Stdout, report.Plain, len(docs), "send", rc, nil)
	_, err = sifen.SendDocuments(ctx, eng.Sifen(), docs, sifen.BatchConfig{Wait: true, Clock: clock.Now, Sleep: rc.Sleep,
		Progress: func(e sifen.Event) {
			switch {
			case e.Kind == sifen.EventWaiting:
				rep.Waiting(e.Wait, "RUC interval")
			case e.Kind == sifen.EventResult:
				rep.Item(report.Result(e.Result.Result), fmt.Sprintf("%s document %d", e.Result.Result, e.Result.DocumentID), e.Result)
			}
		}})
	fmt.Println(err)
	rep.Finish(false, 0)
	// Output:
	// sent document 1
	// waiting 10s: RUC interval
	// sent document 2
	// <nil>
	// 2 sent, 0 blocked, 0 skipped, 0 failed of 2 in 10s; waited 10s
}

// balde dict-lookup in an application: a batch of lookups through the
// mirror, each result delivered in input order to the application's own
// output (the binary writes CSV or JSON lines).
func Example_dictLookup() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	entries, _ := dictsim.ReadEntries(strings.NewReader(strings.Join(dictsim.EntriesHeader, ",") +
		"\n+5561988880000,PHONE,12345678,0001,0007654321,CACC,NATURAL_PERSON,11144477735,João Silva\n"))
	sim, _ := dictsim.NewServer(ctx, dictsim.Config{Entries: entries, Category: "A", Logger: slog.New(slog.DiscardHandler)})
	defer sim.Close()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true,
		Dict: &balde.DictConfig{BaseURL: srv.URL, Participant: "12345678"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)

	reqs := []dict.LookupRequest{{Key: "+5561988880000", PayerID: "11144477735"}, {Key: "+5561999990000", PayerID: "11144477735"}}
	err = (&dict.Batch{Client: eng.Dict(), Wait: true}).Run(ctx, reqs, func(res dict.BatchResult) error {
		var remote *dict.RemoteError
		switch {
		case res.Err == nil && res.Response != nil:
			fmt.Println(res.Request.Key, "→", res.Response.Entry.Owner.Name, res.Response.Entry.Account.Participant)
		case errors.As(res.Err, &remote) && remote.NotFound():
			fmt.Println(res.Request.Key, "→ no entry (the DICT charged the payer for it)")
		case res.Err == nil:
			fmt.Println(res.Request.Key, "→ refused locally, not sent; retry after", res.Decision.RetryAfter)
		default:
			fmt.Println(res.Request.Key, "→", res.Err)
		}
		return nil // an application's own output: a file, a table, a queue
	})
	fmt.Println(err)
	// Output:
	// +5561988880000 → João Silva 12345678
	// +5561999990000 → no entry (the DICT charged the payer for it)
	// <nil>
}

// balde buckets list --sort severity and prune --dry-run in an
// application: the worst buckets first, and what a prune would remove.
func Example_buckets() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	sms := throttle.PerMinute("SMS_PROVIDER", 10, 10)
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true,
		Resolvers: throttle.Resolvers{throttle.Policies{sms.Name: sms}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	for id, cost := range map[string]int64{"a": 2, "b": 9, "c": 5} {
		_, _ = eng.Limiter().Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: sms.Name, Env: "prod", Identifier: id}, Cost: cost})
	}

	page, err := eng.Reader().ListBy(ctx, inspect.Filter{Policy: sms.Name}, inspect.SortSeverity)
	for _, st := range page.States {
		fmt.Println(st.Key, st.Tokens, st.Severity)
	}
	counted, _ := eng.CountPrune(ctx, throttle.PruneOptions{})
	fmt.Println(err, counted.LedgerRows, counted.Buckets)
	// Output:
	// SMS_PROVIDER/prod/b 1 High
	// SMS_PROVIDER/prod/c 5 Healthy
	// SMS_PROVIDER/prod/a 8 Healthy
	// <nil> 0 0
}
