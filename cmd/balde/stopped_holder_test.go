package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/storebound"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// buildBalde builds cmd/balde (main() as shipped: its signal handling)
// into a temporary folder within a deadline and returns its path.
func buildBalde(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "balde")
	goTool := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goTool = filepath.Join(root, "bin", "go")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/balde-throttle/balde/cmd/balde").CombinedOutput()
	require.NoError(t, err, "go build cmd/balde: %s", out)
	return bin
}

// holdSQLiteWriteLock starts a python3 process that takes the write lock
// of the SQLite file at path (BEGIN IMMEDIATE) and stops it with SIGSTOP:
// a balde process stopped inside its transaction, as other processes see
// it. The process is continued and killed at cleanup.
func holdSQLiteWriteLock(t *testing.T, path string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: no process to stop holding SQLite's write lock")
	}
	cmd := exec.Command(py, "-c", `
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
c.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(3600)
`, path)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = waitfor.Cmd(t, cmd, 10*time.Second, "the SQLite lock holder (pid %d)", cmd.Process.Pid)
	})
	locked := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		locked <- sc.Scan() && sc.Text() == "locked"
	}()
	select {
	case ok := <-locked:
		require.True(t, ok, "the lock holder did not take the lock")
	case <-time.After(30 * time.Second): // python3's start on a busy machine
		t.Fatal("the lock holder did not take the lock within 30 s")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	t.Logf("pid %d holds the write lock of %s, stopped", cmd.Process.Pid, path)
}

// holdPostgresRows holds every bucket row FOR UPDATE in a transaction it
// never ends (a session whose process stopped mid-transaction), on a
// connection of its own, rolled back at cleanup. It returns the number of
// sessions waiting for it now: those pg_blocking_pids names it for (a
// lock wait on its rows), read on another connection.
func holdPostgresRows(t *testing.T, dsn string) (waiters func() (int, error)) {
	t.Helper()
	_, driverDSN, err := sqlstore.ParseDSN(dsn)
	require.NoError(t, err)
	db, err := sql.Open("pgx", strings.Replace(driverDSN, "statement_timeout=30s", "statement_timeout=0", 1))
	require.NoError(t, err)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		conn.Close()
		db.Close()
	})
	_, err = conn.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	var n int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM balde_buckets FOR UPDATE) AS held`).Scan(&n))
	require.Positive(t, n, "no bucket row to hold")
	var holder int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&holder))
	t.Logf("a session (backend %d) holds %d bucket rows FOR UPDATE", holder, n)
	return func() (int, error) {
		var w int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&w)
		return w, err
	}
}

// awaitSQLiteLockWait returns once the process pid is seen in SQLite's busy
// handler: strace, attached to all its threads, reports a failed attempt at
// the WAL write lock (F_SETLK of byte 120 of the -shm file answered
// EAGAIN), which the busy handler repeats every 100 ms at most until
// busy_timeout. It fails the test when none comes within d or the process
// ends first, and skips when strace is missing or may not attach.
func awaitSQLiteLockWait(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	path, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace not found (apt-get install -y strace): no way to see a SQLite process waiting for the write lock, so no SIGTERM to one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tr := exec.CommandContext(ctx, path, "-f", "-qq", "-e", "trace=fcntl", "-e", "signal=none", "-e", "status=failed", "-p", strconv.Itoa(pid))
	// strace detaches from its tracee on SIGTERM, leaving it running.
	tr.Cancel = func() error { return tr.Process.Signal(syscall.SIGTERM) }
	out, err := tr.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, tr.Start())
	seen := make(chan bool, 1)
	var lines []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, "F_SETLK") && strings.Contains(l, "F_WRLCK") && strings.Contains(l, "l_start=120,") && strings.Contains(l, "EAGAIN") {
				seen <- true
				_, _ = io.Copy(io.Discard, out)
				return
			}
			if len(lines) < 5 {
				lines = append(lines, l)
			}
		}
		seen <- false
	}()
	ok := waitfor.Recv(t, seen, d+5*time.Second, "strace of pid %d", pid)
	cancel()
	_ = waitfor.Cmd(t, tr, 10*time.Second, "strace detaching from pid %d", pid)
	if !ok && len(lines) > 0 && strings.Contains(strings.Join(lines, " "), "Operation not permitted") {
		t.Skipf("strace may not attach here (%s): no way to see the SQLite waiter", strings.Join(lines, "; "))
	}
	require.True(t, ok, "pid %d was not seen waiting for SQLite's write lock within %s (it ended, or never asked for it): %q", pid, d, lines)
}

// TestStoppedLockHolder stops a lock holder inside its transaction (SQLite:
// a process stopped with SIGSTOP holding the write lock; PostgreSQL: a
// session holding every bucket row FOR UPDATE) and checks that every other
// process answers or fails within the bound: a dict-lookup batch fails
// (exit 3) within lock_timeout / the SQLite retries' 5 s plus busy_timeout,
// "buckets list" still answers (reads take no lock), a web DICT lookup
// answers 503 within the request's 5 s bound (decision 0190), and
// SIGTERM ends a dict-lookup waiting on the lock within 2 s, through the
// lock wait's cancellation rather than the forced exit 4 s after the
// signal (74 s, ~42 s, and a SIGTERM that waited for the lock before
// decisions 0071 and 0124). Under make reliability only (it builds
// the binary and waits out the default bounds).
func TestStoppedLockHolder(t *testing.T) {
	if !reliabilityLong() {
		t.Skip("make reliability only (BALDE_RELIABILITY=1): builds cmd/balde and waits out the default lock bounds")
	}
	bin := buildBalde(t)
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		db := sqlstoretest.DSN(t, engine)
		sim := startDictSim(t, "A", false)
		env := map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_DICT_URL": sim.URL()}
		lookupArgs := []string{"dict-lookup", "--db", db, "--dict-url", sim.URL(), "--payer", "11222333000181", "--no-wait", "-"}
		balde := func(ctx context.Context, args ...string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stdin = strings.NewReader("+5561988880000\n")
			cmd.Env = append(os.Environ(), "BALDE_DB="+db)
			return cmd
		}
		timed := func(args ...string) (exit int, took time.Duration, out string) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			b, err := balde(ctx, args...).CombinedOutput()
			took = time.Since(start)
			require.NoError(t, ctx.Err(), "%v did not end within 60 s", args)
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), took, string(b)
			}
			require.NoError(t, err)
			return 0, took, string(b)
		}
		// Buckets to hold: one lookup through the web app and one batch.
		sm := runServeMain(t, env)
		c := newAdminClient(t, sm.url, "admin", "pw")
		resp, _ := c.postForm("/dict/lookup", url.Values{"key": {"11144477735"}, "payer_id": {"52998224725"}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		code, _, out := timed(lookupArgs...)
		require.Equal(t, ExitOK, code, out)

		bound := 5 * time.Second // lock_timeout
		var pgWaiters func() (int, error)
		if engine == sqlstore.SQLite {
			holdSQLiteWriteLock(t, strings.TrimPrefix(db, "sqlite://"))
			bound = 10 * time.Second // the retries' 5 s plus one 5 s busy_timeout
		} else {
			pgWaiters = holdPostgresRows(t, db)
		}

		code, took, out := timed(lookupArgs...)
		t.Logf("%s: dict-lookup facing the stopped holder: exit %d after %s: %s", engine, code, took.Round(time.Millisecond), strings.TrimSpace(out))
		require.NotEqual(t, ExitOK, code)
		require.Less(t, took, bound+2*time.Second, "dict-lookup within the bound")

		code, took, out = timed("buckets", "list", "--db", db)
		t.Logf("%s: buckets list facing the stopped holder: exit %d after %s", engine, code, took.Round(time.Millisecond))
		require.Equal(t, ExitOK, code, out)
		require.Less(t, took, bound+2*time.Second, "buckets list within the bound")

		start := time.Now()
		resp, _ = c.postForm("/dict/lookup", url.Values{"key": {"11144477735"}, "payer_id": {"52998224725"}})
		took = time.Since(start)
		t.Logf("%s: web DICT lookup facing the stopped holder: %d after %s", engine, resp.StatusCode, took.Round(time.Millisecond))
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		// A web lookup's store writes (the inbound charge, the reservation,
		// the record of the failure) share one bound (decision 0190).
		require.Less(t, took, storebound.Request+2*time.Second, "the web answer within the request's bound")

		// SIGTERM to a process waiting on the lock: sent once it is seen
		// waiting (its session blocked by the holder's; its failed attempts
		// at SQLite's write lock), not after a guess of how long it takes
		// to get there.
		if pgWaiters != nil {
			n, err := pgWaiters()
			require.NoError(t, err)
			require.Zero(t, n, "a session already waits for the holder before the dict-lookup starts")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := balde(ctx, lookupArgs...)
		var errOut strings.Builder
		cmd.Stderr = &errOut
		require.NoError(t, cmd.Start())
		var err error // cmd.Wait's, read once exited is closed
		exited := make(chan struct{})
		go func() { err = cmd.Wait(); close(exited) }()
		started := time.Now()
		if engine == sqlstore.SQLite {
			awaitSQLiteLockWait(t, cmd.Process.Pid, bound)
		} else {
			waitfor.Until(t, bound, func() bool {
				select {
				case <-exited:
					t.Fatalf("dict-lookup ended (%v) before it was seen waiting for the held rows: %s", err, errOut.String())
				default:
				}
				n, err := pgWaiters()
				require.NoError(t, err)
				return n > 0
			}, "dict-lookup (pid %d) waiting for the held rows (pg_blocking_pids)", cmd.Process.Pid)
		}
		t.Logf("%s: dict-lookup seen waiting for the lock %s after it started", engine, time.Since(started).Round(time.Millisecond))
		start = time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		waitfor.Recv(t, exited, 30*time.Second, "dict-lookup after SIGTERM")
		took = time.Since(start)
		t.Logf("%s: SIGTERM to a waiting dict-lookup: exited after %s (%v): %s", engine, took.Round(time.Millisecond), err, strings.TrimSpace(errOut.String()))
		// Well before balde's forced exit, 4 s after the signal: the lock
		// wait itself ends with the signal (decision 0124).
		require.Less(t, took, 2*time.Second, "SIGTERM ends a waiting process within 2 s, not by the forced exit")
	})
}

// TestAStoppedWriterBoundsAWholeRequest: facing a SQLite writer stopped
// inside its transaction, a web DICT lookup (the inbound limiter's charge,
// then the reservation, then the record of its outcome) and a lookup
// through the DICT gateway each answer 503 within the bound of the whole
// request, 5 s (storebound.Request) plus half a second, not once per store
// write they make (10.1-10.9 s before, decision 0190). The two run at
// once.
func TestAStoppedWriterBoundsAWholeRequest(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "balde.db")
	db := "sqlite://" + path
	sim := startDictSim(t, "A", false)
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_DICT_URL": sim.URL()})
	addr := freeLoopbackAddr(t)
	gw := "http://" + addr
	client := &http.Client{Timeout: 30 * time.Second}
	startGateway(t, client, gw, "dict", "--addr", addr, "--db", db,
		"--clients", writeClients(t, t.TempDir(), "erp "+tokenDigest("erp-token")), "--dict-url", sim.URL(), "--dict-participant", "12345678")

	webLookup := func() *http.Request {
		req, err := http.NewRequest(http.MethodPost, sm.url+"/dict/lookup",
			strings.NewReader(url.Values{"key": {"11144477735"}, "payer_id": {"52998224725"}}.Encode()))
		require.NoError(t, err)
		req.SetBasicAuth("admin", "pw")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	}
	n := 0
	gatewayLookup := func() *http.Request {
		n++
		req, err := http.NewRequest(http.MethodGet, gw+"/api/v2/entries/maria.souza@example.com", nil)
		require.NoError(t, err)
		req.Header.Set(dict.HeaderPayerID, "52998224725")
		req.Header.Set(dict.HeaderEndToEndID, fmt.Sprintf("E12345678%s%011d", time.Now().UTC().Format("200601021504"), n))
		req.Header.Set("Authorization", "Bearer erp-token")
		return req
	}
	type answer struct {
		status int
		took   time.Duration
		err    error
	}
	do := func(req *http.Request) answer {
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return answer{err: err, took: time.Since(start)}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return answer{status: resp.StatusCode, took: time.Since(start)}
	}
	// Both answer while the writer runs: their buckets exist.
	for name, req := range map[string]*http.Request{"web": webLookup(), "gateway": gatewayLookup()} {
		a := do(req)
		require.NoError(t, a.err, name)
		require.Equal(t, http.StatusOK, a.status, name)
	}

	holdSQLiteWriteLock(t, path)
	web, gateway := make(chan answer, 1), make(chan answer, 1)
	wreq, greq := webLookup(), gatewayLookup()
	go func() { web <- do(wreq) }()
	go func() { gateway <- do(greq) }()
	for name, ch := range map[string]chan answer{"web DICT lookup": web, "DICT gateway lookup": gateway} {
		a := waitfor.Recv(t, ch, 40*time.Second, "the %s", name)
		t.Logf("%s facing a stopped SQLite writer: %d after %s (%v)", name, a.status, a.took.Round(time.Millisecond), a.err)
		require.NoError(t, a.err, name)
		require.Equal(t, http.StatusServiceUnavailable, a.status, name)
		require.LessOrEqual(t, a.took, 5500*time.Millisecond, "the %s answers within the request's bound", name)
	}
}
