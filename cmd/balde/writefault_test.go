package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
)

// TestSQLiteWritesFailUnderServe makes the SQLite file unwritable for a
// running serve and then writable again (issue 13, store faults): every
// write system call serve makes to its files (pwrite64, pwritev, ftruncate,
// fallocate) fails with EROFS while strace is attached to it, as on a file
// system remounted read-only, and succeeds again once strace detaches.
// (Linux refuses a read-only remount while serve holds the file open for
// writing, and chattr +i is checked only at open: TestSQLiteImmutable.)
// Users must see 200 (the inbound limiter fails open, and counts it) or a
// 503 with Retry-After — never a 500, never a hang —, readiness must say
// 503 while writes fail, and both must come back by themselves.
func TestSQLiteWritesFailUnderServe(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs strace and root (ptrace): skipping the write-fault test")
	}
	hold := sized(t, "BALDE_READONLY_DURATION", 2*time.Second, 20*time.Second)
	db := "sqlite://" + t.TempDir() + "/balde.db"
	code, _, stderr := run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)

	serve := startServeProcess(t, time.Time{}, []string{"BALDE_ADMIN_PASSWORD=pw", "BALDE_INBOUND_IP_LIMIT=10000", "BALDE_INBOUND_WINDOW=1s"}, "--db", db)
	url, serveErr := serve.url, &serve.stderr

	// Traffic: admin API requests (each one a write: the admin's inbound
	// bucket) and readiness probes, counted by phase.
	type counts struct{ web, ready statusCounts }
	var phases [3]counts // before, during, after the fault
	var phase sync.Mutex
	current := 0
	var missingRetryAfter statusCounts
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				phase.Lock()
				p := &phases[current]
				phase.Unlock()
				code, retryAfter, _ := getStatus(url+"/api/buckets?policy=INBOUND_ADMIN", "admin", "pw")
				p.web.add(code)
				if code == http.StatusServiceUnavailable && retryAfter == "" {
					missingRetryAfter.add(code)
				}
				code, _, _ = getStatus(url+"/readyz", "", "")
				p.ready.add(code)
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	setPhase := func(p int) { phase.Lock(); current = p; phase.Unlock() }

	time.Sleep(300 * time.Millisecond)
	tracer := exec.Command(strace, "-f", "-qq", "-o", os.Getenv("BALDE_STRACE_LOG")+"/dev/null", "-p", fmt.Sprint(serve.cmd.Process.Pid),
		"-e", "trace=pwrite64,pwritev,ftruncate,fallocate",
		"-e", "inject=pwrite64,pwritev,ftruncate,fallocate:error=EROFS")
	var tracerOut syncBuffer
	tracer.Stdout, tracer.Stderr = &tracerOut, &tracerOut
	setPhase(1) // from the moment strace starts attaching
	require.NoError(t, tracer.Start())
	tracerDone := make(chan error, 1)
	go func() { tracerDone <- tracer.Wait() }()
	time.Sleep(hold)
	setPhase(2)
	require.NoError(t, tracer.Process.Signal(os.Interrupt)) // strace detaches: writes succeed again
	waitfor.Recv(t, tracerDone, 20*time.Second, "strace detaching; its output:\n%s", &tracerOut)
	time.Sleep(2 * time.Second)
	stop()
	waitfor.Group(t, &wg, 30*time.Second, "the web traffic stopping")

	names := []string{"before", "during", "after"}
	for i := range phases {
		t.Logf("%s the write fault (%s): web %v, readiness %v", names[i], hold, phases[i].web.snapshot(), phases[i].ready.snapshot())
	}
	for i := range phases {
		for code := range phases[i].web.snapshot() {
			require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code,
				"web answers %s the fault: only 200 or 503; serve's stderr:\n%s", names[i], serveErr)
		}
	}
	require.Empty(t, missingRetryAfter.snapshot(), "every 503 carries Retry-After")
	require.Equal(t, []int{http.StatusOK}, slices.Sorted(maps.Keys(phases[0].ready.snapshot())), "readiness before")
	require.Contains(t, phases[1].ready.snapshot(), http.StatusServiceUnavailable, "readiness says 503 while writes fail")
	// The web requests' only write is the inbound limiter's, whose policies
	// fail open: admitted (200) and counted as such, as specified.
	metrics := getBody(t, url+"/metrics")
	require.Regexp(t, `balde_throttle_fail_open_total\{[^}]*\} [1-9]`, metrics, "fail-open admissions counted")
	// After: service returns by itself within the 2 s (the last answers
	// are 200; the first ones may still be the fault's).
	after := &phases[2]
	require.Positive(t, after.web.snapshot()[http.StatusOK], "web answers 200 again")
	require.Positive(t, after.ready.snapshot()[http.StatusOK], "readiness says 200 again")
	code, _, _ = getStatus(url+"/readyz", "", "")
	require.Equal(t, http.StatusOK, code, "readiness at the end")
	code, _, _ = getStatus(url+"/api/buckets?policy=INBOUND_ADMIN", "admin", "pw")
	require.Equal(t, http.StatusOK, code, "web at the end")
}

// getBody GETs u and returns its body; anything but a 200 fails the test.
func getBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := probeClient.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, b)
	return string(b)
}
