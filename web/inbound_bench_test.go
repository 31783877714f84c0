package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// BenchmarkInbound measures the inbound limiter as seed 004 states its
// numbers: checks through Inbound.Middleware (an httptest request to a mux
// behind it), 8 workers, on each engine, through group commit as balde
// runs it (balde.Engine's inbound store). Besides ns/op it reports checks/s, the p99 of one check, the
// bytes of the rolling state (spent) per key and, on PostgreSQL, the
// buckets table's size per key (it grows with the updates of the run: dead
// row versions), the share of HOT updates, the mean batch of group commit
// and the share of batches written in one round trip on the rows the store
// remembers (sqlstore.OptimisticStats).
//
// The clock is virtual: every check advances it by the same step, so that
// each key (taken round robin) sees 80 % of its limit per window: a key's
// window is kept 80 % full, the state a busy client has, whatever the
// limit, and nobody is refused. A warm-up of 1.2 windows reaches that
// state before the timer starts.
//
//   - seed: 10,000 client IPs, limit 120/min (the warm-up is skipped: the
//     windows fill as the run goes, as after a restart);
//   - limit=L: 50 client IPs with a limit of L (20, 120, 1000), full
//     windows: the cost of a check as the limit grows.
//
// Run: go test -run '^$' -bench BenchmarkInbound -benchtime 2s -count 3 ./web/
// (BALDE_TEST_POSTGRES_DSN set for PostgreSQL).
func BenchmarkInbound(b *testing.B) {
	for _, engine := range sqlstoretest.Engines {
		b.Run(string(engine), func(b *testing.B) {
			b.Run("seed", func(b *testing.B) { benchInbound(b, engine, 10_000, 120, false) })
			for _, limit := range []int64{20, 120, 1000} {
				b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) { benchInbound(b, engine, 50, limit, true) })
			}
		})
	}
}

func benchInbound(b *testing.B, engine sqlstore.Engine, keys int, limit int64, warm bool) {
	const window = time.Minute
	// step: keys × 80 % of limit checks per window.
	step := window / time.Duration(int64(keys)*limit*8/10)
	var ticks atomic.Int64
	clock := func() time.Time { return throttletest.Epoch.Add(time.Duration(ticks.Load()) * step) }
	store := sqlstoretest.MustOpen(b, engine, clock)
	// As balde.Engine wires it: the store's NonDurable view (on
	// PostgreSQL, commits that do not wait for the disk), group commit.
	group := throttle.NewGroupCommit(store.NonDurable(), throttle.GroupCommitOptions{Writers: 1}) // one writer (docs/decisions/0116)
	b.Cleanup(func() { _ = group.Close() })
	in, err := web.NewInbound(web.InboundConfig{IPLimit: limit, Window: window, Block: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if err := in.UseStore(group, throttle.Config{Clock: clock}); err != nil {
		b.Fatal(err)
	}
	app := http.NewServeMux()
	app.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {})
	h := in.Middleware(app)
	peers := make([]string, keys)
	for i := range peers {
		peers[i] = fmt.Sprintf("10.%d.%d.%d:4000", i>>16&255, i>>8&255, i&255)
	}
	var next atomic.Int64
	var refused atomic.Int64
	check := func() {
		i := next.Add(1)
		ticks.Add(1)
		req := httptest.NewRequest(http.MethodGet, "/api/orders", nil)
		req.RemoteAddr = peers[int(i)%keys]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			refused.Add(1)
		}
	}
	if warm {
		// 1.2 windows, 8 at a time.
		n := int64(keys) * limit * 8 / 10 * 12 / 10
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for j := int64(w); j < n; j += 8 {
					check()
				}
			})
		}
		wg.Wait()
	}
	var mu sync.Mutex
	var lat []time.Duration
	refused.Store(0)
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
	stats0 := store.OptimisticStats()
	batches0, ops0 := group.Stats()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		mine := make([]time.Duration, 0, 1<<14)
		for pb.Next() {
			t0 := time.Now()
			check()
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if batches, ops := group.Stats(); batches > batches0 {
		b.ReportMetric(float64(ops-ops0)/float64(batches-batches0), "ops/batch")
	}
	// On PostgreSQL: the share of batches written in one round trip on
	// remembered rows (sqlstore.OptimisticStats).
	if st := store.OptimisticStats(); engine == sqlstore.Postgres {
		one, locked := st.OneTrip-stats0.OneTrip, st.Locked-stats0.Locked
		if one+locked > 0 {
			b.ReportMetric(100*float64(one)/float64(one+locked), "onetrip-%")
			b.ReportMetric(float64(st.Conflicts-stats0.Conflicts), "conflicts")
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "checks/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	if n := refused.Load(); n > 0 {
		b.ReportMetric(float64(n), "refused")
	}
	db := store.DB()
	var avg float64
	if err := db.QueryRowContext(context.Background(), `SELECT COALESCE(AVG(LENGTH(spent)), 0) FROM balde_buckets`).Scan(&avg); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(avg, "spent-B/key")
	if engine == sqlstore.Postgres {
		var size int64
		if err := db.QueryRowContext(context.Background(), `SELECT pg_total_relation_size('balde_buckets')`).Scan(&size); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(size)/float64(keys), "table-B/key")
		// HOT updates rewrite a row in its page without a new index entry;
		// the counters reach pg_stat with a delay of up to a second.
		var upd, hot int64
		_, _ = db.ExecContext(context.Background(), `SELECT pg_stat_force_next_flush()`)
		if err := db.QueryRowContext(context.Background(), `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relid = 'balde_buckets'::regclass`).Scan(&upd, &hot); err == nil && upd > 0 {
			b.ReportMetric(100*float64(hot)/float64(upd), "HOT-%")
		}
	}
}
