package main

import (
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What was seen: serve on a busy port exited 1, where the README says 2 is
// bad input. The operator must choose another --addr: exit 2, one line.
func TestServeBusyPortIsBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	code, _, errOut := run(t, map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "b.db")},
		"serve", "--addr", l.Addr().String())
	require.Equal(t, ExitUsage, code, errOut)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	require.Contains(t, lines[len(lines)-1], "already in use")
	require.Contains(t, lines[len(lines)-1], "choose another --addr")
}

// What was seen: the admin password changed at every restart.
func TestServeKeepsItsPasswordAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(dir, "b.db")}
	sm := runServeMain(t, env)
	password := sm.stdout.waitLine(t, passwordLine)
	require.Equal(t, ExitOK, sm.stop(t))

	sm = runServeMain(t, env)
	file := sm.stdout.waitLine(t, regexp.MustCompile(`password in (\S+)$`))
	require.Equal(t, filepath.Join(dir, "admin-password"), file)
	resp, _ := get(t, sm.url+"/admin/buckets", "admin", password)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the password of the first start still works")
}

// What was seen: serve's simulators moved to a new random port at every
// restart.
func TestServeSimulatorsOnStablePorts(t *testing.T) {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		return l.Addr().String()
	}
	dictAddr, sifenAddr := free(), free()
	sm := runServeMain(t, map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "b.db"), "BALDE_ADMIN_PASSWORD": "x"},
		"--dict-sim-addr", dictAddr, "--sifen-sim-addr", sifenAddr)
	before := strings.Join(sm.before, "\n")
	require.Contains(t, before, "DICT simulator on http://"+dictAddr)
	require.Contains(t, before, "SIFEN simulator on http://"+sifenAddr)
}
