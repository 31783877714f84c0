package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
)

// privatePostgres is a PostgreSQL server a test owns: its own data folder
// and port on 127.0.0.1, run as the postgres user. Never the shared server.
type privatePostgres struct {
	t          *testing.T
	bin, dir   string
	port       int
	uid, gid   int
	runAsOwner func(name string, args ...string) *exec.Cmd
}

// startPrivatePostgres initdb's a cluster in a temporary folder and starts
// it on a free port; it is stopped and removed at cleanup. It skips, saying
// why, without root, the postgres user or the server binaries.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (to run initdb as the postgres user)")
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no /usr/lib/postgresql/*/bin/initdb")
	}
	slices.Sort(bins)
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres user to run initdb as")
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		t.Skip("no runuser")
	}
	p := &privatePostgres{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	p.uid, _ = strconv.Atoi(u.Uid)
	p.gid, _ = strconv.Atoi(u.Gid)
	p.runAsOwner = func(name string, args ...string) *exec.Cmd {
		return exec.Command(runuser, append([]string{"-u", "postgres", "--", filepath.Join(p.bin, name)}, args...)...)
	}
	p.dir, err = os.MkdirTemp("", "balde-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(p.dir) })
	require.NoError(t, os.Chown(p.dir, p.uid, p.gid))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	out, err := p.runAsOwner("initdb", "-D", filepath.Join(p.dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	p.start()
	t.Cleanup(func() {
		_ = p.runAsOwner("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop").Run()
	})
	return p
}

func (p *privatePostgres) start() {
	p.t.Helper()
	out, err := p.runAsOwner("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "log"), "-w", "-t", "30",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", p.port, p.dir), "start").CombinedOutput()
	require.NoError(p.t, err, "pg_ctl start: %s", out)
}

func (p *privatePostgres) stop(mode string) {
	p.t.Helper()
	out, err := p.runAsOwner("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", mode, "-w", "-t", "30", "stop").CombinedOutput()
	require.NoError(p.t, err, "pg_ctl stop: %s", out)
}

func (p *privatePostgres) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// TestPostgresServerRestart restarts the PostgreSQL server (a private
// instance) under serve's web traffic and readiness probes, once with a
// fast shutdown and once with an immediate one (a crash of the server):
// serve keeps running and never hangs; a short outage (2 s in make test) is
// ridden over by the store's retries, a long one (10 s under make
// reliability) answers 503 meanwhile; serve answers 200 again by itself
// within a few seconds of the server's return; a dict-lookup batch run
// afterwards succeeds.
func TestPostgresServerRestart(t *testing.T) {
	if !reliabilityLong() {
		t.Skip("make reliability only (BALDE_RELIABILITY=1): starts a PostgreSQL server of its own")
	}
	pg := startPrivatePostgres(t)
	down := sized(t, "BALDE_PG_DOWN", 2*time.Second, 10*time.Second)
	env := map[string]string{"BALDE_DB": pg.dsn(), "BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "10000", "BALDE_INBOUND_WINDOW": "1s"}
	sm := runServeMain(t, env)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var phase atomic.Int32 // 0 up, 1 down, 2 back
	var round atomic.Int32
	var web, ready [2][3]statusCounts // by round and by the phase a request began in
	var slowest atomic.Int64
	var lastFailure atomic.Int64 // UnixNano of the last non-200 after the restart
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, p := round.Load(), phase.Load()
				code, _, took := getStatus(sm.url+"/api/buckets?policy=INBOUND_IP", "admin", "pw")
				rcode, _, rtook := getStatus(sm.url+"/readyz", "", "")
				// Counted in the phase the request began in.
				web[r][p].add(code)
				ready[r][p].add(rcode)
				if p == 2 && (code != http.StatusOK || rcode != http.StatusOK) {
					lastFailure.Store(time.Now().UnixNano())
				}
				slowest.Store(max(slowest.Load(), int64(max(took, rtook))))
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	for i, mode := range []string{"fast", "immediate"} {
		round.Store(int32(i))
		phase.Store(0)
		time.Sleep(500 * time.Millisecond)
		phase.Store(1)
		pg.stop(mode)
		time.Sleep(down)
		pg.start()
		back := time.Now()
		lastFailure.Store(back.UnixNano())
		phase.Store(2)
		time.Sleep(5 * time.Second)
		recovered := time.Unix(0, lastFailure.Load()).Sub(back)
		t.Logf("%s stop, down %s: web up %v, down %v, back %v; readiness up %v, down %v, back %v; all 200 %s after the server was back",
			mode, down, web[i][0].snapshot(), web[i][1].snapshot(), web[i][2].snapshot(),
			ready[i][0].snapshot(), ready[i][1].snapshot(), ready[i][2].snapshot(), recovered.Round(time.Millisecond))
		if down > 6*time.Second { // longer than the store's retries ride over
			require.Contains(t, ready[i][1].snapshot(), http.StatusServiceUnavailable, "readiness while the server is down")
		}
		require.Less(t, recovered, 4*time.Second, "serve recovers by itself")
	}
	stop()
	waitfor.Group(t, &wg, 30*time.Second, "the web traffic stopping")
	t.Logf("slowest answer %s (a client gives up at 30 s)", time.Duration(slowest.Load()).Round(time.Millisecond))
	require.Less(t, time.Duration(slowest.Load()), 20*time.Second)
	select {
	case code := <-sm.done:
		t.Fatalf("serve exited with %d during the restarts", code)
	default:
	}

	sim := startDictSim(t, "A", true)
	code, _, stderr := runIn(context.Background(), newFakeTime(testEpoch), "+5561988880000\n", nil, "dict-lookup", "--db", pg.dsn(),
		"--dict-url", sim.URL(), "--payer", "11222333000181", "-")
	require.Equal(t, ExitOK, code, stderr)
}
