package sifen_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// world is a Sender on a real database talking over loopback HTTP to a
// simulator; both read one fake clock.
type world struct {
	dsn     string
	clock   *throttle.ManualClock
	sim     *sifensim.Server
	simURL  string
	store   *sqlstore.Store
	limiter *throttle.Limiter
	sender  *sifen.Sender
}

type worldConfig struct {
	policy sifen.PolicyConfig
	sim    sifensim.Config
	sender sifen.SenderConfig
	// limiterStore replaces the throttle's store (failure injection);
	// documents stay in the SQL store.
	limiterStore func(*sqlstore.Store) throttle.Store
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newWorld(t *testing.T, engine sqlstore.Engine, cfg worldConfig) *world {
	t.Helper()
	w := &world{dsn: sqlstoretest.DSN(t, engine), clock: throttle.NewManualClock(throttletest.Epoch)}
	cfg.sim.Clock, cfg.sim.Advance = w.clock.Now, w.clock.Advance
	if cfg.sim.Logger == nil {
		cfg.sim.Logger = quietLogger()
	}
	sim, err := sifensim.NewServer(cfg.sim)
	require.NoError(t, err)
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	w.sim, w.simURL = sim, ts.URL
	w.store = sqlstoretest.MustOpenDSN(t, w.dsn, w.clock.Now)
	var ls throttle.Store = w.store
	if cfg.limiterStore != nil {
		ls = cfg.limiterStore(w.store)
	}
	w.limiter, w.sender = newSender(t, ls, w.store, w.simURL, cfg.policy, w.clock.Now, cfg.sender)
	return w
}

// newSender builds the limiter and Sender of one process.
func newSender(t testing.TB, ls throttle.Store, store *sqlstore.Store, simURL string, policy sifen.PolicyConfig, clock throttle.Clock, cfg sifen.SenderConfig) (*throttle.Limiter, *sifen.Sender) {
	t.Helper()
	r, err := sifen.NewResolver(policy)
	require.NoError(t, err)
	l, err := throttle.NewLimiter(ls, r, throttle.Config{Clock: clock, Logger: quietLogger()})
	require.NoError(t, err)
	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: simURL + "/{env}", Timeout: 30 * time.Second})
	require.NoError(t, err)
	cfg.Clock, cfg.Resolver = clock, r
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := sifen.NewSender(sifensql.New(store), c, l, cfg)
	require.NoError(t, err)
	return l, s
}

// stats reads the simulator's GET /sim/stats over HTTP.
func (w *world) stats(t *testing.T) sifensim.Stats {
	t.Helper()
	resp, err := http.Get(w.simURL + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st sifensim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// importDocs imports each XML and returns the documents' ids in order.
func (w *world) importDocs(t *testing.T, env sifen.Env, xmls ...[]byte) []int64 {
	t.Helper()
	var ids []int64
	for _, x := range xmls {
		docs, err := w.sender.Import(context.Background(), x, env)
		require.NoError(t, err)
		for _, d := range docs {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func (w *world) doc(t *testing.T, id int64) sifen.Document {
	t.Helper()
	d, err := w.sender.Get(context.Background(), id)
	require.NoError(t, err)
	return d
}

// requireResolvedOnceStale checks Resolve on documents a send left in
// "sending": a claim younger than ResolveAfter may be a live send in
// another process and is left alone; once it is that old, Resolve settles
// exactly want.
func (w *world) requireResolvedOnceStale(t *testing.T, want ...sifen.Resolved) {
	t.Helper()
	ctx := context.Background()
	resolved, err := w.sender.Resolve(ctx)
	require.NoError(t, err)
	require.Empty(t, resolved)

	w.clock.Advance(sifen.DefaultResolveAfter)
	resolved, err = w.sender.Resolve(ctx)
	require.NoError(t, err)
	// Issue 11 point 3: SIFEN's 0420 while the lot may still be processing
	// (DNIT: 1 to 24 hours) is not definitive; the document stays
	// unsendable until the claim is DefaultNotFoundAfter old.
	var early []sifen.Resolved
	for _, r := range want {
		if r.Code == sifen.CodeDENotFound {
			r.Status = sifen.StatusSending
		}
		early = append(early, r)
	}
	require.Equal(t, early, resolved)
	for _, r := range want {
		if r.Code == sifen.CodeDENotFound {
			d := w.doc(t, r.DocumentID)
			require.Equal(t, sifen.StatusSending, d.Status)
			require.Contains(t, d.Message, "not definitive")
		}
	}
	if len(early) == 0 || slices.Equal(early, want) {
		return
	}
	claimed := w.doc(t, want[0].DocumentID).ClaimedAt
	w.clock.Advance(claimed.Add(sifen.DefaultNotFoundAfter - time.Second).Sub(w.clock.Now()))
	resolved, err = w.sender.Resolve(ctx)
	require.NoError(t, err)
	require.Equal(t, early, resolved, "a second before the 48 h, still not definitive")
	w.clock.Advance(time.Second)
	resolved, err = w.sender.Resolve(ctx)
	require.NoError(t, err)
	require.Equal(t, want, resolved)
}

// ledgerRows counts the throttle's ledger rows: every take and refusal
// writes one, so 0 means the throttle was never asked.
func (w *world) ledgerRows(t *testing.T) int64 {
	t.Helper()
	n, err := inspect.New(w.limiter, w.store).CountLedger(context.Background(), inspect.LedgerQuery{})
	require.NoError(t, err)
	return n
}
