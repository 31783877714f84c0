package balde_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// The instance tests re-execute the test binary: each child is one balde
// process on the parent's database, as serve (Engine.Run) or as
// `balde sifen-send --follow` (sifen.FollowDocuments), until its stdin
// closes. It prints READY, then its engine's log lines.
const (
	envInstance      = "BALDE_TEST_INSTANCE"       // "serve" or "follow"
	envInstanceDSN   = "BALDE_TEST_INSTANCE_DSN"   // the database
	envInstanceDict  = "BALDE_TEST_INSTANCE_DICT"  // the DICT simulator's URL ("": no DICT)
	envInstanceSifen = "BALDE_TEST_INSTANCE_SIFEN" // the SIFEN simulator's URL ("": no SIFEN)
	envInstanceEvery = "BALDE_TEST_INSTANCE_EVERY" // the period of prune and reconciliation ("": off)
)

// instanceParticipant is the ISPB the instances reconcile as.
const instanceParticipant = "12345678"

// TestInstanceChild is one instance of the instance tests (envInstance).
func TestInstanceChild(t *testing.T) {
	mode := os.Getenv(envInstance)
	if mode == "" {
		t.Skip("the child process of the instance tests")
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { // the parent closes stdin to stop the instance
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var out sync.Mutex // log lines and READY, whole lines on stdout
	logger := slog.New(slog.NewTextHandler(lineWriter{&out}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	jobs := balde.Jobs{SifenPollEvery: balde.Off, SifenResolveEvery: balde.Off, SeverityEvery: balde.Off,
		DictReconcileEvery: balde.Off, PruneEvery: balde.Off, DatabaseWatchEvery: balde.Off}
	if e := os.Getenv(envInstanceEvery); e != "" {
		d, err := time.ParseDuration(e)
		require.NoError(t, err)
		jobs.DictReconcileEvery, jobs.PruneEvery = d, d
	}
	cfg := balde.Config{DB: os.Getenv(envInstanceDSN), Logger: logger, Jobs: jobs}
	if u := os.Getenv(envInstanceDict); u != "" {
		cfg.Dict = &balde.DictConfig{BaseURL: u, Participant: instanceParticipant}
	}
	if u := os.Getenv(envInstanceSifen); u != "" {
		cfg.Sifen = &balde.SifenConfig{BaseURL: u}
		cfg.Jobs.SifenPollEvery = 5 * time.Millisecond
	}
	eng, err := balde.Open(ctx, cfg)
	require.NoError(t, err)
	defer eng.Close(context.Background())
	ready := func() {
		out.Lock()
		fmt.Println("READY")
		out.Unlock()
	}
	switch mode {
	case "serve":
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		select {
		case <-eng.Started():
			ready()
		case err := <-done:
			require.NoError(t, err)
		}
		require.NoError(t, <-done)
	case "follow":
		// `balde sifen-send --follow`, started again as soon as it ends.
		ready()
		cfg := sifen.BatchConfig{Sleep: func(ctx context.Context, d time.Duration) error {
			select { // a lot's wait, shortened: the test's lots are made due by the parent
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(d, 5*time.Millisecond)):
				return nil
			}
		}}
		for ctx.Err() == nil {
			if _, err := sifen.FollowDocuments(ctx, eng.Sifen(), nil, cfg); err != nil && ctx.Err() == nil {
				logger.Warn("follow", slog.Any("error", err))
			}
			_ = cfg.Sleep(ctx, 5*time.Millisecond)
		}
	default:
		t.Fatalf("unknown instance mode %q", mode)
	}
}

// lineWriter writes whole lines to stdout under a lock.
type lineWriter struct{ mu *sync.Mutex }

func (w lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return os.Stdout.Write(p)
}

// instance is a running child.
type instance struct {
	n      int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	ready  chan struct{}
}

// logLine is a line an instance logged, when the parent read it.
type logLine struct {
	instance int
	at       time.Time
	text     string
}

// instances are the children of one test and what they logged.
type instances struct {
	mu    sync.Mutex
	lines []logLine
	all   []*instance
}

// start starts a child in mode with the extra environment env.
func (is *instances) start(t *testing.T, mode string, env ...string) *instance {
	t.Helper()
	in := &instance{n: len(is.all), ready: make(chan struct{})}
	in.cmd = exec.Command(os.Args[0], "-test.run=^TestInstanceChild$", "-test.count=1")
	in.cmd.Env = append(append(os.Environ(), envInstance+"="+mode), env...)
	in.cmd.Stderr = &in.stderr
	stdout, err := in.cmd.StdoutPipe()
	require.NoError(t, err)
	in.stdin, err = in.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, in.cmd.Start())
	is.all = append(is.all, in)
	t.Cleanup(func() {
		if in.cmd.ProcessState == nil { // still running: ended by its pid
			_ = in.cmd.Process.Signal(syscall.SIGCONT)
			_ = in.cmd.Process.Kill()
			_ = waitfor.Cmd(t, in.cmd, 10*time.Second, "instance %d killed at cleanup", in.n)
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "READY" {
				close(in.ready)
				continue
			}
			is.mu.Lock()
			is.lines = append(is.lines, logLine{instance: in.n, at: time.Now(), text: sc.Text()})
			is.mu.Unlock()
		}
	}()
	return in
}

// waitReady waits for every child's READY.
func (is *instances) waitReady(t *testing.T) {
	t.Helper()
	for _, in := range is.all {
		waitfor.Recv(t, in.ready, time.Minute, "instance %d READY; stderr:\n%s", in.n, &in.stderr)
	}
}

// stop closes every running child's stdin and waits for it to end.
func (is *instances) stop(t *testing.T) {
	t.Helper()
	for _, in := range is.all {
		if in.cmd.ProcessState == nil {
			_ = in.stdin.Close()
		}
	}
	for _, in := range is.all {
		if in.cmd.ProcessState == nil {
			err := waitfor.Cmd(t, in.cmd, time.Minute, "instance %d stopping; stderr:\n%s", in.n, &in.stderr)
			require.NoError(t, err, "instance %d; stderr:\n%s", in.n, &in.stderr)
		}
	}
}

// matching returns the lines containing msg, in the order they were read.
func (is *instances) matching(msg string) []logLine {
	is.mu.Lock()
	defer is.mu.Unlock()
	var out []logLine
	for _, l := range is.lines {
		if strings.Contains(l.text, msg) {
			out = append(out, l)
		}
	}
	return out
}

// counter records when requests matching it reached a simulator.
type counter struct {
	mu  sync.Mutex
	at  map[string][]time.Time
	key func(r *http.Request, body []byte) string // "" counts nothing
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if k := c.key(r, body); k != "" {
			c.mu.Lock()
			c.at[k] = append(c.at[k], time.Now())
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (c *counter) times(k string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at[k])
}

// lotNumberRE finds the lot a siResultLoteDE asks about.
var lotNumberRE = regexp.MustCompile(`<(?:\w+:)?dProtConsLote>\s*(\d+)\s*<`)

// TestInstancesQueryEachDueLotOnce: three instances on one database — two
// serve (lot polling every 5 ms) and one `sifen-send --follow` started
// again and again — and 20 times six lots made due at one instant. SIFEN
// (sifensim) is asked about each lot once: a lot is claimed on its
// schedule before it is queried (docs/decisions/0170). Before the claim
// each lot was asked about by up to every instance.
func TestInstancesQueryEachDueLotOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes per engine")
	}
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		const trials, lots, nInstances = 20, 6, 3
		ctx := t.Context()
		dsn := sqlstoretest.DSN(t, engine)
		quiet := slog.New(slog.DiscardHandler)
		sim, err := sifensim.NewServer(sifensim.Config{Processing: -1, Interval: -1, Logger: quiet})
		require.NoError(t, err)
		queries := &counter{at: map[string][]time.Time{}, key: func(_ *http.Request, body []byte) string {
			if m := lotNumberRE.FindSubmatch(body); m != nil {
				return string(m[1])
			}
			return ""
		}}
		srv := httptest.NewServer(queries.wrap(sim))
		t.Cleanup(srv.Close)
		sifenURL := srv.URL + "/{env}"

		eng, err := balde.Open(ctx, balde.Config{DB: dsn, Sifen: &balde.SifenConfig{BaseURL: sifenURL}})
		require.NoError(t, err)
		defer eng.Close(context.WithoutCancel(ctx))

		var is instances
		env := []string{envInstanceDSN + "=" + dsn, envInstanceSifen + "=" + sifenURL}
		is.start(t, "serve", env...)
		is.start(t, "serve", env...)
		is.start(t, "follow", env...)
		is.waitReady(t)

		perLot := map[int]int{} // queries per lot -> lots
		for trial := range trials {
			var numbers []string
			var ids []int64
			for l := range lots {
				ruc := strconv.Itoa(1_000_000 + trial*lots + l) // one RUC per lot: no interval to wait
				docs, err := eng.Sifen().Import(ctx, sifentest.Lote(sifentest.Docs(ruc, 1, 2)...), sifen.EnvTest)
				require.NoError(t, err)
				out, err := eng.Sifen().Send(ctx, docs[0].ID, docs[1].ID)
				require.NoError(t, err)
				require.Equal(t, sifen.OutcomeSent, out.Status, out.Message)
				numbers = append(numbers, out.LotNumber)
				ids = append(ids, docs[0].ID, docs[1].ID)
			}
			// The six lots' first query, ten minutes after the send, falls due now.
			q, args, err := sqlx.In(`UPDATE balde_document_lots SET next_query_at = ? WHERE lot_number IN (?)`, time.Now().UnixNano(), numbers)
			require.NoError(t, err)
			_, err = eng.Store().DB().ExecContext(ctx, eng.Store().DB().Rebind(q), args...)
			require.NoError(t, err)
			waitfor.Until(t, time.Minute, func() bool {
				for _, id := range ids {
					if d, err := eng.Sifen().Get(ctx, id); err != nil || d.Status != sifen.StatusApproved {
						return false
					}
				}
				return true
			}, "trial %d: the lots' documents approved by the instances", trial)
			time.Sleep(50 * time.Millisecond) // ten poll periods: a late duplicate query lands
			for _, n := range numbers {
				perLot[len(queries.times(n))]++
			}
		}
		is.stop(t)
		t.Logf("%s: lots by number of queries at sifensim: %v", engine, perLot)
		require.Equal(t, map[int]int{1: trials * lots}, perLot, "every lot asked about once (lots by number of queries)")
	})
}

// TestInstancesRunJobsOncePerPeriod: three serve instances on one
// database with prune and DICT reconciliation every second. Over six
// periods the DICT simulator receives one GET /policies/ per period and
// the instances prune once per period, not three times; an instance
// stopped (SIGSTOP) just after its prune, and another killed just after
// its reconciliation, hand the next turn to another instance within one
// period (docs/decisions/0171).
func TestInstancesRunJobsOncePerPeriod(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes per engine")
	}
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		const every, window = time.Second, 6
		dsn := sqlstoretest.DSN(t, engine)
		ds, err := dictsim.NewServer(t.Context(), dictsim.Config{Category: "A", Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		lists := &counter{at: map[string][]time.Time{}, key: func(r *http.Request, _ []byte) string {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/policies/") {
				return "list"
			}
			return ""
		}}
		dh := httptest.NewServer(lists.wrap(ds))
		t.Cleanup(func() { dh.Close(); ds.Close() })

		var is instances
		env := []string{envInstanceDSN + "=" + dsn, envInstanceDict + "=" + dh.URL, envInstanceEvery + "=" + every.String()}
		for range 3 {
			is.start(t, "serve", env...)
		}
		is.waitReady(t)

		// Six periods with the three running, after a first period to start.
		time.Sleep(every + every/2)
		from := time.Now()
		time.Sleep(window * every)
		to := time.Now()
		prunes := countBetween(is.matching("msg=pruned"), from, to)
		reconciles := 0
		for _, at := range lists.times("list") {
			if !at.Before(from) && at.Before(to) {
				reconciles++
			}
		}
		t.Logf("%s: in %d periods of %s: %d prunes, %d GET /policies/ at the DICT", engine, window, every, prunes, reconciles)
		// Once per period across instances is the upper bound. The lower
		// one only says the jobs run: on a loaded machine a process can
		// miss a tick (seen: 3 of 6 at a load of 35 on 2 cores).
		require.LessOrEqual(t, prunes, window+1, "prunes in %d periods", window)
		require.GreaterOrEqual(t, prunes, window/2, "prunes in %d periods", window)
		require.LessOrEqual(t, reconciles, window+1, "GET /policies/ in %d periods", window)
		require.GreaterOrEqual(t, reconciles, window/2, "GET /policies/ in %d periods", window)

		// The instance that pruned last stops (a quarter period later, out
		// of any transaction: a SQLite writer stopped inside one stops
		// every process); the next prune is another's, within one period
		// of the stopped one's turn.
		last := lastOf(is.matching("msg=pruned"))
		stopped := is.all[last.instance]
		time.Sleep(time.Until(last.at.Add(every / 4)))
		require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGSTOP))
		next := waitNext(t, &is, "msg=pruned", last.at, 4*every)
		require.NotEqual(t, last.instance, next.instance)
		t.Logf("%s: instance %d stopped after its prune; the next prune, instance %d's, %s after it", engine, last.instance, next.instance, next.at.Sub(last.at))
		require.Less(t, next.at.Sub(last.at), 2*every+every/2, "the stopped instance's turn taken by another within one period")

		// The instance that reconciled last is killed; the next GET
		// /policies/ comes within one period of its turn.
		lastRec := lastOf(is.matching("reconciled"))
		if lastRec.instance == last.instance { // the stopped one cannot be the one killed
			waitNext(t, &is, "reconciled", lastRec.at, 4*every)
			lastRec = lastOf(is.matching("reconciled"))
		}
		killed := is.all[lastRec.instance]
		require.NoError(t, killed.cmd.Process.Kill())
		_ = waitfor.Cmd(t, killed.cmd, 10*time.Second, "killed instance %d", killed.n)
		nextRec := waitNext(t, &is, "reconciled", lastRec.at, 4*every)
		t.Logf("%s: instance %d killed after its reconciliation; the next one, instance %d's, %s after it", engine, lastRec.instance, nextRec.instance, nextRec.at.Sub(lastRec.at))
		require.Less(t, nextRec.at.Sub(lastRec.at), 2*every+every/2, "the killed instance's turn taken by another within one period")

		require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGCONT))
		is.stop(t)
	})
}

// countBetween counts the lines read within [from, to).
func countBetween(lines []logLine, from, to time.Time) int {
	n := 0
	for _, l := range lines {
		if !l.at.Before(from) && l.at.Before(to) {
			n++
		}
	}
	return n
}

func lastOf(lines []logLine) logLine {
	if len(lines) == 0 {
		return logLine{instance: -1}
	}
	return lines[len(lines)-1]
}

// waitNext waits up to d for a line with msg read after after.
func waitNext(t *testing.T, is *instances, msg string, after time.Time, d time.Duration) logLine {
	t.Helper()
	var got logLine
	waitfor.Until(t, d, func() bool {
		for _, l := range is.matching(msg) {
			if l.at.After(after) {
				got = l
				return true
			}
		}
		return false
	}, "a line %q after %s", msg, after.Format(time.RFC3339Nano))
	return got
}
