package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// crashKills is how many times the crash tests kill their process per
// engine (real kills: a run that ended before its kill does not count): 3
// in make test, 50 under make reliability (BALDE_CRASH_KILLS overrides).
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
// random delay, on SQLite and PostgreSQL, until it has been killed
// crashKills times (a run that ends before its kill is not counted: the
// next run gets two more lots), then recovers (the runs after the claims
// are old enough settle what was left in "sending"). Every document
// reaches SIFEN exactly once (0 sent twice, 0 lost), none is left
// unsettled, and the ledger explains every bucket (throttle.Replay).
func TestCrashSifenSend(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
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
		// One lot per RUC, two new RUCs before each run: the kills never
		// run out of lots to interrupt.
		const perRUC = 5
		rucs := 0
		addLots := func(n int) {
			for range n {
				lot, c := sifenLot(fmt.Sprintf("8%07d", 2000+rucs), 1, perRUC)
				writeFile(t, dir, fmt.Sprintf("r%03d.xml", rucs), lot)
				cdcs = append(cdcs, c...)
				rucs++
			}
		}
		addLots(4)
		args := []string{"sifen-send", "--env", "test", "--db", db, "--sifen-url", sim.URL, "--json", dir}

		killed, finished := 0, 0
		for i := 0; killed < kills; i++ {
			require.Less(t, i, 3*kills+10, "%d runs for %d kills: the runs end before their kill", i, killed)
			addLots(2)
			child := childCommand(t, time.Time{}, args...)
			child.Env = append(child.Env, "SIFEN_THROTTLE_SECONDS=0.02")
			var out, errOut strings.Builder
			child.Stdout, child.Stderr = &out, &errOut
			// Kill once this run is sending (a lot reached SIFEN) at a
			// random instant up to 150 ms after: before, during or after a
			// lot's request and its answer.
			if killAfterArrival(t, child, &arrivals, 150*time.Millisecond, fmt.Sprintf("sifen-send run %d", i)) {
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
		var sum report.Summary
		var lastOut string
		for run := 0; run < 3; run++ {
			code, stdout, stderr := runIn(context.Background(), later, "", env, args...)
			lastOut = stdout
			require.NotEmpty(t, stdout, "recovery run %d exited %d: %s", run, code, stderr)
			_, sum = jsonLines[report.SifenRecord](t, stdout)
			if code == ExitOK && sum.Sent == 0 && sum.Blocked == 0 {
				break
			}
			// A document SIFEN says it never received is sent again only
			// once it has been not found for DefaultNotFoundAfter.
			later.Advance(sifen.DefaultNotFoundAfter + sifen.DefaultResolveAfter)
		}
		require.Equal(t, len(cdcs), sum.Skipped, "everything done in the end: %+v\n%s", sum, lastOut)

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
	cfg := settings.Default()
	cfg.DB = db
	cfg.SifenThrottle = sifenThrottle
	return len(replayAllLedgers(t, cfg))
}

// replayAllLedgers replays the whole ledger of every bucket of cfg.DB
// against its policy as cfg resolves it (throttle.Replay) and returns each
// bucket's entries, oldest first.
func replayAllLedgers(t *testing.T, cfg settings.Settings) map[throttle.Key][]throttle.LedgerEntry {
	t.Helper()
	eng, err := openEngine(context.Background(), cfg, balde.Config{Logger: discardLogger})
	require.NoError(t, err)
	defer eng.Close(context.Background())
	ctx := context.Background()
	all := make(map[throttle.Key][]throttle.LedgerEntry)
	f := inspect.Filter{Limit: inspect.MaxPageSize}
	for {
		page, err := eng.Reader().List(ctx, f)
		require.NoError(t, err)
		for _, st := range page.States {
			key := st.Key
			var entries []throttle.LedgerEntry
			q := inspect.LedgerQuery{Key: &key, Limit: inspect.MaxPageSize}
			for {
				es, err := eng.Reader().Ledger(ctx, q)
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
			all[key] = entries
		}
		if page.Next == "" {
			return all
		}
		after, err := inspect.DecodeCursor(page.Next)
		require.NoError(t, err)
		f.After = after
	}
}

// TestCrashServe kills serve (a child process) with SIGKILL at random
// instants while a person uploads invoices and presses Send, restarts it,
// and goes on; then sifen-send, on a clock past the time after which
// claims are resolved, settles what was left in "sending" by asking SIFEN
// and sends the rest. Every invoice reaches SIFEN exactly once and the
// ledger explains every bucket.
func TestCrashServe(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		kills := crashKills(t)
		var arrivals atomic.Int64
		sim := startSifenSim(t, sifensim.Config{
			Interval: 10 * time.Millisecond,
			BeforeRecepcion: func(ctx context.Context, _ sifensim.Recepcion) error {
				arrivals.Add(1)
				select {
				case <-time.After(time.Duration(rand.IntN(60)) * time.Millisecond):
				case <-ctx.Done():
				}
				return nil
			},
		})
		db := sqlstoretest.DSN(t, engine)
		const perRound = 4 // one invoice per RUC: the last start's standing clock admits each once
		var ids, cdcs []string
		var docs []sifentest.Doc
		for round := range kills {
			sc := startServeChild(t, db, sim.URL, time.Time{})
			web := newAdminClient(t, sc.url, "admin", "pw")
			for i := range perRound {
				d := sifentest.Docs(fmt.Sprintf("8%07d", 3000+round*perRound+i), 1, 1)[0]
				docs = append(docs, d)
				resp, body := web.upload(d.File(), "test")
				require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
				ids = append(ids, strings.TrimPrefix(resp.Header.Get("Location"), "/documents/"))
				cdcs = append(cdcs, d.CDC())
			}
			seen := arrivals.Load()
			go func() { // presses Send on every invoice of the round until serve dies
				for _, id := range ids[len(ids)-perRound:] {
					req, _ := http.NewRequest(http.MethodPost, sc.url+"/documents/"+id+"/send", strings.NewReader(""))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.SetBasicAuth("admin", "pw")
					if resp, err := web.http.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			}()
			waitfor.Until(t, 10*time.Second, func() bool { return arrivals.Load() > seen }, "round %d: a lot reaching SIFEN", round)
			time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
			sc.kill(t)
		}
		queuedBefore, sendingBefore := len(sim.queuedCounts()), documentStatuses(t, db)["sending"]

		// Recovery, on a clock past the resolve time (serve runs on the
		// system clock, so sifen-send does it, over the same invoices as
		// files): what was left in "sending" is settled by asking SIFEN,
		// what SIFEN never received goes back to draft once not found for
		// DefaultNotFoundAfter, and drafts are sent.
		dir := t.TempDir()
		for i, d := range docs {
			writeFile(t, dir, fmt.Sprintf("%03d.xml", i), d.File())
		}
		later := newFakeTime(time.Now().Add(time.Hour + sifen.DefaultResolveAfter))
		var sum report.Summary
		var lastOut string
		for run := 0; run < 3; run++ {
			code, stdout, stderr := runIn(context.Background(), later, "", map[string]string{"SIFEN_THROTTLE_SECONDS": "0.02"},
				"sifen-send", "--env", "test", "--db", db, "--sifen-url", sim.URL, "--json", dir)
			require.NotEmpty(t, stdout, "recovery run %d exited %d: %s", run, code, stderr)
			lastOut = stdout
			_, sum = jsonLines[report.SifenRecord](t, stdout)
			if code == ExitOK && sum.Sent == 0 && sum.Blocked == 0 {
				break
			}
			later.Advance(sifen.DefaultNotFoundAfter + sifen.DefaultResolveAfter)
		}
		require.Equal(t, len(cdcs), sum.Skipped, "everything done in the end: %+v\n%s", sum, lastOut)

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
		t.Logf("%s: serve killed %d times; before recovery %d of %d invoices had reached SIFEN and %d were left in sending; "+
			"after: %d sent twice, %d lost; statuses %v; %d buckets explained by their ledger",
			engine, kills, queuedBefore, len(cdcs), sendingBefore, twice, lost, statuses, buckets)
		require.Zero(t, twice, "invoices sent twice")
		require.Zero(t, lost, "invoices lost")
		require.Zero(t, statuses["sending"]+statuses["draft"], "invoices left unsettled: %v", statuses)
	})
}

// killAfterArrival starts child, waits (at most 10 s, or until it exits)
// for arrivals to move — a request of the run reached the simulator —,
// lets it run a random instant up to within, then kills it with SIGKILL.
// It reports whether the kill ended the run (false: it had ended before).
func killAfterArrival(t *testing.T, child *exec.Cmd, arrivals *atomic.Int64, within time.Duration, what string) bool {
	t.Helper()
	seen := arrivals.Load()
	require.NoError(t, child.Start())
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for arrivals.Load() == seen && time.Now().Before(deadline) && len(exited) == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(time.Duration(rand.Int64N(int64(within))))
	_ = child.Process.Kill()
	err := waitfor.Recv(t, exited, 30*time.Second, "%s exiting", what)
	return err != nil && strings.Contains(err.Error(), "killed")
}

// serveChild is "balde serve" in a child process.
type serveChild struct {
	cmd    *exec.Cmd
	url    string
	exited chan error
	stderr syncBuffer
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServeChild starts serve on db in a child process and waits until it
// listens. (at is passed to childCommand; serve itself runs on the system
// clock.)
func startServeChild(t *testing.T, db, sifenURL string, at time.Time) *serveChild {
	t.Helper()
	return startServeProcess(t, at, []string{"BALDE_ADMIN_PASSWORD=pw", "BALDE_INBOUND_IP_LIMIT=0", "SIFEN_THROTTLE_SECONDS=0.02"},
		"--db", db, "--sifen-url", sifenURL)
}

// startServeProcess starts "balde serve --addr 127.0.0.1:0 args…" in a
// child process with env added to the test's, and waits until it listens.
func startServeProcess(t *testing.T, at time.Time, env []string, args ...string) *serveChild {
	t.Helper()
	cmd := childCommand(t, at, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	sc := &serveChild{cmd: cmd, exited: make(chan error, 1)}
	cmd.Stderr = &sc.stderr
	require.NoError(t, cmd.Start())
	urls := make(chan string, 1)
	go func() {
		sc2 := bufio.NewScanner(stdout)
		for sc2.Scan() {
			if m := listeningLine.FindStringSubmatch(sc2.Text()); m != nil {
				urls <- m[1]
			}
		}
		sc.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc.url = waitfor.Recv(t, urls, 20*time.Second, "serve child listening; stderr:\n%s", &sc.stderr)
	return sc
}

// kill sends SIGKILL and waits for the child to be gone.
func (sc *serveChild) kill(t *testing.T) {
	t.Helper()
	_ = sc.cmd.Process.Kill()
	waitfor.Recv(t, sc.exited, 20*time.Second, "serve child exiting after SIGKILL")
}
