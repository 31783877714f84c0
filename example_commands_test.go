package balde_test

// The uses the fourth pass of decision 0096 moved into the module: what an
// application writes to do what the command does.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

// balde buckets reset in an application: refill a bucket, with the
// reason in the audit trail, and say what a reset leaves to the remote.
func Example_bucketsReset() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	key := throttle.Key{Policy: sifen.PolicyRecepcionLote, Env: "test", Identifier: "80069563"}
	_, _ = eng.Limiter().Take(ctx, "lot 1", throttle.Charge{Key: key, Cost: 1})

	r, err := eng.ResetBucket(ctx, key, "ana", "SIFEN confirmed the lot")
	fmt.Println(err, r.Before.Tokens, "→", r.After.Tokens, "remote block stays:", r.RemoteBlockStays)
	entries, _ := eng.Audit().List(ctx, audit.Query{})
	fmt.Println(entries[0].User, entries[0].Target, entries[0].Reason)
	// Output:
	// <nil> 0 → 1 remote block stays: true
	// cli:ana SIFEN_RECEPCION_LOTE/test/80069563 SIFEN confirmed the lot
}

// balde migrate up|version in an application's deploy step: Open with
// Migrate applies what is pending; the engine's driver package gives the
// migrator itself (Up, Down, Force, Version) on a DSN.
func Example_migrate() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	dsn := "sqlite://" + filepath.Join(dir, "balde.db")
	err := sqlitedriver.Migrate(context.Background(), dsn, func(m *migrations.Migrator) error {
		if err := m.Up(); err != nil {
			return err
		}
		version, dirty, err := m.Version()
		latest, _ := migrations.Latest(migrations.SQLite)
		fmt.Println(version == latest, dirty)
		return err
	})
	fmt.Println(err)
	// Output:
	// true false
	// <nil>
}

// balde sifen-send in an application's own command, drawn and worded as
// the binary does: import each DE, send through the RUC gates, report.
func Example_sifenSendReport() {
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

	file := filepath.Join(dir, "a.xml")
	_ = os.WriteFile(file, sifentest.Lote(sifentest.Doc{Number: 1}), 0o600)
	items, bad := report.ReadSifenFiles(ctx, []string{file}, sifen.EnvTest, false)
	items[0].File = "a.xml"                                                                                           // the temporary directory left out of the output
	rc := report.NewClock(clock.Now, func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil }) // nil: real waits
	send := report.SifenSend{Sender: eng.Sifen(), Env: sifen.EnvTest, Wait: true, MaxWait: time.Minute, Clock: rc,
		Reporter: report.New(os.Stdout, report.Plain, len(items), "sifen-send", rc, nil)}
	sum, err := send.Run(ctx, items)
	fmt.Println(len(bad), err, sum.Sent, items[0].Result)
	// Output:
	// sent    a.xml cdc=01800695631001001000000122026010210000202640 ruc=80069563-1 env=test lot=10000000000000001 code=0300 "Lote recibido con éxito"
	// 1 sent, 0 blocked, 0 skipped, 0 failed of 1 in 0s; waited 0s
	// 0 <nil> 1 sent
}

// balde sifen-override in an application: a document whose send got no
// answer is made sendable again before SIFEN's 48 hours, on SIFEN's 0420
// asked at that moment, with the operator's reason in the audit trail.
func Example_sifenOverride() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
	sim, _ := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Logger: slog.New(slog.DiscardHandler),
		// The first lot is lost on the way: SIFEN never gets it, balde gets no answer.
		BeforeRecepcion: func(context.Context, sifensim.Recepcion) error { return errors.New("lost") }})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	eng, err := balde.Open(ctx, balde.Config{DB: "sqlite://" + filepath.Join(dir, "balde.db"), Migrate: true, Clock: clock.Now,
		Sifen: &balde.SifenConfig{BaseURL: srv.URL + "/{env}"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	docs, _ := eng.Sifen().Import(ctx, sifentest.Doc{Number: 1}.File(), sifen.EnvTest)
	out, _ := eng.Sifen().Send(ctx, docs[0].ID)
	fmt.Println(out.Status)

	clock.Advance(5 * time.Minute) // no send of it can still be on the wire
	o, err := eng.OverrideSifen(ctx, docs[0].ID, "alice", "customer waiting; the proxy never forwarded it")
	fmt.Println(o.Code, o.Done, o.Status, err)
	entries, _ := eng.Audit().List(ctx, audit.Query{Action: audit.ActionSifenOverride})
	fmt.Println(entries[0].User, entries[0].Outcome)
	// Output:
	// unknown
	// 0420 true draft <nil>
	// cli:alice code=0420&result=overridden
}
