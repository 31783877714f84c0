package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
)

// seedLookups records two hours of a category C participant's lookups
// through the engine every command uses, as the DICT client counts them:
// 60 in the first hour, then 140 in 20 minutes; one in four finds no entry.
func seedLookups(t *testing.T, db string, clock *fakeTime) {
	t.Helper()
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.DB, cfg.DictCategory = db, "C"
	eng, err := openEngine(ctx, cfg, engineOptions{Clock: clock.Now})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.close(ctx)) }()
	m := dict.Meter{Limiter: eng.limiter, Catalog: eng.dict}
	start := clock.Now()
	for i := range 200 {
		at := time.Duration(i) * time.Minute
		if i >= 60 {
			at = time.Hour + time.Duration(i-60)*20*time.Minute/140
		}
		clock.Set(start.Add(at))
		keys := eng.dict.LookupKeys(dict.KeyEmail, cpf(i%50), "12345678")
		r, err := m.Reserve(ctx, dict.OpGetEntry, fmt.Sprintf("E12345678202603021200lookup%05d", i), keys...)
		require.NoError(t, err)
		require.True(t, r.Decision.Allowed, "lookup %d", i)
		outcome := "200"
		if i%4 == 0 {
			outcome = "404"
		}
		_, err = m.Settle(ctx, r, outcome)
		require.NoError(t, err)
	}
}

// balde whatif: the two hours replayed as category H bite in the second,
// and the report says how it counted and what it left out; a ledger that
// folds takes per minute, or an unknown policy, is a usage error.
func TestWhatifCommand(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedLookups(t, db, clock)
	ctx := context.Background()
	env := map[string]string{"BALDE_DB": db, "BALDE_TIME_ZONE": "UTC", "BALDE_DICT_CATEGORY": "C"}

	code, stdout, stderr := runIn(ctx, clock, "", env, "whatif", "--policy", dict.PolicyEntriesReadParticipantAntiscan,
		"--from", "2026-03-02 12:00", "--to", "2026-03-02 14:00", "--category", "H")
	require.Equal(t, ExitOK, code, stderr)
	lines := strings.Split(stdout, "\n")
	require.Equal(t, "What if, from 2026-03-02 12:00:00 UTC to 2026-03-02 14:00:00 UTC: 700 ledger rows, 200 requests replayed.", lines[0])
	require.Equal(t, "ENTRIES_READ_PARTICIPANT_ANTISCAN: 2/min (capacity 50, stepwise)", lines[2])
	require.Equal(t, "  recorded under ENTRIES_READ_PARTICIPANT_ANTISCAN: 15,000/min (capacity 30,000, stepwise)", lines[3])
	require.Equal(t, []string{"HOUR", "REQUESTS", "REFUSED", "THEN", "REFUSED", "NOW", "WORSE", "BETTER", "LONGEST", "WAIT", "FIRST", "BITE"}, strings.Fields(lines[4]))
	// 140 lookups in 20 minutes, a quarter of them 404s (3 tokens): a
	// bucket of 50 refilled 2 a minute refuses 78, the first at 13:05:42;
	// the first hour's 60 lookups, one a minute, all pass.
	require.Equal(t, []string{"period", "200", "0", "78", "78", "0", "51s", "2026-03-02", "13:05:42", "UTC"}, strings.Fields(lines[5]))
	require.Equal(t, []string{"2026-03-02", "13:00", "140", "0", "78", "78", "0", "51s", "2026-03-02", "13:05:42", "UTC"}, strings.Fields(lines[6]))
	require.Empty(t, lines[7], "no other hour")
	require.Contains(t, stdout, "ENTRIES_READ_PARTICIPANT_ANTISCAN: the participant's allowance would not have sufficed (lookups refused: 78, the first at 2026-03-02 13:05:42 UTC)")
	require.Contains(t, stdout, "Every request of the period was admitted in the recorded run: each replayed outcome is the one observed.")

	env["BALDE_LEDGER"] = "minute"
	code, _, stderr = runIn(ctx, clock, "", env, "whatif", "--policy", dict.PolicyEntriesReadParticipantAntiscan, "--from", "2026-03-02")
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, stderr, "whatif: ENTRIES_READ_PARTICIPANT_ANTISCAN: the ledger does not hold its takes one by one")
	delete(env, "BALDE_LEDGER")

	code, _, stderr = runIn(ctx, clock, "", env, "whatif", "--policy", "NOPE")
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, stderr, `whatif: unknown policy "NOPE"`)
}
