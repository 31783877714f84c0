package sifen_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

// A SIFEN send through the Sender, against the simulator: import two DEs
// of one RUC, send the first, and the second is refused by the interval
// (a value, not an error) until it has passed since SIFEN's answer.
func ExampleSender_Send() {
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
	quiet := slog.New(slog.DiscardHandler)

	// SIFEN: the simulator on loopback (sifen.TestURL and a client
	// certificate in production).
	sim, _ := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Logger: quiet})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	client, _ := sifen.NewClient(sifen.ClientConfig{BaseURL: srv.URL + "/{env}"})

	// The throttle and the documents in one SQLite file.
	dir, _ := os.MkdirTemp("", "balde-example")
	defer os.RemoveAll(dir)
	store, err := sqlitedriver.Open(ctx, "sqlite://"+filepath.Join(dir, "balde.db"), sqlstore.Options{Migrate: true, Clock: clock.Now, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	policies, _ := sifen.NewResolver(sifen.PolicyConfig{Interval: 10 * time.Second})
	limiter, _ := throttle.NewLimiter(store, policies, throttle.Config{Clock: clock.Now, Logger: quiet})
	sender, _ := sifen.NewSender(sifensql.New(store), client, limiter, sifen.SenderConfig{Clock: clock.Now, Logger: quiet, Resolver: policies})

	docs, _ := sender.Import(ctx, sifentest.Lote(sifentest.Docs("80069563", 1, 2)...), sifen.EnvTest)
	out, _ := sender.Send(ctx, docs[0].ID)
	fmt.Println(out.Status, out.Code, out.Message)
	out, _ = sender.Send(ctx, docs[1].ID)
	fmt.Println(out.Status, out.Decision.Reason, out.Decision.RetryAfter)
	clock.Advance(out.Decision.RetryAfter)
	out, _ = sender.Send(ctx, docs[1].ID)
	fmt.Println(out.Status, out.Code)
	// Output:
	// sent 0300 Lote recibido con éxito
	// blocked cooldown 10s
	// sent 0300
}
