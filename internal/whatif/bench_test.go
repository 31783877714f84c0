package whatif_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/inspect"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/alldrivers"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// benchRows is the ledger the benchmark replays: a week of a category D
// participant's lookups, as the DICT client's Meter writes them.
const benchRows = 1_000_000

// BenchmarkReplayMillionRows replays a week of lookups — 1M ledger rows
// in SQLite: each lookup's two takes, the refunds of its 200 (three in
// four) and the credits of its payment (one found key in ten) — as
// category G. It reads the rows from the database and replays them; the
// time to write the database once is not measured (BALDE_BENCH_DB keeps it
// between runs). docs/BENCHMARKS.md has the number.
func BenchmarkReplayMillionRows(b *testing.B) {
	ctx := context.Background()
	path := os.Getenv("BALDE_BENCH_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "whatif.db")
	}
	clock := throttle.NewManualClock(throttletest.Epoch)
	catalog := dict.NewCatalog("prod")
	require.NoError(b, catalog.SetCategory("D"))
	dsn := "sqlite://" + path
	require.NoError(b, alldrivers.Migrate(ctx, dsn, func(m *migrations.Migrator) error { return m.Up() }))
	store, err := alldrivers.Open(ctx, dsn, sqlstore.Options{Clock: clock.Now})
	require.NoError(b, err)
	defer store.Close()
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	require.NoError(b, err)
	n, err := store.CountLedger(ctx, inspect.LedgerQuery{})
	require.NoError(b, err)
	if n < benchRows {
		writeWeek(b, ctx, lim, catalog, clock, benchRows-n)
	}
	week := whatif.Query{Policies: []string{dict.PolicyEntriesReadParticipantAntiscan},
		From: throttletest.Epoch, To: throttletest.Epoch.Add(8 * 24 * time.Hour), Scenario: whatif.Scenario{Category: "G"}}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		rep, err := whatif.Run(ctx, whatif.Config{Source: store, Limiter: lim, Dict: catalog}, week)
		require.NoError(b, err)
		b.ReportMetric(float64(rep.Rows)/time.Since(start).Seconds(), "rows/s")
		require.GreaterOrEqual(b, rep.Rows, int64(benchRows))
	}
}

// writeWeek writes about rows ledger rows of lookups, one every 2 s from
// Epoch, by 20 000 payers.
func writeWeek(b *testing.B, ctx context.Context, lim *throttle.Limiter, catalog *dict.Catalog, clock *throttle.ManualClock, rows int64) {
	b.Helper()
	m := dict.Meter{Limiter: lim, Catalog: catalog}
	var written int64
	for i := 0; written < rows; i++ {
		clock.Set(throttletest.Epoch.Add(time.Duration(i) * 2 * time.Second))
		payer := makeCPF(i % 20000)
		e2e := fmt.Sprintf("E%s%s%011d", ispb, clock.Now().Format("200601021504"), i)
		keys := catalog.LookupKeys(dict.KeyEmail, payer, ispb)
		r, err := m.Reserve(ctx, dict.OpGetEntry, e2e, keys...)
		require.NoError(b, err)
		if !r.Decision.Allowed {
			written += 1
			continue
		}
		outcome, rows := "200", int64(4)
		if i%4 == 0 {
			outcome, rows = "404", 2
		}
		_, err = m.Settle(ctx, r, outcome)
		require.NoError(b, err)
		if outcome == "200" && i%10 == 1 {
			_, err = m.Credit(ctx, e2e, dict.EventPayment, keys...)
			require.NoError(b, err)
			rows += 2
		}
		written += rows
	}
}
