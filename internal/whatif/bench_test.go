package whatif_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
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
	require.NoError(b, sqlitedriver.Migrate(ctx, dsn, func(m *migrations.Migrator) error { return m.Up() }))
	store, err := sqlitedriver.Open(ctx, dsn, sqlstore.Options{Clock: clock.Now})
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
// Epoch, by 20 000 payers, through a dict.Transport whose DICT answers 200
// (three in four) or 404; one found key in ten is paid (its credit).
func writeWeek(b *testing.B, ctx context.Context, lim *throttle.Limiter, catalog *dict.Catalog, clock *throttle.ManualClock, rows int64) {
	b.Helper()
	status := http.StatusOK
	dictAnswer := roundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	client := &http.Client{Transport: &dict.Transport{Base: dictAnswer, Meter: dict.Meter{Limiter: lim, Catalog: catalog}, Participant: ispb}}
	var written int64
	for i := 0; written < rows; i++ {
		clock.Set(throttletest.Epoch.Add(time.Duration(i) * 2 * time.Second))
		payer := makeCPF(i % 20000)
		e2e := fmt.Sprintf("E%s%s%011d", ispb, clock.Now().Format("200601021504"), i)
		status, rows := http.StatusOK, int64(4)
		if i%4 == 0 {
			status, rows = http.StatusNotFound, 2
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://dict.test"+dict.APIPrefix+"/entries/user"+fmt.Sprint(i)+"@example.com", nil)
		require.NoError(b, err)
		req.Header.Set(dict.HeaderPayerID, payer)
		req.Header.Set(dict.HeaderEndToEndID, e2e)
		resp, err := client.Do(req)
		if _, refused := throttle.AsRefusal(err); refused {
			written++
			continue
		}
		require.NoError(b, err)
		resp.Body.Close()
		if status == http.StatusOK && i%10 == 1 {
			var adjs []throttle.Adjustment
			for _, k := range catalog.LookupKeys(dict.KeyEmail, payer, ispb) {
				n, err := catalog.Credit(k, dict.EventPayment)
				require.NoError(b, err)
				adjs = append(adjs, throttle.Adjustment{Key: k, Delta: n, Reason: throttle.LedgerCredit, Ref: e2e})
			}
			_, err = lim.Adjust(ctx, adjs...)
			require.NoError(b, err)
			rows += 2
		}
		written += rows
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
