package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// balde sifen-override: bad input exits 2 and asks nothing; the prompt
// states the risk; 0420 overrides (exit 0) and the next sifen-send sends
// the document; 0422 is refused with the dProtAut (exit 1) and approves
// it; no answer changes nothing (exit 1). Each tried override is in the
// audit trail as cli:ACTOR with the reason.
func TestSifenOverride(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		clock := newFakeTime(testEpoch)
		sim := startSifenSim(t, sifensim.Config{Clock: clock.Now})
		// front loses the answers of siRecepLoteDE while lose is set (the
		// simulator gets the lot when simTakes is set too).
		var mu sync.Mutex
		var lose, simTakes bool
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			l, takes := lose, simTakes
			mu.Unlock()
			if l && strings.HasSuffix(r.URL.Path, sifen.RecepcionPath) {
				if takes {
					sim.Server.ServeHTTP(httptest.NewRecorder(), r)
				}
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
			sim.Server.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		db := sqlstoretest.DSN(t, engine)
		env := map[string]string{"BALDE_DB": db, "BALDE_SIFEN_URL": front.URL + "/{env}", "USER": "bob"}
		dir := t.TempDir()
		// sendLost sends DE number n, whose answer is lost: it stays in
		// sending, and the clock moves past any send that may be live.
		sendLost := func(n int, takes bool) string {
			mu.Lock()
			lose, simTakes = true, takes
			mu.Unlock()
			file := writeFile(t, dir, "de.xml", sifentest.Doc{Number: n}.File())
			_, _, _ = runIn(ctx, clock, "", env, "sifen-send", file)
			mu.Lock()
			lose = false
			mu.Unlock()
			clock.Advance(3 * time.Minute)
			return file
		}
		overrides := func() []audit.Entry {
			var out []audit.Entry
			for _, e := range auditTrail(t, db, clock) {
				if e.Action == audit.ActionSifenOverride {
					out = append(out, audit.Entry{User: e.User, Target: e.Target, Reason: e.Reason, Outcome: e.Outcome})
				}
			}
			return out
		}
		require.Equal(t, ExitOK, func() int { code, _, _ := runIn(ctx, clock, "", env, "migrate", "up"); return code }())

		file := sendLost(1, false)
		require.Equal(t, map[string]int{"sending": 1}, documentStatuses(t, db))
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"no id", []string{"--yes", "--reason", "x"}, "sifen-override: want one DOCUMENT_ID"},
			{"bad id", []string{"--yes", "--reason", "x", "one"}, `sifen-override: document id "one": want a positive number`},
			{"no reason", []string{"--yes", "1"}, "sifen-override: --reason is required (it is recorded in the audit trail)"},
			{"blank reason", []string{"--yes", "--reason", "  ", "1"}, "sifen-override: --reason is required"},
			{"no such document", []string{"--yes", "--reason", "x", "99"}, "sifen-override: no document 99"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, _, stderr := runIn(ctx, clock, "", env, append([]string{"sifen-override"}, tc.args...)...)
				require.Equal(t, ExitUsage, code)
				oneStderrLine(t, stderr, tc.want)
			})
		}
		require.Zero(t, sim.Stats().Count(sifen.ServiceConsultaDE, "", "", ""), "SIFEN was not asked")

		code, stdout, stderr := runIn(ctx, clock, "no\n", env, "sifen-override", "--reason", "customer waiting", "1")
		require.Equal(t, ExitFailed, code)
		t.Logf("PROMPT\n%s\n%s", stdout, stderr)
		oneStderrLine(t, stderr, "sifen-override: not confirmed: document 1 unchanged")
		require.Contains(t, stdout, "Risk: SIFEN may still be processing the first send.")
		require.Contains(t, stdout, `as "bob@`)
		require.Equal(t, map[string]int{"sending": 1}, documentStatuses(t, db))

		// 0420: overridden, then sent by sifen-send.
		code, stdout, stderr = runIn(ctx, clock, "", env, "sifen-override", "--yes", "--actor", "alice", "--reason", "customer waiting", "1")
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "document 1: SIFEN answered 0420")
		t.Logf("DONE\n%s", stdout)
		require.Equal(t, map[string]int{"draft": 1}, documentStatuses(t, db))
		code, _, stderr = runIn(ctx, clock, "", env, "sifen-send", file)
		require.Equal(t, ExitOK, code, stderr)
		require.Equal(t, map[string]int{"sent": 1}, documentStatuses(t, db))

		// 0422: refused with the dProtAut; the document is approved.
		sendLost(2, true)
		code, _, stderr = runIn(ctx, clock, "", env, "sifen-override", "--yes", "--actor", "alice", "--reason", "customer waiting", "2")
		require.Equal(t, ExitFailed, code)
		oneStderrLine(t, stderr, "sifen-override: SIFEN has the DE of document 2 (0422 CDC encontrado, dProtAut ")
		auth := strings.TrimSuffix(strings.SplitN(strings.TrimSpace(stderr), "dProtAut ", 2)[1], "): it is approved, and nothing was overridden")
		require.Regexp(t, `^[0-9]+$`, auth)
		t.Logf("FOUND\n%s", stderr)
		require.Equal(t, map[string]int{"sent": 1, "approved": 1}, documentStatuses(t, db))

		// No answer: nothing changes.
		sendLost(3, false)
		dead := map[string]string{"BALDE_DB": db, "BALDE_SIFEN_URL": "http://127.0.0.1:1/{env}", "USER": "bob"}
		code, _, stderr = runIn(ctx, clock, "", dead, "sifen-override", "--yes", "--actor", "alice", "--reason", "customer waiting", "3")
		require.Equal(t, ExitFailed, code)
		oneStderrLine(t, stderr, "nothing was overridden")
		t.Logf("DEAD\n%s", stderr)
		require.Equal(t, map[string]int{"sent": 1, "approved": 1, "sending": 1}, documentStatuses(t, db))

		got := overrides()
		require.Len(t, got, 3)
		require.Contains(t, got[0].Outcome, "error=")
		require.Contains(t, got[0].Outcome, "nothing+was+overridden")
		got[0].Outcome = ""
		require.Equal(t, []audit.Entry{ // newest first
			{User: "cli:alice", Target: "3", Reason: "customer waiting"},
			{User: "cli:alice", Target: "2", Reason: "customer waiting", Outcome: "auth=" + auth + "&code=0422&result=found"},
			{User: "cli:alice", Target: "1", Reason: "customer waiting", Outcome: "code=0420&result=overridden"},
		}, got)
	})
}

// seedSendingDocument stores a DE of RUC 88888801 as document 1 of db,
// left in sending by a send without answer 3 minutes before the clock's
// time (what sifen-override's example overrides). db must have no other
// document.
func seedSendingDocument(t *testing.T, db, simURL string, clock *fakeTime) {
	t.Helper()
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	client, err := sifen.NewClient(sifen.ClientConfig{BaseURL: simURL})
	require.NoError(t, err)
	sc := cfg.SifenConfig(client)
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now, Sifen: &sc})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(ctx)) }()
	docs, err := eng.Sifen().Import(ctx, sifentest.Doc{RUC: "88888801", Number: 99}.File(), sifen.EnvTest)
	require.NoError(t, err)
	require.Equal(t, int64(1), docs[0].ID)
	db2 := eng.Store().DB()
	_, err = db2.ExecContext(ctx, db2.Rebind(`UPDATE balde_documents SET status = 'sending', claim = 'lost', claimed_at = ? WHERE id = 1`),
		clock.Now().Add(-3*time.Minute).UnixNano())
	require.NoError(t, err)
}
