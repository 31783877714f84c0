package main

// The reliability suite (issue 13): store faults, a soak and crashes, each
// short in make test and long under make reliability, which sets
// BALDE_RELIABILITY=1 (and BALDE_SOAK_DURATION, BALDE_FAULT_DURATION,
// BALDE_CRASH_KILLS to override the long sizes). Figures are logged with
// t.Logf and written to docs/RELIABILITY.md by hand.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/csv"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// reliabilityLong reports whether the long versions run (make reliability).
func reliabilityLong() bool { return os.Getenv("BALDE_RELIABILITY") != "" }

// sized returns long under make reliability (or the duration in env when
// set), short otherwise.
func sized(t *testing.T, env string, short, long time.Duration) time.Duration {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, env)
		return d
	}
	if reliabilityLong() {
		return long
	}
	return short
}

// statusCounts counts HTTP answers by status, and transport errors as 0.
type statusCounts struct {
	mu sync.Mutex
	m  map[int]int
}

func (s *statusCounts) add(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[int]int)
	}
	s.m[code]++
}

func (s *statusCounts) snapshot() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// probeClient answers within a deadline (a hang is a failure, counted 0).
var probeClient = &http.Client{Timeout: 10 * time.Second}

func getStatus(u, user, pw string) (int, string, time.Duration) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, "", 0
	}
	if user != "" {
		req.SetBasicAuth(user, pw)
	}
	start := time.Now()
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, "", time.Since(start)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, resp.Header.Get("Retry-After"))
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		_ = n
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String(), time.Since(start)
}

// terminatePostgres ends every session whose application_name is app with
// pg_terminate_backend (the test's own sessions only; the server and other
// tests are left alone) and returns how many.
func terminatePostgres(db *sql.DB, app string) (int, error) {
	var n int
	err := db.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n)
	return n, err
}

// TestStoreFaultsPostgres: serve and a dict-lookup batch on PostgreSQL
// while every session of theirs is terminated every 30 ms. Users see 200
// or 503 with Retry-After, never a 500 or a hang; readiness recovers by
// itself; the batch processes every key (issue 13 saw it stop after 22 of
// 400 with 57P01).
func TestStoreFaultsPostgres(t *testing.T) {
	base := os.Getenv(sqlstoretest.PostgresEnv)
	if base == "" {
		t.Skip(sqlstoretest.PostgresEnv + " not set")
	}
	run := sized(t, "BALDE_FAULT_DURATION", 3*time.Second, 60*time.Second)
	app := fmt.Sprintf("balde_faults_%d", time.Now().UnixNano())
	u, err := url.Parse(sqlstoretest.PostgresSchema(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	dsn := u.String()

	sim := startDictSim(t, "A", false)
	sm := runServeMain(t, map[string]string{"BALDE_DB": dsn, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "10000", "BALDE_INBOUND_WINDOW": "1s",
		"BALDE_DICT_URL": sim.URL(), "BALDE_DICT_PARTICIPANT": "12345678"})

	admin := sqlOpen(t, base)
	ctx, stop := context.WithTimeout(context.Background(), run)
	defer stop()
	var kills, killed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { // the fault: every 30 ms
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n, err := terminatePostgres(admin, app); err == nil {
				kills.Add(1)
				killed.Add(int64(n))
			}
		}
	})
	var web, ready statusCounts
	var readyDown time.Duration // longest run of failed probes
	var badRetryAfter atomic.Int64
	for range 4 { // web traffic: each request is an inbound decision and a read
		wg.Go(func() {
			for ctx.Err() == nil {
				code, retry, _ := getStatus(sm.url+"/api/buckets?policy=INBOUND_IP", "admin", "pw")
				web.add(code)
				if code == http.StatusServiceUnavailable && retry == "" {
					badRetryAfter.Add(1)
				}
			}
		})
	}
	wg.Go(func() { // a probe every 100 ms
		var downSince time.Time
		for ctx.Err() == nil {
			code, _, _ := getStatus(sm.url+"/readyz", "", "")
			ready.add(code)
			switch {
			case code != http.StatusOK && downSince.IsZero():
				downSince = time.Now()
			case code == http.StatusOK && !downSince.IsZero():
				readyDown = max(readyDown, time.Since(downSince))
				downSince = time.Time{}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The batch: dict-lookup over 400 keys, in this process, on its own
	// store (as a separate process would be). It starts with the faults and
	// is not interrupted when they stop: it must go through every key.
	const keys = 400
	var batchCode int
	var batchOut, batchErr string
	batchCtx, batchStop := context.WithTimeout(context.Background(), run+time.Minute)
	defer batchStop()
	wg.Go(func() {
		batchCode, batchOut, batchErr = runIn(batchCtx, nil, "", nil, "dict-lookup", "--db", dsn, "--dict-url", sim.URL(),
			"--dict-participant", "12345678", "--dict-category", "A", "--no-wait", "--json", keysFile(t, keys))
	})
	waitfor.Group(t, &wg, run+2*time.Minute, "the fault loop, the web traffic and the batch")

	// Service returns by itself once the faults stop.
	waitfor.Until(t, 5*time.Second, func() bool {
		code, _, _ := getStatus(sm.url+"/readyz", "", "")
		return code == http.StatusOK
	}, "readiness after the faults stopped")

	var items []dictlookup.LookupRecord
	var sum report.Summary
	if batchOut != "" {
		items, sum = jsonLines[dictlookup.LookupRecord](t, batchOut)
	}
	t.Logf("PostgreSQL faults for %s: %d terminations (%d sessions); web %v; readiness %v (longest failing run %s); batch exit %d, %+v",
		run, kills.Load(), killed.Load(), web.snapshot(), ready.snapshot(), readyDown.Round(time.Millisecond), batchCode, sum)
	w := web.snapshot()
	for code, n := range w {
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code, "%d answers with status %d", n, code)
	}
	require.Zero(t, badRetryAfter.Load(), "a 503 without Retry-After")
	require.Positive(t, kills.Load())
	processed, inDoubt := 0, 0
	for _, it := range items {
		switch {
		case it.Result != dictlookup.LookupFailed:
			processed++
		case it.Reason == "store commit in doubt":
			inDoubt++ // decision 0020: never re-run, the key fails, the run goes on
		default:
			t.Errorf("key %s failed: %s %s", it.Key, it.Reason, it.Message)
		}
	}
	t.Logf("batch: %d of %d keys processed, %d failed on a commit in doubt (exit %d; stderr %q)", processed, keys, inDoubt, batchCode, batchErr)
	// dict's records, sifen's documents and the throttle's decisions are
	// all retried in the store (decision 0020): a terminated session never
	// ends the batch. Every key gets its result; only a commit whose answer
	// was lost may fail one key.
	require.Len(t, items, keys, "the batch went through every key; stderr %q", batchErr)
	require.Zero(t, sum.NotProcessed, "keys left unprocessed: %+v", sum)
	require.LessOrEqual(t, inDoubt, keys/20, "commits in doubt should be rare")
	// The mirror was never more generous than the DICT: a decision applied
	// twice (a refund retried after its commit landed) showed up here.
	require.Zero(t, sim.Stats().Total(http.StatusTooManyRequests), "remote 429s")
}

func sqlOpen(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// soakSample is one line of the soak's record.
type soakSample struct {
	at                   time.Duration
	heapMiB, liveMiB     float64 // in use; live after a forced GC
	goroutines, openFDs  int
	walKiB               int64
	requests, errors     int
	p50, p99             time.Duration
	sifenSent, batchRuns int
	webBlocked           int
}

// simProcess is a simulator binary (cmd/sifensim or cmd/dictsim) running in
// a process of its own, so that what the soak samples in the test process
// (heap, goroutines, open files) is balde's, not the simulator's.
type simProcess struct {
	url string
	cmd *exec.Cmd
}

// buildSims builds cmd/sifensim and cmd/dictsim into a temporary folder
// (within a deadline) and returns their paths by name.
func buildSims(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	goTool := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goTool = filepath.Join(root, "bin", "go")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bins := map[string]string{}
	for _, name := range []string{"sifensim", "dictsim"} {
		bins[name] = filepath.Join(dir, name)
		out, err := exec.CommandContext(ctx, goTool, "build", "-o", bins[name], "github.com/balde-throttle/balde/cmd/"+name).CombinedOutput()
		require.NoError(t, err, "go build cmd/%s: %s", name, out)
	}
	return bins
}

// listeningOn is the line each simulator prints once it listens.
var listeningOn = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// startSimProcess starts bin with args (a loopback address with port 0
// among them), waits up to 20 s for the address it reports, and at cleanup
// stops it by its pid (SIGTERM), killing it if it has not exited within
// 10 s. Its log goes to a file of the test's temporary folder.
func startSimProcess(t *testing.T, bin string, args ...string) *simProcess {
	t.Helper()
	name := filepath.Base(bin)
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Logf("%s: pid %d", name, cmd.Process.Pid)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningOn.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	p := &simProcess{cmd: cmd}
	t.Cleanup(func() {
		defer logf.Close()
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Errorf("%s: SIGTERM to pid %d: %v", name, cmd.Process.Pid, err)
		}
		if err := waitfor.Cmd(t, cmd, 10*time.Second, "%s (pid %d) after SIGTERM", name, cmd.Process.Pid); err != nil {
			t.Errorf("%s (pid %d) exited with %v; its log: %s", name, cmd.Process.Pid, err, logf.Name())
		}
	})
	select {
	case p.url = <-urls:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s (pid %d) did not report its address within 20 s; its log: %s", name, cmd.Process.Pid, logf.Name())
	}
	return p
}

// medianP99 returns the median of the p99s of samples (0 for none).
func medianP99(samples []soakSample) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	ps := make([]time.Duration, len(samples))
	for i, s := range samples {
		ps[i] = s.p99
	}
	slices.Sort(ps)
	return ps[len(ps)/2]
}

// TestSoak: mixed web and batch traffic on SQLite for a while (5 s in make
// test, 30 min under make reliability), the SIFEN simulator answering
// slowly (200 ms). Every sample period it records the heap, goroutines,
// open files, WAL size and the p99 of the web decisions; at the end they
// must be flat (no leak) and no request may have failed.
//
// The simulators (cmd/sifensim, cmd/dictsim) run as processes of their
// own on loopback ports: the test process holds serve, the sifen-send
// batches and the test's few HTTP clients, so the heap, goroutines and
// open files sampled are balde's. (Until 2026-11-25 the SIFEN simulator
// ran in the test process and its stored lots were most of the live heap.)
func TestSoak(t *testing.T) {
	run := sized(t, "BALDE_SOAK_DURATION", 5*time.Second, 30*time.Minute)
	every := 10 * time.Second
	if run < time.Minute {
		every = time.Second
	}
	bins := buildSims(t)
	// A slow SIFEN: each lot answered 200 ms after SIFEN decided it;
	// processed at once (siConsLoteDE finds the result); 10 ms between lots
	// of one RUC, stricter than nothing and looser than balde's 50 ms.
	sifenSim := startSimProcess(t, bins["sifensim"], "--addr", "127.0.0.1:0", "--latency", "200ms", "--interval", "10ms", "--processing", "-1ns")
	dictSim := startSimProcess(t, bins["dictsim"], "--addr", "127.0.0.1:0", "--category", "A", "--entries", filepath.Join("..", "..", "dict", "testdata", "entries.csv"))
	sifenURL := sifenSim.url + "/{env}"
	path := filepath.Join(t.TempDir(), "balde.db")
	db := "sqlite://" + path
	// The interval between lots of a RUC is shared through the database and
	// the stricter process wins (sifen.NewSender, decision 0135): the batches
	// must be given the same 50 ms as serve. Run 2 of 2026-11-22 gave them
	// nothing, so their default of 10 s became serve's too, and the web
	// person, whose invoices are all of one RUC, got one Send in 10 s.
	const sifenInterval = "0.05"
	sm := runServeMain(t, map[string]string{
		"BALDE_DB": db, "BALDE_SIFEN_URL": sifenURL, "SIFEN_THROTTLE_SECONDS": sifenInterval,
		"BALDE_DICT_URL": dictSim.url, "BALDE_DICT_PARTICIPANT": "12345678",
		"BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "10000", "BALDE_INBOUND_WINDOW": "1s",
	})
	webc := newAdminClient(t, sm.url, "admin", "pw")

	ctx, stop := context.WithTimeout(context.Background(), run)
	defer stop()
	var mu sync.Mutex
	var lat []time.Duration
	var requests, failures, presses, sent, blocked, batches atomic.Int64
	var wg sync.WaitGroup
	for range 3 { // readers: admin pages and the API, each an inbound decision
		wg.Go(func() {
			for ctx.Err() == nil {
				code, _, d := getStatus(sm.url+"/api/buckets?policy=INBOUND_IP", "admin", "pw")
				requests.Add(1)
				if code != http.StatusOK {
					failures.Add(1)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // ~150 requests/s in all: a shared machine
			}
		})
	}
	wg.Go(func() { // a person uploading and sending invoices
		for i := 0; ctx.Err() == nil; i++ {
			d := sifentest.Docs("80069563", 100000+i, 1)[0]
			resp, _ := webc.upload(d.File(), "test")
			if resp.StatusCode != http.StatusSeeOther {
				failures.Add(1)
				continue
			}
			id := strings.TrimPrefix(resp.Header.Get("Location"), "/documents/")
			resp, _ = webc.postForm("/documents/"+id+"/send", url.Values{})
			presses.Add(1)
			switch loc := resp.Header.Get("Location"); {
			case resp.StatusCode != http.StatusSeeOther:
				failures.Add(1)
			case strings.Contains(loc, "result=sent"):
				sent.Add(1)
			case strings.Contains(loc, "result=blocked"):
				blocked.Add(1)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	wg.Go(func() { // a batch every few seconds: sifen-send of 20 documents of other RUCs
		dir := t.TempDir()
		for i := 0; ctx.Err() == nil; i++ {
			lot, _ := sifenLot(fmt.Sprintf("8%07d", 1000+i%50), 1000*i+1, 20)
			file := filepath.Join(dir, fmt.Sprintf("lot%d.xml", i))
			if err := os.WriteFile(file, lot, 0o644); err != nil {
				failures.Add(1)
				return
			}
			code, _, _ := runIn(context.Background(), nil, "", map[string]string{"SIFEN_THROTTLE_SECONDS": sifenInterval},
				"sifen-send", "--env", "test", "--db", db, "--sifen-url", sifenURL, "--json", file)
			batches.Add(1)
			if code != ExitOK {
				failures.Add(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	})

	var samples []soakSample
	start := time.Now()
	tick := time.NewTicker(every)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		var ms, live runtime.MemStats
		runtime.ReadMemStats(&ms)
		runtime.GC() // the live heap: what a leak would grow
		runtime.ReadMemStats(&live)
		fds, _ := os.ReadDir("/proc/self/fd")
		var wal int64
		if fi, err := os.Stat(path + "-wal"); err == nil {
			wal = fi.Size()
		}
		mu.Lock()
		window := lat
		lat = nil
		mu.Unlock()
		slices.Sort(window)
		s := soakSample{at: time.Since(start).Round(time.Second), heapMiB: float64(ms.HeapInuse) / (1 << 20), liveMiB: float64(live.HeapAlloc) / (1 << 20), goroutines: runtime.NumGoroutine(),
			openFDs: len(fds), walKiB: wal / 1024, requests: len(window), errors: int(failures.Load()),
			sifenSent: int(sent.Load()), batchRuns: int(batches.Load()), webBlocked: int(blocked.Load())}
		if len(window) > 0 {
			s.p50, s.p99 = window[len(window)/2], window[len(window)*99/100]
		}
		samples = append(samples, s)
	}
	tick.Stop()
	waitfor.Group(t, &wg, 2*time.Minute, "the soak's traffic stopping")
	writeSoakCSV(t, samples)
	for _, s := range samples {
		t.Logf("%8s heap %6.1f MiB live %6.1f MiB goroutines %4d fds %3d wal %6d KiB requests %6d p50 %7s p99 %7s errors %d sent %d blocked %d batches %d",
			s.at, s.heapMiB, s.liveMiB, s.goroutines, s.openFDs, s.walKiB, s.requests, s.p50.Round(10*time.Microsecond), s.p99.Round(10*time.Microsecond), s.errors, s.sifenSent, s.webBlocked, s.batchRuns)
	}
	t.Logf("soak of %s: readers %d web requests; the person %d invoices sent of %d presses of Send (%d blocked by the throttle); %d batch runs of 20 documents; %d failures",
		run, requests.Load(), sent.Load(), presses.Load(), blocked.Load(), batches.Load(), failures.Load())
	if p := os.Getenv("BALDE_SOAK_HEAPPROFILE"); p != "" {
		runtime.GC()
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, pprof.WriteHeapProfile(f))
		require.NoError(t, f.Close())
	}
	require.Zero(t, failures.Load(), "failed requests or batch runs")
	require.GreaterOrEqual(t, len(samples), 3)
	// The person waits 200 ms between presses, longer than the 50 ms
	// interval counted from SIFEN's answer: almost every press sends. Run 2
	// of 2026-11-22 (175 sent, one per 10 s) would fail here.
	require.GreaterOrEqual(t, 2*sent.Load(), presses.Load(), "the web person's presses of Send that sent (%d of %d; %d blocked)", sent.Load(), presses.Load(), blocked.Load())
	// Flat: after a warm-up (the first quarter: pools of connections and
	// their goroutines fill up, idle ones time out after 90 s), the last
	// sample is within bounds of the warm state.
	warmIdx := len(samples) / 4
	if every >= 10*time.Second {
		warmIdx = min(max(warmIdx, 18), len(samples)-1) // at least 3 minutes
	}
	warm, last := samples[warmIdx], samples[len(samples)-1]
	require.LessOrEqual(t, last.goroutines, warm.goroutines+20, "goroutines grew")
	require.LessOrEqual(t, last.openFDs, warm.openFDs+20, "open files grew")
	// Only balde and the test's clients are in this process now: its live
	// heap must stay flat (no simulator's lots to allow for).
	require.LessOrEqual(t, last.liveMiB, 1.5*warm.liveMiB+8, "the live heap grew")
	require.LessOrEqual(t, last.walKiB, int64(128*1024), "the WAL grew past its limit")
	// The p99 of decisions: the median of the last quarter's p99s against
	// that of the quarter after the warm-up (medians, since a shared
	// machine gives single periods of 100-200 ms); only with 20 samples or
	// more (not the 5-second run of make test).
	if q := len(samples) / 4; len(samples) >= 20 {
		early, late := medianP99(samples[warmIdx:min(warmIdx+q, len(samples))]), medianP99(samples[len(samples)-q:])
		t.Logf("p99 of decisions: median %s after the warm-up, %s in the last quarter", early.Round(10*time.Microsecond), late.Round(10*time.Microsecond))
		require.LessOrEqual(t, late, 2*early+25*time.Millisecond, "the p99 of decisions grew")
	}
}

// writeSoakCSV writes the samples to BALDE_SOAK_CSV when set.
func writeSoakCSV(t *testing.T, samples []soakSample) {
	p := os.Getenv("BALDE_SOAK_CSV")
	if p == "" {
		return
	}
	f, err := os.Create(p)
	require.NoError(t, err)
	defer f.Close()
	w := csv.NewWriter(f)
	_ = w.Write([]string{"seconds", "heap_mib", "live_mib", "goroutines", "open_fds", "wal_kib", "requests", "p50_ms", "p99_ms", "errors", "web_sent", "batch_runs", "web_blocked"})
	for _, s := range samples {
		_ = w.Write([]string{strconv.Itoa(int(s.at.Seconds())), fmt.Sprintf("%.1f", s.heapMiB), fmt.Sprintf("%.1f", s.liveMiB), strconv.Itoa(s.goroutines), strconv.Itoa(s.openFDs),
			strconv.FormatInt(s.walKiB, 10), strconv.Itoa(s.requests), fmt.Sprintf("%.2f", float64(s.p50.Microseconds())/1000),
			fmt.Sprintf("%.2f", float64(s.p99.Microseconds())/1000), strconv.Itoa(s.errors), strconv.Itoa(s.sifenSent), strconv.Itoa(s.batchRuns), strconv.Itoa(s.webBlocked)})
	}
	w.Flush()
	require.NoError(t, w.Error())
}

// TestSQLiteImmutable: serve's SQLite files are made immutable (chattr +i:
// the tests run as root, for whom file modes do not restrict).
//
// At start, serve refuses the database (issue 13 saw it start and say
// healthy). Under a running serve, writes through its open descriptors
// fail too (SQLITE_IOERR_WRITE): readiness says 503 while the flag is set
// and 200 again once it is cleared, by itself; the web requests, whose only
// write is the inbound limiter's (fail open), stay 200 — never a 500 or a
// hang. (Until readiness's probe really wrote, it said 200 throughout and
// this test concluded that the flag was checked only at open.)
func TestSQLiteImmutable(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs chattr and root")
	}
	hold := sized(t, "BALDE_READONLY_DURATION", 2*time.Second, 20*time.Second)
	path := filepath.Join(t.TempDir(), "balde.db")
	db := "sqlite://" + path
	files := []string{path, path + "-wal", path + "-shm"}
	chattr := func(flag string) {
		out, err := exec.Command("chattr", append([]string{flag}, files...)...).CombinedOutput()
		require.NoError(t, err, "chattr %s: %s", flag, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", append([]string{"-i"}, files...)...).Run() })
	env := map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "10000", "BALDE_INBOUND_WINDOW": "1s"}

	// At start: refused.
	code, _, stderr := run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)
	for _, f := range files[1:] {
		require.NoError(t, os.WriteFile(f, nil, 0o644)) // chattr needs the files to exist
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("chattr +i is not supported here: %v: %s", err, out) // e.g. tmpfs
	}
	chattr("+i")
	code, _, stderr = run(t, env, "serve", "--addr", "127.0.0.1:0")
	require.NotEqual(t, ExitOK, code)
	require.Contains(t, stderr, "refusing to start")
	chattr("-i")

	// Under a running serve.
	sm := runServeMain(t, env)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var web statusCounts
	var ready [3]statusCounts // before, while and after the files are immutable
	var phase atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, _, _ := getStatus(sm.url+"/api/buckets?policy=INBOUND_IP", "admin", "pw")
				web.add(code)
				p := phase.Load()
				code, _, _ = getStatus(sm.url+"/readyz", "", "")
				if p == phase.Load() {
					ready[p].add(code)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	phase.Store(1)
	chattr("+i")
	time.Sleep(hold)
	chattr("-i")
	phase.Store(2)
	time.Sleep(time.Second)
	stop()
	waitfor.Group(t, &wg, 30*time.Second, "the web traffic stopping")
	w := web.snapshot()
	t.Logf("immutable for %s under serve: web answers %v, readiness before %v, while %v, after %v",
		hold, w, ready[0].snapshot(), ready[1].snapshot(), ready[2].snapshot())
	require.Equal(t, []int{http.StatusOK}, slices.Sorted(maps.Keys(w)), "web answers (the inbound limiter fails open)")
	require.Equal(t, []int{http.StatusOK}, slices.Sorted(maps.Keys(ready[0].snapshot())), "readiness before")
	require.Contains(t, ready[1].snapshot(), http.StatusServiceUnavailable, "readiness while immutable")
	code, _, _ = getStatus(sm.url+"/readyz", "", "")
	require.Equal(t, http.StatusOK, code, "readiness after, by itself")
}
