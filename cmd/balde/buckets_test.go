package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// seeded are the keys seedBuckets takes from.
var (
	seededParticipant = throttle.Key{Policy: dict.PolicyEntriesReadParticipantAntiscan, Env: "prod", Identifier: "12345678"}
	seededUser        = throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: payerCPF}
	seededRUC         = sifen.RecepcionKey(sifen.EnvTest, sifen.RUC{Number: "80069563", DV: 1})
)

// seedBuckets takes from three buckets at the clock's time, through the
// engine every command uses, and records one DICT lookup.
func seedBuckets(t *testing.T, db string, clock *fakeTime) {
	t.Helper()
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(ctx)) }()
	for _, c := range []struct {
		key  throttle.Key
		cost int64
		ref  string
	}{{seededParticipant, 5, "seed-participant"}, {seededUser, 3, "seed-user"}, {seededRUC, 1, "doc:1"}} {
		d, err := eng.Limiter().Take(ctx, c.ref, throttle.Charge{Key: c.key, Cost: c.cost})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	err = dictsql.NewRecords(eng.Store().DB(), eng.Store().ReadDB()).RecordLookup(ctx, dict.Lookup{
		EndToEndID: "E12345678202603021200abcdefghijk", Env: "prod", PayerID: payerCPF, KeyType: dict.KeyPhone,
		Policy: seededUser.Policy, Participant: "12345678", Status: 200, LookedUpAt: clock.Now(),
	})
	require.NoError(t, err)
}

// auditTrail reads the audit trail of db, newest first.
func auditTrail(t *testing.T, db string, clock *fakeTime) []audit.Entry {
	t.Helper()
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(ctx)) }()
	entries, err := eng.Audit().List(ctx, audit.Query{})
	require.NoError(t, err)
	return entries
}

// bucketsOut is what "buckets list --json" prints.
type bucketsOut struct {
	Buckets []view.APIBucket `json:"buckets"`
	Next    string           `json:"next"`
	Partial bool             `json:"partial"`
}

// showOut is what "buckets show --json" prints.
type showOut struct {
	Bucket view.APIBucket        `json:"bucket"`
	Ledger []view.APILedgerEntry `json:"ledger"`
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), s)
	return v
}

func TestBucketsListAndShow(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	clock.Advance(2 * time.Second)
	ctx := context.Background()
	env := map[string]string{"BALDE_DB": db, "BALDE_TIME_ZONE": "UTC"} // whatever the machine's zone

	t.Run("Table", func(t *testing.T) {
		code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "list", "-o", "wide")
		require.Equal(t, ExitOK, code, stderr)
		lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
		require.Len(t, lines, 4)
		require.Equal(t, []string{"POLICY", "SCOPE", "IDENTIFIER", "ENV", "TOKENS", "CAPACITY", "REFILL", "SEVERITY", "COOLDOWN/BLOCK", "LAST", "SEND", "SENDS"}, strings.Fields(lines[0]))
		// Key order: policy, env, identifier.
		require.Equal(t, []string{"ENTRIES_READ_PARTICIPANT_ANTISCAN", "PSP", "12345678", "prod"}, strings.Fields(lines[1])[:4])
		require.Equal(t, []string{"ENTRIES_READ_USER_ANTISCAN", "USER", payerCPF, "prod", "97", "100", "2/min", "(stepwise)", "Healthy", "-"}, strings.Fields(lines[2])[:10])
		require.Equal(t, []string{"SIFEN_RECEPCION_LOTE", "RUC", "80069563", "test"}, strings.Fields(lines[3])[:4])
		require.Contains(t, lines[3], "cooldown 8s")
		require.Contains(t, lines[3], "2026-03-02 12:00:00 UTC (2s ago)")
		require.True(t, strings.HasSuffix(lines[3], " 1"), "one send: %q", lines[3])
	})
	// What was seen: a 173-column table. The default fits 100 columns.
	t.Run("Narrow", func(t *testing.T) {
		code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "list")
		require.Equal(t, ExitOK, code, stderr)
		lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
		require.Len(t, lines, 4)
		for _, l := range lines {
			require.LessOrEqual(t, len([]rune(l)), 100, l)
		}
		require.Equal(t, []string{"SIFEN_RECEPCION_LOTE", "80069563", "test", "0/1", "Healthy", "cooldown", "8s", "2s", "ago"}, strings.Fields(lines[3]))
	})
	t.Run("SortedAndFiltered", func(t *testing.T) {
		code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "list", "--sort", "last_send", "-o", "json")
		require.Equal(t, ExitOK, code, stderr)
		require.Len(t, decodeJSON[bucketsOut](t, stdout).Buckets, 3)
		code, stdout, stderr = runIn(ctx, clock, "", env, "buckets", "list", "--state", "cooling", "--json")
		require.Equal(t, ExitOK, code, stderr)
		out := decodeJSON[bucketsOut](t, stdout)
		require.Len(t, out.Buckets, 1)
		require.Equal(t, "cooling down", out.Buckets[0].State)
	})
	t.Run("JSONFiltered", func(t *testing.T) {
		code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "list", "--json", "--id", "5299")
		require.Equal(t, ExitOK, code, stderr)
		out := decodeJSON[bucketsOut](t, stdout)
		require.Len(t, out.Buckets, 1)
		b := out.Buckets[0]
		require.Equal(t, seededUser, throttle.Key{Policy: b.Policy, Env: b.Env, Identifier: b.Identifier})
		require.Equal(t, int64(97), b.Tokens)
		require.Equal(t, "USER", b.Scope)
		require.Empty(t, out.Next)

		code, stdout, _ = runIn(ctx, clock, "", env, "buckets", "--policy", sifen.PolicyRecepcionLote, "--env", "test", "list", "--json")
		require.Equal(t, ExitOK, code)
		out = decodeJSON[bucketsOut](t, stdout)
		require.Len(t, out.Buckets, 1)
		require.Equal(t, 8.0, out.Buckets[0].CooldownSeconds)
	})
	t.Run("Pages", func(t *testing.T) {
		code, stdout, _ := runIn(ctx, clock, "", env, "buckets", "list", "--limit", "2")
		require.Equal(t, ExitOK, code)
		require.Contains(t, stdout, "more: add --after ")
		cursor := strings.TrimSpace(stdout[strings.LastIndex(stdout, "--after ")+len("--after "):])
		code, stdout, _ = runIn(ctx, clock, "", env, "buckets", "list", "--json", "--limit", "2", "--after", cursor)
		require.Equal(t, ExitOK, code)
		out := decodeJSON[bucketsOut](t, stdout)
		require.Len(t, out.Buckets, 1)
		require.Equal(t, sifen.PolicyRecepcionLote, out.Buckets[0].Policy)
	})
	t.Run("Show", func(t *testing.T) {
		code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "show", seededRUC.String())
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "bucket:         SIFEN_RECEPCION_LOTE/test/80069563\n")
		require.Contains(t, stdout, "cooldown/block: cooldown 8s\n")
		require.Contains(t, stdout, "next admitted:  in 8s\n")
		require.Regexp(t, `\n  \d+\s+2026-03-02 12:00:00 UTC\s+take\s+-1\s+0\s+1\s+doc:1\n`, stdout)

		// What was seen: show's labels and ledger were English whatever LANG said.
		pt := map[string]string{"BALDE_DB": db, "LANG": "pt_BR.UTF-8", "BALDE_TIME_ZONE": "UTC"}
		code, stdout, stderr = runIn(ctx, clock, "", pt, "buckets", "show", seededRUC.String())
		require.Equal(t, ExitOK, code, stderr)
		require.Regexp(t, `(?m)^balde:\s+SIFEN_RECEPCION_LOTE/test/80069563$`, stdout)
		require.Regexp(t, `(?m)^política:\s+SIFEN_RECEPCION_LOTE: 1/10s \(capacidade 1, contínua, no máximo a cada 10s\)$`, stdout)
		require.Regexp(t, `(?m)^espera/bloqueio:\s+espera 8s$`, stdout)
		require.Regexp(t, `(?m)^próxima admitida:\s+em 8s$`, stdout)
		require.Contains(t, stdout, "registro (mais recentes primeiro, no máximo 20):")
		require.Regexp(t, `\n  ID\s+QUANDO\s+MOTIVO\s+VARIAÇÃO\s+SALDO\s+EVENTOS\s+REF\n`, stdout)
		require.Regexp(t, `\n  \d+\s+2026-03-02 12:00:00 UTC\s+consumo\s+-1\s+0\s+1\s+doc:1\n`, stdout)
		require.NotContains(t, stdout, "capacity")

		// What was seen: the CLI showed UTC only. With BALDE_TIME_ZONE, a
		// bucket's page gives the zone's time next to UTC, as the admin
		// pages do (the list stays UTC, to stay narrow).
		py := map[string]string{"BALDE_DB": db, "LANG": "es_PY.UTF-8", "BALDE_TIME_ZONE": "America/Asuncion"}
		code, stdout, stderr = runIn(ctx, clock, "", py, "buckets", "show", seededRUC.String())
		require.Equal(t, ExitOK, code, stderr)
		require.Regexp(t, `\n  \d+\s+2026-03-02 12:00:00 UTC \(09:00:00 -03\)\s+consumo\s+-1\s+0\s+1\s+doc:1\n`, stdout)
		require.Contains(t, stdout, "2026-03-02 12:00:00 UTC (09:00:00 -03) (")

		// A key with no row is a full bucket.
		code, stdout, _ = runIn(ctx, clock, "", env, "buckets", "show", "--json", "--policy", seededUser.Policy, "--env", "prod", "--id", "11144477735")
		require.Equal(t, ExitOK, code)
		out := decodeJSON[showOut](t, stdout)
		require.False(t, out.Bucket.Stored)
		require.Equal(t, out.Bucket.Capacity, out.Bucket.Tokens)
		require.Empty(t, out.Ledger)
	})
}

func TestBucketsReset(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		db := sqlstoretest.DSN(t, engine)
		clock := newFakeTime(testEpoch)
		seedBuckets(t, db, clock)
		ctx := context.Background()
		env := map[string]string{"BALDE_DB": db, "USER": "bob"}
		show := func() showOut {
			code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "show", "--json", seededParticipant.String())
			require.Equal(t, ExitOK, code, stderr)
			return decodeJSON[showOut](t, stdout)
		}
		before := show()
		require.Equal(t, before.Bucket.Capacity-5, before.Bucket.Tokens)

		t.Run("NotConfirmed", func(t *testing.T) {
			code, stdout, stderr := runIn(ctx, clock, "no\n", env, "buckets", "reset", "--reason", "test", seededParticipant.String())
			require.Equal(t, ExitFailed, code)
			oneStderrLine(t, stderr, "buckets reset: not confirmed: ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/12345678 unchanged")
			require.Contains(t, stdout, `Reset ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/12345678 to `)
			require.Contains(t, stdout, `as "bob@`)
			require.Equal(t, before, show(), "nothing changed")
		})
		t.Run("Confirmed", func(t *testing.T) {
			code, stdout, stderr := runIn(ctx, clock, "y\n", env, "buckets", "reset", "--reason", "payer fixed its keys", seededParticipant.String())
			require.Equal(t, ExitOK, code, stderr)
			require.Contains(t, stdout, "cooldown and block cleared (by bob@")
			after := show()
			require.Equal(t, after.Bucket.Capacity, after.Bucket.Tokens)
			require.Equal(t, "reset", after.Ledger[0].Reason)
			require.Equal(t, int64(5), after.Ledger[0].Delta)
			require.True(t, strings.HasPrefix(after.Ledger[0].Ref, "bob@"), after.Ledger[0].Ref)
			entries := auditTrail(t, db, clock)
			require.Len(t, entries, 1)
			require.True(t, strings.HasPrefix(entries[0].User, "cli:bob@"), entries[0].User)
			require.Equal(t, audit.ActionReset, entries[0].Action)
			require.Equal(t, seededParticipant.String(), entries[0].Target)
			require.Equal(t, "payer fixed its keys", entries[0].Reason)
			require.Equal(t, fmt.Sprintf("before=%d&after=%d", before.Bucket.Tokens, after.Bucket.Tokens), entries[0].Outcome)
		})
		t.Run("NoReason", func(t *testing.T) {
			beforeNoReason := show()
			code, _, stderr := runIn(ctx, clock, "", env, "buckets", "reset", "--yes", seededRUC.String())
			require.Equal(t, ExitUsage, code)
			oneStderrLine(t, stderr, "buckets reset: --reason is required (it is recorded in the audit trail)")
			require.Equal(t, beforeNoReason, show(), "nothing changed")
			require.Len(t, auditTrail(t, db, clock), 1, "nothing recorded")
		})
		t.Run("YesWithActor", func(t *testing.T) {
			code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "reset", "--yes", "--actor", "alice", "--reason", "0301 cleared", "--json", seededRUC.String())
			require.Equal(t, ExitOK, code, stderr)
			out := decodeJSON[struct {
				Bucket       view.APIBucket `json:"bucket"`
				TokensBefore int64          `json:"tokens_before"`
				Actor        string         `json:"actor"`
			}](t, stdout)
			require.Equal(t, "alice", out.Actor)
			require.Equal(t, 0.0, out.Bucket.CooldownSeconds)
			code, stdout, _ = runIn(ctx, clock, "", env, "buckets", "show", "--json", seededRUC.String())
			require.Equal(t, ExitOK, code)
			entry := decodeJSON[showOut](t, stdout).Ledger[0]
			require.Equal(t, "reset", entry.Reason)
			require.Equal(t, "alice", entry.Ref)
			latest := auditTrail(t, db, clock)[0]
			require.Equal(t, "cli:alice", latest.User)
			require.Equal(t, "0301 cleared", latest.Reason)
		})
		t.Run("RUCGateSaysWhatItDoesNotLift", func(t *testing.T) {
			code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "reset", "--yes", "--actor", "alice", "--reason", "test", seededRUC.String())
			require.Equal(t, ExitOK, code, stderr)
			require.Contains(t, stdout, "A block SIFEN itself imposed after a 0301 is not lifted by it")
			code, stdout, stderr = runIn(ctx, clock, "", env, "buckets", "reset", "--yes", "--actor", "alice", "--reason", "test", seededParticipant.String())
			require.Equal(t, ExitOK, code, stderr)
			require.NotContains(t, stdout, "SIFEN", "a DICT bucket's reset says nothing of SIFEN")
		})
	})
}

// TestBucketsScope: the scope column says whom a bucket belongs to as the
// admin page does, the inbound limiter's buckets included.
func TestBucketsScope(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	eng, err := openAdminEngine(ctx, cfg, clock.Now)
	require.NoError(t, err)
	inbound := throttle.Key{Policy: web.PolicyInboundIP, Env: web.DefaultInboundEnv, Identifier: "192.0.2.7"}
	d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: inbound, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.NoError(t, eng.Close(ctx))

	code, stdout, stderr := runIn(ctx, clock, "", map[string]string{"BALDE_DB": db}, "buckets", "list", "--json")
	require.Equal(t, ExitOK, code, stderr)
	scopes := map[string]string{}
	for _, b := range decodeJSON[bucketsOut](t, stdout).Buckets {
		scopes[b.Policy] = b.Scope
	}
	require.Equal(t, map[string]string{
		seededParticipant.Policy: "PSP",
		seededUser.Policy:        "USER",
		seededRUC.Policy:         "RUC",
		web.PolicyInboundIP:      "IP",
	}, scopes)
}

func TestBucketsUsage(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NoAction", nil, "want an action: list, show, reset or shadow"},
		{"UnknownAction", []string{"drop"}, `unknown action "drop"`},
		{"ResetUnknownPolicy", []string{"reset", "--yes", "NOPE/prod/1"}, "NOPE/prod/1: unknown policy"},
		{"ResetMalformedKey", []string{"reset", "--yes", "ENTRIES_READ_USER_ANTISCAN"}, `"ENTRIES_READ_USER_ANTISCAN" is not POLICY/ENV/IDENTIFIER`},
		{"ResetMissingEnv", []string{"reset", "--yes", "--policy", seededUser.Policy, "--id", payerCPF}, "want a key POLICY/ENV/IDENTIFIER"},
		{"ResetBadIdentifier", []string{"reset", "--yes", seededUser.Policy + "/prod/123"}, "invalid"},
		{"ResetNoRow", []string{"reset", "--yes", seededUser.Policy + "/prod/11144477735"}, "no stored bucket"},
		{"ResetKeyTwice", []string{"reset", "--yes", "--policy", "X", seededUser.String()}, "give the key once"},
		{"ListArgs", []string{"list", "everything"}, "unexpected arguments"},
		{"BadLimit", []string{"list", "--limit", "5000"}, "--limit 5000"},
		{"BadCursor", []string{"list", "--after", "!!"}, "--after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runIn(context.Background(), clock, "", map[string]string{"BALDE_DB": db}, append([]string{"buckets"}, tt.args...)...)
			require.Equal(t, ExitUsage, code, stderr)
			oneStderrLine(t, stderr, tt.want)
		})
	}
	// What was seen: the admin's own inbound bucket was refused as unknown.
	for _, p := range web.InboundPolicyNames() {
		code, _, stderr := runIn(context.Background(), clock, "", map[string]string{"BALDE_DB": db}, "buckets", "list", "--policy", p)
		require.Equal(t, ExitOK, code, "--policy %s: %s", p, stderr)
	}
	code, stdout, _ := runIn(context.Background(), nil, "", nil, "buckets", "--help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, stdout, "Example:\n  balde buckets list")
}

func TestPrune(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		db := sqlstoretest.DSN(t, engine)
		clock := newFakeTime(testEpoch)
		seedBuckets(t, db, clock)
		env := map[string]string{"BALDE_DB": db}
		prune := func(args ...string) report.PruneRecord {
			t.Helper()
			code, stdout, stderr := runIn(context.Background(), clock, "", env, append([]string{"prune", "--json"}, args...)...)
			require.Equal(t, ExitOK, code, stderr)
			return decodeJSON[report.PruneRecord](t, stdout)
		}
		listed := func() int {
			code, stdout, _ := runIn(context.Background(), clock, "", env, "buckets", "list", "--json")
			require.Equal(t, ExitOK, code)
			return len(decodeJSON[bucketsOut](t, stdout).Buckets)
		}

		// Two seconds on, every bucket still owes something: none is idle.
		clock.Advance(2 * time.Second)
		require.Equal(t, report.PruneRecord{Before: clock.Now().Add(-throttle.DefaultRetention)}, prune())
		require.Equal(t, 3, listed())

		// An hour on, all are full again: the same as no row, but their
		// ledger rows are within the retention, so the rows stay (issue
		// 20: a pruned row hid its ledger from buckets show).
		clock.Advance(time.Hour)
		require.Equal(t, report.PruneRecord{Before: clock.Now().Add(-throttle.DefaultRetention), SkipBuckets: true}, prune("--skip-buckets"))
		require.Equal(t, 3, listed())
		require.Equal(t, report.PruneRecord{Before: clock.Now().Add(-throttle.DefaultRetention)}, prune())
		require.Equal(t, 3, listed())

		// Past the retention the ledger rows and the lookup go, and then
		// the idle buckets; a dry run first counts them and removes nothing.
		clock.Advance(48 * time.Hour)
		before := clock.Now().Add(-24 * time.Hour)
		require.Equal(t, report.PruneRecord{Before: before, LedgerRows: 3, DictLookups: 1, Buckets: 3, DryRun: true}, prune("--retention", "24h", "--dry-run"))
		require.Equal(t, report.PruneRecord{Before: before, LedgerRows: 3, DictLookups: 1, Buckets: 3, DryRun: true}, prune("--retention", "24h", "--dry-run"))
		require.Equal(t, 3, listed())

		// What was seen: "--retention 1s" deleted the audit trail, no floor.
		code, _, stderr := runIn(context.Background(), clock, "", env, "prune", "--retention", "1s")
		require.Equal(t, ExitUsage, code)
		oneStderrLine(t, stderr, "--retention 1s would erase the audit trail")
		code, stdout, stderr := runIn(context.Background(), clock, "", env, "prune", "--retention", "24h", "--batch", "2")
		require.Equal(t, ExitOK, code, stderr)
		require.Equal(t, "removed 3 ledger rows and 1 DICT lookups older than 24h0m0s (before 2026-03-03 13:00:02 UTC)\n"+
			"removed 3 idle buckets (full, no cooldown or block: the same as no row)\n", stdout)
		require.Equal(t, 0, listed())

		code, _, stderr = runIn(context.Background(), nil, "", env, "prune", "--batch", "0")
		require.Equal(t, ExitUsage, code)
		oneStderrLine(t, stderr, "--batch 0")
	})
}

// What was seen: prune --dry-run counted ledger events (an aggregated row
// counts each take it stands for) and printed them as rows; the prune
// itself then removed fewer rows than announced.
func TestPruneDryRunCountsRows(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB, cfg.Ledger = db, throttle.LedgerAggregateTakes
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now})
	require.NoError(t, err)
	for range 3 { // one aggregated row for three takes
		d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: seededUser, Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.NoError(t, eng.Close(ctx))
	clock.Advance(48 * time.Hour)

	prune := func(args ...string) int64 {
		t.Helper()
		code, stdout, stderr := runIn(ctx, clock, "", map[string]string{"BALDE_DB": db}, append([]string{"prune", "--json", "--retention", "24h"}, args...)...)
		require.Equal(t, ExitOK, code, stderr)
		return decodeJSON[report.PruneRecord](t, stdout).LedgerRows
	}
	dry := prune("--dry-run")
	require.Equal(t, int64(4), dry, "three seed rows and one aggregated row")
	require.Equal(t, dry, prune(), "the dry run announces what the prune removes")
}

// Issue 20: after a prune removed a full idle bucket's row, buckets show
// found 0 ledger rows although they were within the retention. It lists
// them all until they are older than the retention.
func TestBucketsShowListsLedgerAfterPrune(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		db := sqlstoretest.DSN(t, engine)
		clock := newFakeTime(testEpoch)
		seedBuckets(t, db, clock)
		ctx := context.Background()
		env := map[string]string{"BALDE_DB": db}
		show := func() showOut {
			t.Helper()
			code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "show", "--json", seededParticipant.String())
			require.Equal(t, ExitOK, code, stderr)
			return decodeJSON[showOut](t, stdout)
		}
		clock.Advance(time.Hour) // every bucket full again: idle
		require.Len(t, show().Ledger, 1)

		code, stdout, stderr := runIn(ctx, clock, "", env, "prune")
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "removed 0 idle buckets")
		out := show()
		require.True(t, out.Bucket.Stored)
		require.Len(t, out.Ledger, 1, "the seed's take is within the retention")
		require.Equal(t, "seed-participant", out.Ledger[0].Ref)
		require.Equal(t, int64(-5), out.Ledger[0].Delta)

		clock.Advance(throttle.DefaultRetention)
		code, stdout, stderr = runIn(ctx, clock, "", env, "prune")
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "removed 3 idle buckets")
		require.Empty(t, show().Ledger)
	})
}

// Issue 20: STATE showed "-" for a bucket at -11/100, even with --state
// negative; only buckets show knew when it admits again. The list says it,
// from the same BucketState.RetryAfter.
func TestBucketsListSaysWhenANegativeBucketAdmitsAgain(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now})
	require.NoError(t, err)
	// Five mistyped keys and a penalty: the bucket at -11/100.
	_, err = eng.Limiter().Sync(ctx, throttle.SyncTarget{Key: seededUser, Tokens: -11, Ref: "mistyped-keys"})
	require.NoError(t, err)
	require.NoError(t, eng.Close(ctx))
	env := map[string]string{"BALDE_DB": db, "BALDE_TIME_ZONE": "UTC"}

	code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "show", "--json", seededUser.String())
	require.Equal(t, ExitOK, code, stderr)
	st := decodeJSON[showOut](t, stdout).Bucket
	require.Equal(t, int64(-11), st.Tokens)
	want := "refills in " + view.FormatWait(time.Duration(st.RetryAfterSeconds*float64(time.Second)))
	require.Equal(t, "refills in 6m0s", want, "12 tokens at 2/min, stepwise")

	for _, args := range [][]string{{"buckets", "list"}, {"buckets", "list", "--state", "negative"}, {"buckets", "list", "-o", "wide"}} {
		code, stdout, stderr := runIn(ctx, clock, "", env, args...)
		require.Equal(t, ExitOK, code, stderr)
		lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
		require.Len(t, lines, 2, stdout)
		require.Contains(t, lines[1], want, "%v", args)
	}
}

// promptWriter cancels when the reset's [y/N] prompt has been written: the
// operator presses Ctrl-C there.
type promptWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *promptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "[y/N] ") {
		w.cancel()
	}
	return len(p), nil
}

// Issue 20: Ctrl-C at the buckets reset [y/N] prompt was ignored and the
// next line typed became the answer. It cancels the reset: exit 130, one
// line "reset cancelled", the bucket unchanged, and a "y" typed afterwards
// resets nothing.
func TestBucketsResetCtrlCAtThePromptCancels(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	env := map[string]string{"BALDE_DB": db, "USER": "bob"}
	show := func() showOut {
		t.Helper()
		code, stdout, stderr := runIn(context.Background(), clock, "", env, "buckets", "show", "--json", seededParticipant.String())
		require.Equal(t, ExitOK, code, stderr)
		return decodeJSON[showOut](t, stdout)
	}
	before := show()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdin, typed := io.Pipe() // a terminal nobody has typed into yet
	defer typed.Close()
	stdout := &promptWriter{cancel: cancel}
	var stderr bytes.Buffer
	m := NewMain(stdin, stdout, &stderr, func(k string) string { return env[k] })
	m.Clock, m.Sleep = clock.Now, clock.sleep
	done := make(chan int, 1)
	go func() {
		done <- m.Run(ctx, []string{"buckets", "reset", "--reason", "test", seededParticipant.String()})
	}()
	select {
	case code := <-done:
		require.Equal(t, ExitInterrupted, code, "stdout: %s", stdout.buf.String())
	case <-time.After(10 * time.Second):
		t.Fatal("buckets reset still waits for an answer 10 s after Ctrl-C")
	}
	oneStderrLine(t, stderr.String(), "reset cancelled: ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/12345678 unchanged")

	// The line typed next is not an answer: nothing reads it any more.
	go func() { _, _ = typed.Write([]byte("y\n")) }()
	require.Equal(t, before, show(), "nothing changed")
}

// buckets --help lists the flags buckets reads, each default said once:
// --actor's depends on $USER and is said in words only; the DICT's URLs,
// which buckets never calls, are not offered.
func TestBucketsHelpSaysEachDefaultOnce(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, map[string]string{"USER": ""}, "buckets", "--help")
	require.Equal(t, ExitOK, code)
	var actor string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "-actor string" {
			actor = lines[i+1]
		}
	}
	require.Contains(t, actor, `(default $USER@hostname, or "cli" without $USER)`)
	require.Equal(t, 1, strings.Count(actor, "(default"), "one default on --actor: %q", actor)
	require.NotContains(t, out, "-dict-url")
	require.NotContains(t, out, "-dict-policies-url")
	require.Contains(t, out, "-dict-category", "the category sets the DICT buckets' capacities")
}
