package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/settings"
)

// seedLookups records two hours of a category C participant's lookups
// through the engine every command uses, as the DICT client counts them:
// 60 in the first hour, then 140 in 20 minutes; one in four finds no entry.
func seedLookups(t *testing.T, db string, clock *fakeTime) {
	t.Helper()
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB, cfg.DictCategory = db, "C"
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(ctx)) }()
	status := http.StatusOK
	dictAnswer := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	client := &http.Client{Transport: &dict.Transport{Base: dictAnswer,
		Meter: dict.Meter{Limiter: eng.Limiter(), Catalog: eng.DictCatalog()}, Participant: "12345678"}}
	start := clock.Now()
	for i := range 200 {
		at := time.Duration(i) * time.Minute
		if i >= 60 {
			at = time.Hour + time.Duration(i-60)*20*time.Minute/140
		}
		clock.Set(start.Add(at))
		status = http.StatusOK
		if i%4 == 0 {
			status = http.StatusNotFound
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://dict.test%s/entries/user%d@example.com", dict.APIPrefix, i), nil)
		require.NoError(t, err)
		req.Header.Set(dict.HeaderPayerID, cpf(i%50))
		req.Header.Set(dict.HeaderEndToEndID, fmt.Sprintf("E12345678202603021200lookup%05d", i))
		resp, err := client.Do(req)
		require.NoError(t, err, "lookup %d", i)
		resp.Body.Close()
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
