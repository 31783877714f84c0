package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/internal/webhook"
	"github.com/balde-throttle/balde/throttle"
)

// What was seen: serve on a busy port exited 1, where the README says 2 is
// bad input. The operator must choose another --addr: exit 2, one line.
func TestServeBusyPortIsBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	code, _, errOut := run(t, map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "b.db")},
		"serve", "--addr", l.Addr().String(), "--create")
	require.Equal(t, ExitUsage, code, errOut)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	require.Contains(t, lines[len(lines)-1], "already in use")
	require.Contains(t, lines[len(lines)-1], "choose another --addr")
	// What was seen: "(web: listen: listen tcp …)", an internal prefix.
	require.Equal(t, "balde: serve: "+l.Addr().String()+" is already in use; choose another --addr (BALDE_ADDR) or stop what listens there", lines[len(lines)-1])
}

// What was seen: serve --addr :99999 exited 1 (a failed listen); and
// BALDE_LEDGER_RETENTION=1s had serve's background prune delete the audit
// trail, with none of balde prune's 24 h floor. Both are bad input: exit 2,
// one line, nothing opened.
func TestServeRefusesBadAddrAndShortRetention(t *testing.T) {
	db := filepath.Join(t.TempDir(), "b.db")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"port out of range", nil, []string{"--addr", ":99999"}, `serve: --addr ":99999": port "99999" is not a number in 0..65535`},
		{"no port", nil, []string{"--addr", "localhost"}, `serve: --addr "localhost": want HOST:PORT`},
		{"simulator port", nil, []string{"--dict-sim-addr", "127.0.0.1:x"}, `serve: --dict-sim-addr "127.0.0.1:x"`},
		{"retention under a day", map[string]string{"BALDE_LEDGER_RETENTION": "1s"}, nil, "serve: BALDE_LEDGER_RETENTION 1s would erase the audit trail of the last day; use at least 24h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"BALDE_DB": "sqlite://" + db}
			for k, v := range tc.env {
				env[k] = v
			}
			code, _, errOut := run(t, env, append([]string{"serve", "--create"}, tc.args...)...)
			require.Equal(t, ExitUsage, code, errOut)
			oneStderrLine(t, errOut, tc.want)
			_, err := os.Stat(db)
			require.True(t, os.IsNotExist(err), "nothing opened")
		})
	}
	// Forced, or with the background prune off, a short retention passes
	// (here to the next check, the address).
	code, _, errOut := run(t, map[string]string{"BALDE_DB": "sqlite://" + db, "BALDE_LEDGER_RETENTION": "1s", "BALDE_LEDGER_RETENTION_FORCE": "on"},
		"serve", "--create", "--addr", ":99999")
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, errOut, "--addr")
	code, _, errOut = run(t, map[string]string{"BALDE_DB": "sqlite://" + db, "BALDE_LEDGER_RETENTION": "1s", "BALDE_PRUNE_EVERY": "off"},
		"serve", "--create", "--addr", ":99999")
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, errOut, "--addr")
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

// What was seen: refill being lazy, no recovery event ever came. serve's
// maintenance loop grades the non-Healthy buckets again and posts the
// recovery to the webhook ("status": "resolved").
func TestServePostsTheRecovery(t *testing.T) {
	events := make(chan webhook.Event, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e webhook.Event
		if err := json.NewDecoder(r.Body).Decode(&e); err == nil {
			events <- e
		}
	}))
	defer hook.Close()
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies.json")
	require.NoError(t, os.WriteFile(policies, []byte(`{"dict": {"policies": {"FAST": {"scope": "ENTITY", "capacity": 10, "refill_tokens": 10, "refill_period": "1s", "refill": "continuous"}}}}`), 0o600))
	db := "sqlite://" + filepath.Join(dir, "b.db")

	// Emptied before serve starts: Critical, stored so.
	cfg := settings.Default()
	cfg.DB, cfg.PolicyFile = db, policies
	eng, err := openEngine(context.Background(), cfg, balde.Config{})
	require.NoError(t, err)
	k := throttle.Key{Policy: "FAST", Env: "prod", Identifier: "entity-1"}
	d, err := eng.Limiter().Take(context.Background(), "", throttle.Charge{Key: k, Cost: 10})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.NoError(t, eng.Close(context.Background()))

	runServeMain(t, map[string]string{
		"BALDE_DB": db, "BALDE_POLICY_FILE": policies, "BALDE_ADMIN_PASSWORD": "x",
		"BALDE_ALERT_WEBHOOK": hook.URL, "BALDE_SEVERITY_EVERY": "100ms",
	})
	// The level improves step by step as the bucket refills (each step
	// posted once), and ends resolved.
	deadline := time.After(10 * time.Second)
	var steps []string
	for {
		select {
		case e := <-events:
			require.Equal(t, k, throttle.Key{Policy: e.Policy, Env: e.Env, Identifier: e.Identifier})
			steps = append(steps, e.From+">"+e.To+" "+e.Status)
			if e.Status != "resolved" {
				require.Equal(t, "firing", e.Status)
				continue
			}
			require.Equal(t, "Healthy", e.To, "%v", steps)
			require.Equal(t, "Critical", strings.Split(steps[0], ">")[0], "%v", steps)
			return
		case <-deadline:
			t.Fatalf("no recovery posted within 10 s; got %v", steps)
		}
	}
}
