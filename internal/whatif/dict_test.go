package whatif_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

const (
	ispb       = "12345678"
	knownPhone = "+5561988880000"
	knownEmail = "maria.souza@example.com"
)

// dictWorld is one participant's app on a SQLite mirror, talking to the
// DICT simulator; both read one fake clock.
type dictWorld struct {
	t       *testing.T
	clock   *throttle.ManualClock
	sim     *dictsim.Server
	store   *sqlstore.Store
	catalog *dict.Catalog
	limiter *throttle.Limiter
	client  *dict.Client
}

func newDictWorld(t *testing.T, engine sqlstore.Engine, category string) *dictWorld {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	w := &dictWorld{t: t, clock: throttle.NewManualClock(throttletest.Epoch)}
	var err error
	w.sim, err = dictsim.NewServer(context.Background(), dictsim.Config{EntriesFile: "../../dict/testdata/entries.csv",
		Category: category, FakeClock: true, Start: throttletest.Epoch, Logger: quiet})
	require.NoError(t, err)
	hs := httptest.NewServer(w.sim)
	t.Cleanup(func() { hs.Close(); require.NoError(t, w.sim.Close()) })
	w.store = sqlstoretest.MustOpen(t, engine, w.clock.Now)
	w.catalog = dict.NewCatalog("prod")
	require.NoError(t, w.catalog.SetCategory(category))
	w.limiter, err = throttle.NewLimiter(w.store, w.catalog, throttle.Config{Clock: w.clock.Now, Logger: quiet})
	require.NoError(t, err)
	w.client, err = dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: w.limiter, Catalog: w.catalog,
		Records: dictsql.NewRecords(w.store.DB(), w.store.ReadDB()), PaymentNoticeURL: hs.URL + "/sim/payments",
		CategoryRecheck: -1, Logger: quiet})
	require.NoError(t, err)
	return w
}

// arrival is one lookup of a trace, at Epoch+At; Pay sends its payment
// order when the key was found.
type arrival struct {
	At         time.Duration
	Key, Payer string
	Pay        bool
}

// lookups is a morning of a small participant: 150 lookups over 7.5
// minutes by 30 payers, one in three of a key with no entry (a 404), one
// found key in five paid for.
func lookups() []arrival {
	var out []arrival
	for i := range 150 {
		a := arrival{At: time.Duration(i) * 3 * time.Second, Key: knownPhone, Payer: makeCPF(i % 30), Pay: i%5 == 1}
		switch {
		case i%3 == 0:
			a.Key, a.Pay = fmt.Sprintf("nobody%d@example.com", i), false
		case i%7 == 0:
			a.Key = knownEmail
		}
		out = append(out, a)
	}
	return out
}

// lookedUp is one arrival's lookup: its EndToEndId and the mirror's
// decision.
type lookedUp struct {
	E2E      string
	Decision throttle.Decision
}

// run sends the trace through the DICT client, moving both clocks to each
// arrival, and returns one result per arrival.
func (w *dictWorld) run(trace []arrival) []lookedUp {
	t, ctx := w.t, context.Background()
	out := make([]lookedUp, len(trace))
	for i, a := range trace {
		at := throttletest.Epoch.Add(a.At)
		w.clock.AdvanceTo(at)
		_, err := w.sim.Advance(at.Sub(w.sim.Now()))
		require.NoError(t, err)
		res, err := w.client.GetEntry(ctx, dict.LookupRequest{Key: a.Key, PayerID: a.Payer})
		var re *dict.RemoteError
		if err != nil && !(errors.As(err, &re) && re.NotFound()) {
			require.NoError(t, err, "arrival %d", i)
		}
		out[i] = lookedUp{E2E: res.EndToEndID, Decision: res.Decision}
		if res.Decision.Allowed && res.Response != nil && a.Pay {
			_, err := w.client.CreditPayment(ctx, res.EndToEndID)
			require.NoError(t, err)
		}
	}
	require.NoError(t, w.limiter.FlushRefusals(ctx))
	return out
}

// whatif replays the world's ledger of the trace's period under sc.
func (w *dictWorld) whatif(sc whatif.Scenario, on func(whatif.Decision)) *whatif.Report {
	w.t.Helper()
	rep, err := whatif.Run(context.Background(), whatif.Config{Source: w.store, Limiter: w.limiter, Dict: w.catalog, OnDecision: on},
		whatif.Query{Policies: []string{dict.PolicyEntriesReadParticipantAntiscan}, From: throttletest.Epoch,
			To: throttletest.Epoch.Add(time.Hour), Scenario: sc})
	require.NoError(w.t, err)
	return rep
}

// requireSameDecision fails unless the replay decided as the mirror did,
// bucket by bucket (their balances after it included).
func requireSameDecision(t *testing.T, want, got throttle.Decision, msg string) {
	t.Helper()
	require.Equal(t, want.Allowed, got.Allowed, msg)
	require.Equal(t, want.Reason, got.Reason, msg)
	require.Equal(t, want.Key, got.Key, msg)
	require.Equal(t, want.RetryAfter, got.RetryAfter, msg)
	if want.Cached {
		return // a refusal from memory carries only the refused bucket
	}
	if !want.Allowed {
		// The ledger has no row of a refused request on a bucket that did
		// not refuse it (the participant's for a payer's refusal comes
		// back, the payer's for the participant's cannot): the buckets
		// that refused are all there.
		for _, b := range want.Buckets {
			if b.Reason != throttle.ReasonNone {
				require.True(t, slices.ContainsFunc(got.Buckets, func(g throttle.BucketDecision) bool {
					return g.Key == b.Key && g.Reason == b.Reason && g.Remaining == b.Remaining
				}), "%s: %s refused", msg, b.Key)
			}
		}
		return
	}
	require.Len(t, got.Buckets, len(want.Buckets), msg)
	for i, b := range want.Buckets {
		require.Equal(t, b.Key, got.Buckets[i].Key, msg)
		require.Equal(t, b.Reason, got.Buckets[i].Reason, msg)
		require.Equal(t, b.Remaining, got.Buckets[i].Remaining, "%s: %s", msg, b.Key)
	}
}

// Replaying a recorded run under its own settings reproduces every
// decision: a category H participant whose traffic the mirror refused in
// part (some refusals answered from memory, recorded in groups), its
// ledger read from SQLite or PostgreSQL.
func TestReplayUnderItsOwnSettingsReproducesEveryDecision(t *testing.T) {
	sqlstoretest.ForEachEngine(t, testIdentity)
}

func testIdentity(t *testing.T, engine sqlstore.Engine) {
	w := newDictWorld(t, engine, "H")
	recorded := w.run(lookups())
	byRef := map[string]lookedUp{}
	var refused, cached int
	for _, r := range recorded {
		byRef[r.E2E] = r
		if !r.Decision.Allowed {
			refused++
			if r.Decision.Cached {
				cached++
			}
		}
	}
	require.Positive(t, refused-cached, "the trace has refusals with their reference")
	require.Positive(t, cached, "and refusals answered from memory")

	var replayed, replayedRefused int
	rep := w.whatif(whatif.Scenario{}, func(d whatif.Decision) {
		replayed++
		if !d.Replayed.Allowed {
			replayedRefused++
		}
		r, ok := byRef[d.Ref]
		if d.Ref == "" {
			require.False(t, d.Recorded, "a group of refusals has no reference")
			require.False(t, d.Replayed.Allowed, "a refusal answered from memory is replayed as a refusal")
			return
		}
		require.True(t, ok, "replayed %q, which was not looked up", d.Ref)
		require.Equal(t, r.Decision.Allowed, d.Recorded)
		requireSameDecision(t, r.Decision, d.Replayed, d.Ref)
	})
	require.Equal(t, len(recorded), replayed)
	require.Equal(t, refused, replayedRefused)
	for _, p := range rep.Policies {
		require.Zero(t, p.Total.Worse, p.Policy)
		require.Zero(t, p.Total.Better, p.Policy)
		require.Equal(t, p.Total.RefusedThen, p.Total.RefusedNow, p.Policy)
	}
	require.Equal(t, int64(refused), rep.Unobserved)
}

// A run in which every lookup was sent (category C) replayed as category
// H decides, lookup by lookup, as the same arrivals sent live through the
// DICT client of a category H participant to the simulator.
func TestReplayUnderASmallerCategoryEqualsALiveRun(t *testing.T) {
	trace := lookups()
	roomy := newDictWorld(t, sqlstore.SQLite, "C")
	recorded := roomy.run(trace)
	index := map[string]int{}
	for i, r := range recorded {
		require.True(t, r.Decision.Allowed, "arrival %d was refused in the roomier run", i)
		index[r.E2E] = i
	}

	small := newDictWorld(t, sqlstore.SQLite, "H")
	live := small.run(trace)
	var liveRefused int
	for _, r := range live {
		if !r.Decision.Allowed {
			liveRefused++
		}
	}
	require.Positive(t, liveRefused, "category H refuses part of the trace")
	require.Zero(t, small.sim.Stats().Total(429), "the live mirror never overdrew the simulator")

	var n int
	rep := roomy.whatif(whatif.Scenario{Category: "H"}, func(d whatif.Decision) {
		i, ok := index[d.Ref]
		require.True(t, ok, "replayed %q, which was not looked up", d.Ref)
		require.Equal(t, n, i, "replayed in the order of arrival")
		n++
		requireSameDecision(t, live[i].Decision, d.Replayed, fmt.Sprintf("arrival %d", i))
	})
	require.Equal(t, len(trace), n)
	require.Zero(t, rep.Unobserved)
	participant := rep.Policies[0]
	require.Equal(t, dict.PolicyEntriesReadParticipantAntiscan, participant.Policy)
	require.False(t, participant.Sufficed())
	require.Equal(t, int64(liveRefused), participant.Total.Worse)
	require.Equal(t, int64(50), participant.Replayed.Capacity)
	require.Equal(t, int64(30000), participant.Recorded.Capacity)
	require.Contains(t, rep.Notes(i18n.New(i18n.English, time.UTC)),
		"Every request of the period was admitted in the recorded run: each replayed outcome is the one observed.")
}

// makeCPF returns the n-th valid CPF of a series.
func makeCPF(n int) string {
	s := fmt.Sprintf("%09d", 200000000+n)
	for _, length := range []int{9, 10} {
		sum := 0
		for i := 0; i < length; i++ {
			sum += int(s[i]-'0') * (length + 1 - i)
		}
		s += fmt.Sprint(sum * 10 % 11 % 10)
	}
	return s
}

// A lookup the recorded run refused was never sent: the replay counts each
// one it admits at its worst (it keeps its hold, a 404), reports the best
// case (nothing kept, a 500) beside it, and says so.
func TestUnobservedOutcomesAreCountedAtTheirWorst(t *testing.T) {
	w := newDictWorld(t, sqlstore.SQLite, "H")
	w.run(lookups())
	rep := w.whatif(whatif.Scenario{Category: "G", Capacity: 100}, nil)
	require.Positive(t, rep.Unobserved)
	p := rep.Policies[0]
	require.Equal(t, dict.PolicyEntriesReadParticipantAntiscan, p.Policy)
	require.Positive(t, p.Total.Better, "lookups refused then are admitted now")
	require.Less(t, p.BestRefused, p.Total.RefusedNow, "at their best the unobserved lookups leave more room")
	notes := strings.Join(rep.Notes(i18n.New(i18n.English, time.UTC)), "\n")
	require.Contains(t, notes, fmt.Sprintf("Requests refused in the recorded run: %d. Their outcome was never observed: each one the replay admits is counted at its worst", rep.Unobserved))
	require.Contains(t, notes, fmt.Sprintf("%s: with those outcomes at their best (nothing kept, a 500), the requests refused would have been %d instead of %d.", p.Policy, p.BestRefused, p.Total.RefusedNow))
	require.Contains(t, notes, fmt.Sprintf("%s: the participant's allowance would not have sufficed (lookups refused: %d", p.Policy, p.Total.RefusedNow))
}
