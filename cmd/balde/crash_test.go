package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// crashKills is how many times TestCrashSifenSend kills sifen-send per
// engine: 3 in make test, 50 under make reliability (BALDE_CRASH_KILLS
// overrides).
func crashKills(t *testing.T) int {
	if v := os.Getenv("BALDE_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	if reliabilityLong() {
		return 50
	}
	return 3
}

// TestCrashSifenSend kills sifen-send with SIGKILL at random instants
// while it sends lots of several RUCs to a simulator that answers after a
// random delay, on SQLite and PostgreSQL, then recovers (the runs after
// the claims are old enough settle what was left in "sending"). Every
// document reaches SIFEN exactly once (0 sent twice, 0 lost), none is left
// unsettled, and the ledger explains every bucket (throttle.Replay).
func TestCrashSifenSend(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		kills := crashKills(t)
		var arrivals atomic.Int64
		sim := startSifenSim(t, sifensim.Config{
			Interval: 10 * time.Millisecond,
			BeforeRecepcion: func(ctx context.Context, _ sifensim.Recepcion) error {
				arrivals.Add(1)
				select { // a random answer time widens the window a kill can hit
				case <-time.After(time.Duration(rand.IntN(60)) * time.Millisecond):
				case <-ctx.Done():
				}
				return nil
			},
		})
		db := sqlstoretest.DSN(t, engine)
		dir := t.TempDir()
		var cdcs []string
		// One lot per RUC, two RUCs per kill: the kills never run out of
		// lots to interrupt.
		rucs, perRUC := max(6, 2*kills), 5
		for i := range rucs {
			lot, c := sifenLot(fmt.Sprintf("8%07d", 2000+i), 1, perRUC)
			writeFile(t, dir, fmt.Sprintf("r%d.xml", i), lot)
			cdcs = append(cdcs, c...)
		}
		args := []string{"sifen-send", "--env", "test", "--db", db, "--sifen-url", sim.URL, "--json", dir}

		killed, finished := 0, 0
		for i := range kills {
			child := childCommand(t, time.Time{}, args...)
			child.Env = append(child.Env, "SIFEN_THROTTLE_SECONDS=0.02")
			var out, errOut strings.Builder
			child.Stdout, child.Stderr = &out, &errOut
			seen := arrivals.Load()
			require.NoError(t, child.Start())
			exited := make(chan error, 1)
			go func() { exited <- child.Wait() }()
			// Kill once this run is sending (a lot reached SIFEN) at a
			// random instant up to 150 ms after: before, during or after a
			// lot's request and its answer.
			deadline := time.Now().Add(10 * time.Second)
			for arrivals.Load() == seen && time.Now().Before(deadline) && len(exited) == 0 {
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
			_ = child.Process.Kill()
			err := waitfor.Recv(t, exited, 30*time.Second, "sifen-send run %d exiting", i)
			if err != nil && strings.Contains(err.Error(), "killed") {
				killed++
			} else {
				finished++
			}
		}

		// What the killed runs got to SIFEN before recovery: the kills hit
		// between lots and in the middle of them.
		queuedBefore := len(sim.queuedCounts())
		sendingBefore := documentStatuses(t, db)["sending"]

		// Recovery: later, once every claim is old enough to resolve.
		later := newFakeTime(time.Now().Add(time.Minute + sifen.DefaultResolveAfter))
		env := map[string]string{"SIFEN_THROTTLE_SECONDS": "0.02"}
		var sum summary
		for run := 0; run < 3; run++ {
			code, stdout, stderr := runIn(context.Background(), later, "", env, args...)
			require.NotEmpty(t, stdout, "recovery run %d exited %d: %s", run, code, stderr)
			_, sum = jsonLines[sifenRecord](t, stdout)
			if code == ExitOK && sum.Sent == 0 && sum.Blocked == 0 {
				break
			}
			later.Advance(sifen.DefaultResolveAfter)
		}
		require.Equal(t, len(cdcs), sum.Skipped, "everything done in the end: %+v", sum)

		queued := sim.queuedCounts()
		twice, lost := 0, 0
		for _, c := range cdcs {
			switch n := queued[c]; {
			case n == 0:
				lost++
			case n > 1:
				twice++
			}
		}
		statuses := documentStatuses(t, db)
		buckets := replayAllBuckets(t, db, 20*time.Millisecond)
		t.Logf("%s: %d kills (%d runs finished first); before recovery %d of %d documents had reached SIFEN and %d were left in sending; "+
			"after: %d sent twice, %d lost; statuses %v; %d buckets explained by their ledger",
			engine, killed, finished, queuedBefore, len(cdcs), sendingBefore, twice, lost, statuses, buckets)
		require.Zero(t, twice, "documents sent twice")
		require.Zero(t, lost, "documents lost")
		require.Zero(t, statuses["sending"]+statuses["draft"], "documents left unsettled: %v", statuses)
		require.Positive(t, buckets)
	})
}

// replayAllBuckets replays the whole ledger of every bucket in db against
// its policy (throttle.Replay; SIFEN's with the cooldown sifenThrottle the
// runs had) and returns how many it checked.
func replayAllBuckets(t *testing.T, db string, sifenThrottle time.Duration) int {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DB = db
	cfg.SifenThrottle = sifenThrottle
	eng, err := openEngine(context.Background(), cfg, engineOptions{Logger: discardLogger})
	require.NoError(t, err)
	defer eng.close(context.Background())
	ctx := context.Background()
	n := 0
	f := throttle.Filter{Limit: throttle.MaxPageSize}
	for {
		page, err := eng.limiter.List(ctx, f)
		require.NoError(t, err)
		for _, st := range page.States {
			key := st.Key
			var entries []throttle.LedgerEntry
			q := throttle.LedgerQuery{Key: &key, Limit: throttle.MaxPageSize}
			for {
				es, err := eng.limiter.Ledger(ctx, q)
				require.NoError(t, err)
				entries = append(entries, es...)
				if len(es) < q.Limit {
					break
				}
				q.BeforeID = es[len(es)-1].ID
			}
			for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
				entries[i], entries[j] = entries[j], entries[i]
			}
			_, err := throttle.Replay(st.Policy, entries)
			require.NoError(t, err, "bucket %s", key)
			n++
		}
		if page.Next == "" {
			return n
		}
		after, err := throttle.DecodeCursor(page.Next)
		require.NoError(t, err)
		f.After = after
	}
}
