package dict_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// A reconciliation answered while a lookup of this process is in flight
// (admitted by the DICT, not yet charged) reports a balance that does not
// count it yet: the sync leaves the lookup's hold out, so that its refund
// lands where the DICT is once it has charged. Before, the sync set the
// DICT's number with the hold still taken, and the refund lifted the
// mirror above the DICT (47 against 44).
//
// A listing the DICT read before the lookup's charge but applied after the
// lookup's refund leaves out what the lookup kept charged (1): the mirror
// cannot tell whether the DICT counted the lookup and would be stricter by
// that much if it had. Before, it was synced to the listing's 45 with the
// DICT at 44.
//
// A gate in front of the simulator holds one request until the other has
// ended, so each order is played whatever the machine's load.
func TestSyncLeavesHoldsInFlightOut(t *testing.T) {
	tests := []struct {
		name string
		// hold is the request the gate holds until the other one ends:
		// the lookup before it reaches the DICT, or the listing's answer
		// after the DICT read it.
		hold  string
		local int64
	}{
		{"ListingWhileLookupInFlight", "/entries/", 44},
		{"ListingReadBeforeChargeAppliedAfterRefund", "/policies/", 45 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
				listing := func(r *http.Request) bool {
					return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/policies/")
				}
				gate := &holdGate{answerLater: listing, hold: func(r *http.Request) bool {
					if tt.hold == "/policies/" {
						return listing(r)
					}
					return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/entries/")
				}}
				e := newEnv(t, engine, envConfig{SimCategory: "H", Gate: gate.wrap})
				// Another app instance, with a mirror of its own, spends 5
				// of the participant's tokens at the DICT.
				other := e.newClient(mustLimiter(t, e), nil)
				for i := range 5 {
					_, err := other.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(100 + i)})
					require.NoError(t, err)
				}
				require.Equal(t, int64(45), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))
				require.Equal(t, int64(50), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

				reconcile := func() error {
					res, err := e.client.Reconcile(e.ctx)
					if err == nil && !res.Decision.Allowed {
						err = errors.New("reconcile refused locally")
					}
					return err
				}
				lookup := func() error {
					res, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: cpfPF})
					if err == nil && !res.Decision.Allowed {
						err = errors.New("lookup refused locally")
					}
					return err
				}
				first, second := lookup, reconcile // the held one first
				if tt.hold == "/policies/" {
					first, second = reconcile, lookup
				}
				gate.play(t, first, second, nil)

				require.Equal(t, int64(44), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))
				local := e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb)
				require.LessOrEqual(t, local, int64(44), "the mirror is never above the DICT")
				require.Equal(t, tt.local, local)
				require.Equal(t, int64(0), e.stats().Total(http.StatusTooManyRequests))
			})
		})
	}
}

// mustLimiter returns a limiter of e's catalog over a store of its own
// (another app instance's mirror).
func mustLimiter(t *testing.T, e *env) *throttle.Limiter {
	t.Helper()
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(e.clock.Now), e.catalog, throttle.Config{Clock: e.clock.Now})
	require.NoError(t, err)
	return lim
}

// A PJ payer holding 950 tokens draws a remote 429 because the
// participant's bucket is empty at the DICT (the mirror believed category
// A; the DICT has H). The payer keeps its 950, as the DICT has it; the
// participant's bucket is synced to 0 and blocked. Before, the payer was
// set to 0 (50 minutes of a PJ's allowance at 20/min, for a payer the
// DICT would admit).
func TestParticipantEmpty429LeavesThePJPayer(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{SimCategory: "H", LocalCategory: "A"})
		pj := makeCNPJ(7)
		for range 50 {
			require.NoError(t, e.lookup(knownPhone, pj))
		}
		require.Equal(t, int64(950), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, pj))
		require.Equal(t, int64(0), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

		_, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: pj})
		var remote *dict.RemoteError
		require.ErrorAs(t, err, &remote)
		require.Equal(t, http.StatusTooManyRequests, remote.Status)

		payer, err := e.limiter.State(e.ctx, e.catalog.Key(dict.PolicyEntriesReadUserAntiscan, pj))
		require.NoError(t, err)
		require.Equal(t, int64(950), payer.Tokens, "the payer is left as the DICT has it")
		require.Equal(t, time.Duration(0), payer.BlockLeft)
		participant, err := e.limiter.State(e.ctx, e.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb))
		require.NoError(t, err)
		require.Equal(t, int64(0), participant.Tokens)
		require.Equal(t, 30*time.Second, participant.BlockLeft)
		require.Equal(t, int64(1), e.stats().Total(http.StatusTooManyRequests))
	})
}

// A burst of remote 429s naming no bucket asks the DICT for the
// participant's bucket at most twice (POLICIES_READ is limited): the 429s
// share the reading sent after them, and lookups wait for it. The
// participant is positive (40 tokens), so each payer is the one blamed.
// The fake DICT answers the 10 lookups together once all have arrived,
// and a reading once all 10 429s are out (and 200 ms more): the burst
// is one burst however loaded the machine.
func TestBurstOf429sAsksForTheParticipantOnce(t *testing.T) {
	const burst = 10
	var policies atomic.Int64
	var arrived, answered sync.WaitGroup
	arrived.Add(burst)
	answered.Add(burst)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/policies/") {
			policies.Add(1)
			awaitInHandler(t, &answered, "the burst's 429s")
			time.Sleep(200 * time.Millisecond) // the burst's 429s arrive meanwhile
			w.Header().Set("Content-Type", dict.ContentTypeXML)
			_, _ = w.Write([]byte(`<GetPolicyResponse><CorrelationId>x</CorrelationId><ResponseTime>2026-01-01T00:00:00Z</ResponseTime><Category>A</Category>` +
				`<Policy><AvailableTokens>40</AvailableTokens><Capacity>50000</Capacity><RefillTokens>25000</RefillTokens><RefillPeriodSec>60</RefillPeriodSec>` +
				`<Name>ENTRIES_READ_PARTICIPANT_ANTISCAN</Name></Policy></GetPolicyResponse>`))
			return
		}
		arrived.Done()
		awaitInHandler(t, &arrived, "the burst's lookups")
		w.Header().Set("Retry-After", "30")
		w.Header().Set("Content-Type", dict.ContentTypeProblemXML)
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(problemXML(429, "RateLimited", "")))
		answered.Done()
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	e := newClientEnv(t, hs.URL, nil)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			_, err := e.client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: makeCPF(i)})
			var re *dict.RemoteError
			require.ErrorAs(t, err, &re)
			require.Equal(t, http.StatusTooManyRequests, re.Status)
		})
	}
	waitGroupWithin(t, &wg, 30*time.Second)
	// A reading stands for the 429s that arrived before it was sent; those
	// that arrived while it was on the wire share the next one.
	require.LessOrEqual(t, policies.Load(), int64(2), "GET /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN for the burst")
	require.GreaterOrEqual(t, policies.Load(), int64(1))
	for i := range burst {
		payer := e.state(t, dict.PolicyEntriesReadUserAntiscan, makeCPF(i))
		require.Equal(t, int64(0), payer.Tokens, "the participant is positive: the payer was the empty one")
		require.Equal(t, 30*time.Second, payer.BlockLeft)
	}
	require.Equal(t, int64(40), e.state(t, dict.PolicyEntriesReadParticipantAntiscan, ispb).Tokens)
}

// awaitInHandler waits up to 10 s for wg in a fake DICT's handler (a
// test's failure, not its end: t.Fatal belongs to the test's goroutine).
func awaitInHandler(t *testing.T, wg *sync.WaitGroup, what string) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("the fake DICT waited 10 s for %s", what)
	}
}

func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("the lookups did not end within %s", d)
	}
}
