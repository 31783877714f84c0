package sifensql_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestImportOfOneCDCByProcessesAtOnce: several processes (a store each, its
// own connections) import the same DEs at the same instant. Every import
// succeeds with the same documents, as a second import of a stored CDC does
// one after the other (decision 0057), and each CDC is stored once. Before,
// on PostgreSQL, every import but one failed with a duplicate key on
// (env, cdc), reported as "store unavailable".
func TestImportOfOneCDCByProcessesAtOnce(t *testing.T) {
	const processes, rounds = 6, 3
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn := sqlstoretest.DSN(t, engine)
		stores := make([]sifen.DocumentStore, processes)
		for i := range stores {
			s := sqlstoretest.MustOpenDSN(t, dsn, nil)
			require.NoError(t, s.Ping(context.Background())) // connected before the race
			stores[i] = sifensql.New(s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for round := range rounds {
			lote, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("80069563", 1+10*round, 10)...))
			require.NoError(t, err)
			ids := make([][]int64, processes)
			errs := make([]error, processes)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, docs := range stores {
				wg.Go(func() {
					<-start
					ids[i], errs[i] = docs.Import(ctx, sifen.EnvTest, lote.DEs, false, throttletest.Epoch)
				})
			}
			close(start)
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("round %d: the imports did not end within a minute", round)
			}
			for i, err := range errs {
				require.NoError(t, err, "round %d, process %d", round, i)
				require.Equal(t, ids[0], ids[i], "round %d, process %d: the same documents", round, i)
			}
			got, err := stores[0].Documents(ctx, ids[0], true)
			require.NoError(t, err)
			for i, d := range got {
				require.Equal(t, lote.DEs[i].CDC, d.CDC)
				require.Equal(t, sifen.StatusDraft, d.Status)
				require.Equal(t, string(lote.DEs[i].XML), string(d.XML))
			}
		}
		counts, err := stores[0].CountByStatus(ctx, sifen.EnvTest)
		require.NoError(t, err)
		require.Equal(t, map[sifen.Status]int64{sifen.StatusDraft: 10 * rounds}, counts, "each CDC stored once")
	})
}

// TestImportFilesOfOneCDCByProcessesAtOnce is the same race through
// Sender.ImportFiles, one DE at a time as `sifen-send` imports its files:
// each DE is reported imported by every run, none as a store failure.
func TestImportFilesOfOneCDCByProcessesAtOnce(t *testing.T) {
	const processes = 4
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn := sqlstoretest.DSN(t, engine)
		des := fileDEs(t, 12)
		senders := make([]*sifen.Sender, processes)
		for i := range senders {
			s := sqlstoretest.MustOpenDSN(t, dsn, nil)
			require.NoError(t, s.Ping(context.Background()))
			r, err := sifen.NewResolver(sifen.PolicyConfig{})
			require.NoError(t, err)
			l, err := throttle.NewLimiter(s, r, throttle.Config{})
			require.NoError(t, err)
			c, err := sifen.NewClient(sifen.ClientConfig{})
			require.NoError(t, err)
			senders[i], err = sifen.NewSender(sifensql.New(s), c, l, sifen.SenderConfig{Resolver: r})
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		results := make([][]sifen.Imported, processes)
		errs := make([]error, processes)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, snd := range senders {
			wg.Go(func() {
				<-start
				results[i], errs[i] = snd.ImportFiles(ctx, des, sifen.EnvTest, false)
			})
		}
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the imports did not end within a minute")
		}
		for i := range senders {
			require.NoError(t, errs[i], "process %d", i)
			require.Len(t, results[i], len(des), "process %d", i)
			for j, r := range results[i] {
				require.NoError(t, r.Err, "process %d, %s", i, r.File)
				require.Equal(t, des[j].DE.CDC, r.Document.CDC)
				require.Equal(t, results[0][j].Document.ID, r.Document.ID, "process %d, %s: one document per CDC", i, r.File)
			}
		}
	})
}

// fileDEs returns n DEs as sifen.ReadFiles returns them, one file each.
func fileDEs(t *testing.T, n int) []sifen.FileDE {
	t.Helper()
	lote, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("88888801", 1, n)...))
	require.NoError(t, err)
	out := make([]sifen.FileDE, n)
	for i, de := range lote.DEs {
		out[i] = sifen.FileDE{File: fmt.Sprintf("de-%02d.xml", i), DE: de}
	}
	return out
}
