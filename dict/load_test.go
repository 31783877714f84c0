package dict_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// loadDuration is how long TestParticipantEmptiesUnderLoad runs each case:
// 30 s with BALDE_LONG=1 (the figure in docs/RELIABILITY.md), 5 s otherwise.
func loadDuration() time.Duration {
	if os.Getenv("BALDE_LONG") == "1" {
		return 30 * time.Second
	}
	return 5 * time.Second
}

// minAllowanceUsed is the share of the participant's allowance a run must
// use (issue 21: 95 %), whatever its length. Each lookup goes on past the
// run's end until its first local refusal, so the run ends with the
// participant's bucket drained and nothing in flight: what is left unused
// is only what balde refused while the DICT would have admitted, not what
// a CPU-starved machine had not yet issued or had in flight at the end.
// (With a hard stop, the 5 s run measured 86.9 % on PostgreSQL at a load
// of 11 to 22 on 2 cores, with 0 remote 429s: the refunds of the holds in
// flight at the stop came back to nobody.)
const minAllowanceUsed = 95.0

// 60 lookups at a time over PF and PJ payers, against a DICT whose answers
// take 50 ms, for a category G participant (250 tokens, 25 a minute) that
// empties within the first second: the DICT never answers 429, and the
// participant's allowance (its 250 plus what it refills in the run) is used
// to at least 95 % by the time every lookup has been refused once after the
// run's end, with the mirror refilling continuously (as the DICT) or
// stepwise (never more generous). Before (issue 21 #2), continuous refill
// drew 126 remote 429s in 25 s, each blaming a payer.
func TestParticipantEmptiesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a real-time load test")
	}
	for _, mode := range []throttle.RefillMode{throttle.RefillContinuous, throttle.RefillStepwise} {
		t.Run(mode.String(), func(t *testing.T) {
			sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
				runParticipantLoad(t, engine, mode, loadDuration())
			})
		})
	}
}

func runParticipantLoad(t *testing.T, engine sqlstore.Engine, mode throttle.RefillMode, run time.Duration) {
	ctx := context.Background()
	sim, err := dictsim.NewServer(ctx, dictsim.Config{EntriesFile: "testdata/entries.csv", Category: "G",
		Latency: 50 * time.Millisecond, Logger: quiet})
	require.NoError(t, err)
	hs := httptest.NewServer(sim)
	defer hs.Close()

	catalog := dict.NewCatalog("prod")
	require.NoError(t, catalog.SetCategory("G"))
	require.NoError(t, catalog.SetRefill(mode))
	store := sqlstoretest.MustOpen(t, engine, nil)
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{})
	require.NoError(t, err)
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog, Logger: quiet})
	require.NoError(t, err)

	// 40 PF and 20 PJ payers; one lookup in four finds no entry (404).
	payers := make([]string, 0, 60)
	for i := range 40 {
		payers = append(payers, makeCPF(1000+i))
	}
	for i := range 20 {
		payers = append(payers, makeCNPJ(i))
	}
	var refused, failed atomic.Int64
	start := time.Now()
	deadline := start.Add(run)
	var wg sync.WaitGroup
	for g := range 60 {
		wg.Go(func() {
			// After the deadline a lookup goes on until its first
			// local refusal (the drain): the run then ends with every
			// hold settled and the bucket as empty as balde will make it.
			for n := 0; ; n++ {
				past := !time.Now().Before(deadline)
				key := knownPhone
				if n%4 == 3 {
					key = unknownEmail(g*100000 + n)
				}
				res, err := client.GetEntry(ctx, dict.LookupRequest{Key: key, PayerID: payers[(g+n)%len(payers)]})
				var re *dict.RemoteError
				switch {
				case err == nil && !res.Decision.Allowed:
					refused.Add(1)
					if past {
						return
					}
					// Wait as the refusal says, within the run and 250 ms.
					time.Sleep(min(res.Decision.RetryAfter, 250*time.Millisecond, time.Until(deadline)))
				case err == nil, errors.As(err, &re) && re.NotFound():
				case errors.As(err, &re) && re.Status == http.StatusTooManyRequests:
				default:
					failed.Add(1)
					t.Errorf("lookup: %v", err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(run + time.Minute):
		t.Fatalf("the lookups did not end (each at its first refusal after the run) within %s", run+time.Minute)
	}
	elapsed := time.Since(start)

	st := sim.Stats()
	ok200, notFound := st.Count(dict.OpGetEntry, http.StatusOK), st.Count(dict.OpGetEntry, http.StatusNotFound)
	remote429 := st.Total(http.StatusTooManyRequests)
	used := ok200 + 3*notFound // what the DICT charged the participant
	// The whole tokens the DICT made available: its 250 and what it
	// refilled in the run (25 a minute), rounded down: a fraction of a
	// token admits nothing. A stepwise mirror gets no step in 30 s
	// (its first is a minute after it left full), so at best it uses
	// 250 of 262 (95.4 %).
	allowance := 250 + math.Floor(25*elapsed.Seconds()/60)
	pct := 100 * float64(used) / allowance
	dictLeft, _ := sim.Balance("ENTRIES_READ_PARTICIPANT_ANTISCAN", ispb)
	mirror, err := lim.State(ctx, throttle.Key{Policy: "ENTRIES_READ_PARTICIPANT_ANTISCAN", Env: catalog.Env(), Identifier: ispb})
	require.NoError(t, err)
	t.Logf("%s/%s %.1fs (drained %.1fs after the run): %d answered (%d 200, %d 404), %d refused locally, remote 429s %d (getBucketState %d); participant charged %d of %.0f allowed (%.1f %%); left: %d at the DICT, %d in the mirror",
		mode, engine, elapsed.Seconds(), (elapsed - run).Seconds(), ok200+notFound, ok200, notFound, refused.Load(), remote429,
		st.Count(dict.OpGetBucketState, http.StatusOK), used, allowance, pct, dictLeft, mirror.Tokens)
	require.Zero(t, failed.Load())
	require.Equal(t, int64(0), remote429, "the DICT never answers 429")
	require.GreaterOrEqual(t, pct, minAllowanceUsed, "at least %.0f %% of the participant's allowance is used", minAllowanceUsed)
}

// makeCNPJ returns the n-th valid CNPJ of a series.
func makeCNPJ(n int) string {
	s := fmt.Sprintf("%08d0001", 11222000+n)
	for _, weights := range [][]int{{5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}, {6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}} {
		sum := 0
		for i, w := range weights {
			sum += int(s[i]-'0') * w
		}
		dv := 11 - sum%11
		if dv >= 10 {
			dv = 0
		}
		s += fmt.Sprint(dv)
	}
	return s
}
