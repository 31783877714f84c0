package jobs

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// threeTurns are three processes' turns (a store each: on SQLite a write
// connection each, as three processes have) on one new database.
func threeTurns(t *testing.T, engine sqlstore.Engine, clock throttle.Clock) []*Turns {
	dsn := sqlstoretest.DSN(t, engine)
	var out []*Turns
	for range 3 {
		out = append(out, NewTurns(sqlstoretest.MustOpenDSN(t, dsn, clock), slog.New(slog.DiscardHandler)))
	}
	return out
}

// Three processes that find a job's turn due at the same instant run it
// once, 20 periods in a row; the first turn falls due one period after
// the first look, and a look before the turn runs nothing and says how
// long to wait.
func TestTurnsRunOncePerPeriodAcrossProcesses(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := t.Context()
		clock := throttle.NewManualClock(throttletest.Epoch)
		procs := threeTurns(t, engine, clock.Now)
		const period = time.Hour
		notDue := func() { t.Error("a turn ran before it was due") }
		wait, err := procs[0].turn(ctx, "prune", period, notDue)
		require.NoError(t, err)
		require.Equal(t, period, wait, "the first turn: one period after the first look")

		var runs atomic.Int64
		for trial := range 20 {
			clock.Advance(period / 2)
			for _, p := range procs {
				wait, err := p.turn(ctx, "prune", period, notDue)
				require.NoError(t, err)
				require.Equal(t, period/2, wait)
			}
			clock.Advance(period / 2)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, p := range procs {
				wg.Go(func() {
					<-start
					_, err := p.turn(ctx, "prune", period, func() { runs.Add(1) })
					assert.NoError(t, err)
				})
			}
			close(start)
			waitfor.Group(t, &wg, time.Minute, "trial %d: three processes taking the turn", trial)
			require.Equal(t, int64(trial+1), runs.Load(), "trial %d: runs so far", trial)
		}
	})
}

// A process stopped during its turn (its lease not extended) hands the
// next turn to another one period after it took its own: not before.
func TestTurnsOfAStoppedProcessPassWithinOnePeriod(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := t.Context()
		clock := throttle.NewManualClock(throttletest.Epoch)
		procs := threeTurns(t, engine, clock.Now)
		const period = time.Hour // its half, the extension's tick, never comes in the test
		_, err := procs[0].turn(ctx, "reconcile", period, func() {})
		require.NoError(t, err)
		clock.Advance(period)

		stopped, release := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := procs[0].turn(ctx, "reconcile", period, func() { close(stopped); <-release })
			assert.NoError(t, err)
		}()
		waitfor.Recv(t, stopped, time.Minute, "the first process's turn")
		clock.Advance(period - time.Nanosecond)
		ran := false
		wait, err := procs[1].turn(ctx, "reconcile", period, func() { ran = true })
		require.NoError(t, err)
		require.False(t, ran, "the stopped process's lease still runs")
		require.Equal(t, time.Nanosecond, wait)
		clock.Advance(time.Nanosecond)
		_, err = procs[2].turn(ctx, "reconcile", period, func() { ran = true })
		require.NoError(t, err)
		require.True(t, ran, "its lease ended: the turn passes")
		close(release)
		waitfor.Recv(t, done, time.Minute, "the stopped process's turn ending")
	})
}

// A turn longer than its period keeps its lease (extended every half
// period): no other process starts the job meanwhile, and the next turn
// is taken within one period of its end.
func TestTurnsLongerThanThePeriodAreNotOverlapped(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := t.Context()
		procs := threeTurns(t, engine, throttle.SystemClock)
		const period = 400 * time.Millisecond
		_, err := procs[0].turn(ctx, "prune", period, func() {})
		require.NoError(t, err)
		var running, overlaps, others atomic.Int64
		var ended atomic.Int64 // when the long turn ended, ns
		long := make(chan struct{})
		go func() {
			defer close(long)
			for {
				won := false
				wait, err := procs[0].turn(ctx, "prune", period, func() {
					won = true
					running.Store(1)
					time.Sleep(3 * period / 2)
					running.Store(0)
					ended.Store(time.Now().UnixNano())
				})
				if err != nil || won {
					return
				}
				time.Sleep(wait)
			}
		}()
		waitfor.Until(t, 30*time.Second, func() bool { return running.Load() == 1 }, "the long turn")
		var wg sync.WaitGroup
		for _, p := range procs[1:] {
			wg.Go(func() {
				for ctx.Err() == nil && others.Load() == 0 {
					if _, err := p.turn(ctx, "prune", period, func() {
						if running.Load() == 1 {
							overlaps.Add(1)
						}
						others.Add(1)
					}); err != nil {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		waitfor.Group(t, &wg, 30*time.Second, "another process's turn after the long one")
		waitfor.Recv(t, long, 30*time.Second, "the long turn ending")
		require.Zero(t, overlaps.Load(), "turns started while the long one ran")
		require.NotZero(t, ended.Load())
		require.Less(t, time.Since(time.Unix(0, ended.Load())), period+period/2, "the next turn within one period of the long one's end")
	})
}
