package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// fillDisk writes zeros to path until the file system is full and returns
// how many bytes it wrote.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		require.NoError(t, err)
	}
}

// TestFullDisk runs serve on a SQLite file in a small tmpfs the test
// mounts, under web DICT lookups and readiness probes, fills the file
// system while it runs, then frees it: serve never hangs or exits, the
// writes that cannot be made answer 503 and readiness 503 while the disk is
// full, serve answers by itself again once space is back, and the file
// passes the integrity check afterwards (balde reopens it). Under make
// reliability only (it needs root to mount).
func TestFullDisk(t *testing.T) {
	if !reliabilityLong() {
		t.Skip("make reliability only (BALDE_RELIABILITY=1): mounts a tmpfs")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir, err := os.MkdirTemp("", "balde-fulldisk-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	hold := sized(t, "BALDE_FULLDISK_DURATION", 3*time.Second, 10*time.Second)
	path := filepath.Join(dir, "balde.db")
	db := "sqlite://" + path
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw"})
	c := newAdminClient(t, sm.url, "admin", "pw")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var phase atomic.Int32 // 0 before, 1 full, 2 freed
	var web, ready [3]statusCounts
	var slowest atomic.Int64
	var lastFailure atomic.Int64
	var wg sync.WaitGroup
	payers := []string{"52998224725", "11144477735", "11222333000181"}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			p := phase.Load()
			start := time.Now()
			resp, _ := c.postForm("/dict/lookup", url.Values{"key": {"+5561988880000"}, "payer_id": {payers[i%len(payers)]}})
			slowest.Store(max(slowest.Load(), int64(time.Since(start))))
			web[p].add(resp.StatusCode)
			if p == 2 && resp.StatusCode == http.StatusServiceUnavailable {
				lastFailure.Store(time.Now().UnixNano())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			p := phase.Load()
			code, _, took := getStatus(sm.url+"/readyz", "", "")
			slowest.Store(max(slowest.Load(), int64(took)))
			ready[p].add(code)
			if p == 2 && code != http.StatusOK {
				lastFailure.Store(time.Now().UnixNano())
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	time.Sleep(time.Second)
	phase.Store(1)
	filled := fillDisk(t, filepath.Join(dir, "filler"))
	time.Sleep(hold)
	require.NoError(t, os.Remove(filepath.Join(dir, "filler")))
	freed := time.Now()
	lastFailure.Store(freed.UnixNano())
	phase.Store(2)
	time.Sleep(3 * time.Second)
	stop()
	waitfor.Group(t, &wg, 40*time.Second, "the web traffic stopping")
	recovered := time.Unix(0, lastFailure.Load()).Sub(freed)
	t.Logf("tmpfs of 8 MiB filled with %d KiB for %s: web lookups before %v, full %v, freed %v; readiness before %v, full %v, freed %v; "+
		"answers all good %s after the space was freed; slowest answer %s",
		filled>>10, hold, web[0].snapshot(), web[1].snapshot(), web[2].snapshot(),
		ready[0].snapshot(), ready[1].snapshot(), ready[2].snapshot(), recovered.Round(time.Millisecond),
		time.Duration(slowest.Load()).Round(time.Millisecond))
	select {
	case code := <-sm.done:
		t.Fatalf("serve exited with %d on a full disk", code)
	default:
	}
	require.Contains(t, ready[1].snapshot(), http.StatusServiceUnavailable, "readiness while the disk is full")
	require.NotContains(t, web[1].snapshot(), http.StatusInternalServerError, "no 500 on a full disk")
	require.Less(t, recovered, 3*time.Second, "serve recovers by itself")
	require.Less(t, time.Duration(slowest.Load()), 20*time.Second, "no answer hangs")

	// The file is sound: balde reopens it, integrity check included.
	sm.cancel()
	select {
	case code := <-sm.done:
		sm.done <- code // for runServeMain's cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s")
	}
	s, err := alldrivers.Open(context.Background(), db, sqlstore.Options{})
	require.NoError(t, err)
	require.NoError(t, s.CheckIntegrity(context.Background()))
	require.NoError(t, s.Close())
}
