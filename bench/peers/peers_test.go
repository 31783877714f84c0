// Package peers measures balde beside the rate limiters a user would pick
// instead, in one run: redis_rate (GCRA in Redis), ulule/limiter (fixed
// window in Redis) and sethvargo/go-limiter (token bucket in memory, one
// process only). It is a module of its own so that the peers' dependencies
// stay out of balde's go.mod; docs/BENCHMARKS.md ("Peers") has the table.
//
// Run: make bench-peers (Redis on 127.0.0.1:6379; PostgreSQL rows need
// BALDE_TEST_POSTGRES_DSN, they skip without it).
package peers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// A workload is a key space and a limit, offered by callers goroutines in
// a closed loop (each calls again as soon as its decision returns).
type workload struct {
	name    string
	keys    int           // 1: one hot key; otherwise uniform over keys
	limit   int64         // per period
	period  time.Duration // of limit
	callers int
	// lease is balde's throttle.Config.Lease (quota leases, decision
	// 0221); a workload with one is balde's alone.
	lease time.Duration
}

// workloads: one hot key and a million uniform keys with a limit nobody
// reaches (every decision admits), and seed 004's inbound limiter (10,000
// client IPs at 120/min, uniform: past the first minute's budget some
// checks are refused, a decision like any other).
var workloads = []workload{
	{name: "1key/callers=8", keys: 1, limit: 1 << 40, period: time.Second, callers: 8},
	{name: "1Mkeys/callers=8", keys: 1_000_000, limit: 1 << 40, period: time.Second, callers: 8},
	{name: "1Mkeys/callers=32", keys: 1_000_000, limit: 1 << 40, period: time.Second, callers: 32},
	{name: "inbound10k/callers=8", keys: 10_000, limit: 120, period: time.Minute, callers: 8},
	{name: "inbound10k/lease/callers=8", keys: 10_000, limit: 120, period: time.Minute, callers: 8, lease: time.Second},
	// 100 busy clients at the most a window holds (a gateway's clients,
	// decision 0165): hot keys, each far below its limit.
	{name: "inbound100x10000/callers=8", keys: 100, limit: 10_000, period: time.Minute, callers: 8},
	{name: "inbound100x10000/lease/callers=8", keys: 100, limit: 10_000, period: time.Minute, callers: 8, lease: time.Second},
}

// decide is one rate-limit decision on key: allowed or refused, or an error.
type decide func(ctx context.Context, key string) (bool, error)

func BenchmarkPeers(b *testing.B) {
	for _, w := range workloads {
		for _, sys := range []struct {
			name string
			open func(b *testing.B, w workload) decide
		}{
			{"balde-sqlite", func(b *testing.B, w workload) decide { return openBalde(b, w, sqlstore.SQLite) }},
			{"balde-postgres", func(b *testing.B, w workload) decide { return openBalde(b, w, sqlstore.Postgres) }},
			{"redis_rate", openRedisRate},
			{"ulule-redis", openUlule},
			{"sethvargo-memory", openSethvargo},
		} {
			if w.lease > 0 && !strings.HasPrefix(sys.name, "balde") {
				continue
			}
			b.Run(sys.name+"/"+w.name, func(b *testing.B) { measure(b, w, sys.open(b, w)) })
		}
	}
}

// measure runs b.N decisions over w.callers goroutines and reports
// decisions/s, the share refused and latency percentiles.
func measure(b *testing.B, w workload, op decide) {
	ctx := context.Background()
	keys := make([]string, min(w.keys, 1<<20))
	if w.keys <= len(keys) {
		for i := range keys {
			keys[i] = keyName(i)
		}
	}
	key := func() string {
		if w.keys == 1 {
			return keyName(0)
		}
		i := rand.IntN(w.keys)
		if i < len(keys) {
			return keys[i]
		}
		return keyName(i)
	}
	lats := make([][]time.Duration, w.callers)
	var next, refused, timedOut atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range w.callers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, b.N/w.callers+1)
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				ok, err := op(ctx, key())
				if errors.Is(err, throttle.ErrStoreTimeout) {
					// A bounded wait that ended (docs/decisions/0220):
					// counted, like a refusal, not a failed run.
					timedOut.Add(1)
					continue
				}
				if err != nil {
					failed.Store(err)
					return
				}
				lat = append(lat, time.Since(t))
				if !ok {
					refused.Add(1)
				}
			}
			lats[c] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(float64(len(all))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(100*float64(refused.Load())/float64(b.N), "refused-%")
	if n := timedOut.Load(); n > 0 {
		b.ReportMetric(100*float64(n)/float64(b.N), "timed-out-%")
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(0.999), "p99.9-µs")
	b.ReportMetric(0, "ns/op")
}

func keyName(i int) string { return fmt.Sprintf("u%07d", i) }

// benchPolicy is the policy of the admit-everything workloads.
const benchPolicy = "BENCH"

// openBalde is a limiter over a new database of engine through group
// commit, as balde runs it (balde.GroupCommitWriters: 1 writer on SQLite,
// 2 on PostgreSQL). The admit-everything workloads decide a token bucket
// with the ledger on (a row per decision, the DICT's and SIFEN's setting),
// over a table holding all of the workload's keys; the inbound workload
// decides seed 004's inbound limiter (web.Inbound's policies and ledger
// settings, NonDurable commits), on an empty table.
func openBalde(b *testing.B, w workload, engine sqlstore.Engine) decide {
	store := sqlstoretest.MustOpen(b, engine, nil)
	writers := 1
	if engine == sqlstore.Postgres {
		writers = 2
	}
	var (
		resolver throttle.Resolver
		cfg      throttle.Config
		target   throttle.Store = store
		policy                  = benchPolicy
		env                     = "prod"
	)
	if w.period == time.Minute {
		in, err := web.NewInbound(web.InboundConfig{IPLimit: w.limit, Window: w.period, Block: time.Nanosecond})
		if err != nil {
			b.Fatal(err)
		}
		resolver, policy, env = in.Policies(), web.PolicyInboundIP, web.DefaultInboundEnv
		cfg = throttle.Config{Ledger: throttle.LedgerNoTakes, SkipRefusalRows: true, Lease: w.lease}
		target = store.NonDurable()
	} else {
		resolver = throttle.Policies{benchPolicy: {Name: benchPolicy, Capacity: throttle.MaxTokens,
			RefillTokens: throttle.MaxTokens, RefillPeriod: time.Second}}
		populate(b, store, engine, w.keys)
	}
	g := throttle.NewGroupCommit(target, throttle.GroupCommitOptions{Writers: writers})
	b.Cleanup(func() { _ = g.Close() })
	lim, err := throttle.NewLimiter(g, resolver, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: policy, Env: env, Identifier: key}, Cost: 1})
		return d.Allowed, err
	}
}

// populate writes rows full buckets of benchPolicy in SQL.
func populate(b *testing.B, store *sqlstore.Store, engine sqlstore.Engine, rows int) {
	now := time.Now().UnixNano()
	q := fmt.Sprintf(`
		INSERT INTO balde_policies (id, name) VALUES (1, '%s');
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		INSERT INTO balde_buckets (policy_id, env, identifier, tokens, carry, refilled_at, send_count, severity)
		SELECT 1, 'prod', printf('u%%07d', i), %d, 0, %d, 0, 1 FROM n`, benchPolicy, rows-1, throttle.MaxTokens, now)
	if engine == sqlstore.Postgres {
		q = fmt.Sprintf(`
			INSERT INTO balde_policies (id, name) VALUES (1, '%s');
			INSERT INTO balde_buckets (policy_id, env, identifier, tokens, carry, refilled_at, send_count, severity)
			SELECT 1, 'prod', 'u' || lpad(i::text, 7, '0'), %d, 0, %d, 0, 1 FROM generate_series(0, %d) i;
			ANALYZE balde_buckets`, benchPolicy, throttle.MaxTokens, now, rows-1)
	}
	if _, err := store.DB().Exec(q); err != nil {
		b.Fatal(err)
	}
}

// redisClient is a client of the Redis on 127.0.0.1:6379 with a pool of
// callers connections, its database emptied; the benchmark skips without it.
func redisClient(b *testing.B, callers int) *redis.Client {
	addr := os.Getenv("BALDE_BENCH_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: callers})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		b.Skip("no Redis on ", addr, ": ", err)
	}
	return rdb
}

func openRedisRate(b *testing.B, w workload) decide {
	l := redis_rate.NewLimiter(redisClient(b, w.callers))
	limit := redis_rate.Limit{Rate: int(w.limit), Burst: int(w.limit), Period: w.period}
	return func(ctx context.Context, key string) (bool, error) {
		r, err := l.Allow(ctx, key, limit)
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
}

func openUlule(b *testing.B, w workload) decide {
	st, err := ululeredis.NewStore(redisClient(b, w.callers))
	if err != nil {
		b.Fatal(err)
	}
	l := ulule.New(st, ulule.Rate{Period: w.period, Limit: w.limit})
	return func(ctx context.Context, key string) (bool, error) {
		c, err := l.Get(ctx, key)
		return !c.Reached, err
	}
}

func openSethvargo(b *testing.B, w workload) decide {
	tokens, interval := uint64(w.limit), w.period
	if w.period == time.Second {
		// go-limiter refills a bucket, once per interval, with
		// interval/tokens tokens (not tokens): with 2^40 tokens a second a
		// bucket is empty after its first second. 2^30 tokens an hour is
		// never exhausted by a run and never refilled during one.
		tokens, interval = 1<<30, time.Hour
	}
	st, err := memorystore.New(&memorystore.Config{Tokens: tokens, Interval: interval})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close(context.Background()) })
	var _ golimiter.Store = st
	return func(ctx context.Context, key string) (bool, error) {
		_, _, _, ok, err := st.Take(ctx, key)
		return ok, err
	}
}
