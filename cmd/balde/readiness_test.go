package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestServeRefusesAnUnwritableDatabase is issue 13's serve that started on
// a read-only database and said healthy: it now refuses to start.
func TestServeRefusesAnUnwritableDatabase(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	code, _, stderr := run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)
	// query_only: reads work, writes fail, as on a read-only file (the
	// tests run as root, for whom file modes do not).
	code, _, stderr = run(t, map[string]string{"BALDE_ADMIN_PASSWORD": "pw"},
		"serve", "--addr", "127.0.0.1:0", "--db", db+"?_pragma=query_only(1)")
	require.NotEqual(t, ExitOK, code)
	require.Contains(t, stderr, "cannot be written, refusing to start")
}

// TestServeRefusesToCreateAMissingDatabase is issue 13's restart after the
// file was deleted, which created an empty database and silently reset
// every bucket: serve now exits 2 unless told to create one.
func TestServeRefusesToCreateAMissingDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "balde.db")
	code, _, stderr := run(t, map[string]string{"BALDE_ADMIN_PASSWORD": "pw"}, "serve", "--addr", "127.0.0.1:0", "--db", "sqlite://"+path)
	require.Equal(t, ExitUsage, code, stderr)
	oneStderrLine(t, stderr, "no database at "+path+"; pass --create")
	require.NoFileExists(t, path)
}

// TestReadinessFailsWhenTheFileIsDeleted: serve's database file is deleted
// under it. /readyz and /healthz answer 503 at once (the next probe),
// /livez still 200.
func TestReadinessFailsWhenTheFileIsDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{"BALDE_DB": "sqlite://" + path, "BALDE_ADMIN_PASSWORD": "pw"})
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		resp, body := get(t, sm.url+p, "", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p, body)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		require.NoError(t, os.Remove(path+suffix))
	}
	start := time.Now()
	waitfor.Until(t, 2*time.Second, func() bool {
		resp, _ := get(t, sm.url+"/readyz", "", "")
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "/readyz failing after the file was deleted")
	t.Logf("readiness failed %s after the deletion", time.Since(start).Round(time.Millisecond))
	resp, body := get(t, sm.url+"/healthz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	resp, _ = get(t, sm.url+"/livez", "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the process still answers")
	require.False(t, strings.Contains(body, path), "the probe does not tell the world the path")
}

// TestReadinessFailsOnceARequestMeetsCorruption: serve's SQLite file is
// zeroed under it (every page but the first, as a failing disk or a sparse
// copy over it leaves them). Readiness turns 503 within 2 s of the first
// request that meets the corruption, not at the next periodic integrity
// check (every 5 min), and stays so.
func TestReadinessFailsOnceARequestMeetsCorruption(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{"BALDE_DB": "sqlite://" + path, "BALDE_ADMIN_PASSWORD": "pw"})
	for _, p := range []string{"/readyz", "/api/buckets"} {
		resp, body := get(t, sm.url+p, "admin", "pw")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p, body)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	page := int64(sqlstoretest.SQLitePage)
	for at := page; at < fi.Size(); at += page {
		_, err := f.WriteAt(make([]byte, page), at)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())

	// Requests until one meets the corruption: several at once, so that
	// the store reads pages from the file on connections of its own, not
	// from a page cache filled before.
	var met time.Time
	require.Eventually(t, func() bool {
		statuses := make(chan int, 8)
		for range cap(statuses) {
			go func() {
				req, _ := http.NewRequest(http.MethodGet, sm.url+"/api/buckets?limit=1000", nil)
				req.SetBasicAuth("admin", "pw")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				resp.Body.Close()
				statuses <- resp.StatusCode
			}()
		}
		failed := 0
		for range cap(statuses) {
			if <-statuses == http.StatusServiceUnavailable {
				failed++
			}
		}
		if failed == 0 {
			return false
		}
		met = time.Now()
		t.Logf("%d of %d requests met the corruption (503)", failed, cap(statuses))
		return true
	}, 60*time.Second, 100*time.Millisecond, "no request met the corruption")
	waitfor.Until(t, 2*time.Second, func() bool {
		resp, _ := get(t, sm.url+"/readyz", "", "")
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "/readyz failing after a request met the corruption")
	t.Logf("readiness failed %s after a request met the corruption", time.Since(met).Round(time.Millisecond))
	resp, _ := get(t, sm.url+"/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "and stays so")
}
