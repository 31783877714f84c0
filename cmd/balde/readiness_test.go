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
