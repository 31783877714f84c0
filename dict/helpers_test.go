package dict_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// quiet discards the logs of clients and simulators under test.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one participant's app (client, local mirror on engine, fake
// clock) talking over loopback HTTP to a simulator whose clock moves with
// the app's.
type env struct {
	t       *testing.T
	ctx     context.Context
	clock   *throttle.ManualClock
	store   *sqlstore.Store
	catalog *dict.Catalog
	limiter *throttle.Limiter
	records dict.Records
	client  *dict.Client
	sim     *dictsim.Server
	simURL  string
}

type envConfig struct {
	// SimCategory is the category the simulator gives every participant;
	// LocalCategory the one the app's catalog starts with ("": the same).
	SimCategory, LocalCategory string
	// Latency is the simulator's answer latency (0: none).
	Latency time.Duration
	// Gate, when set, stands in front of the simulator (it is given the
	// simulator to pass requests on to): a test's hold on chosen requests.
	Gate func(sim http.Handler) http.Handler
}

func newEnv(t *testing.T, engine sqlstore.Engine, cfg envConfig) *env {
	t.Helper()
	ctx := context.Background()
	if cfg.SimCategory == "" {
		cfg.SimCategory = "A"
	}
	if cfg.LocalCategory == "" {
		cfg.LocalCategory = cfg.SimCategory
	}
	sim, err := dictsim.NewServer(ctx, dictsim.Config{
		EntriesFile: "testdata/entries.csv",
		Category:    cfg.SimCategory,
		Latency:     cfg.Latency,
		FakeClock:   true,
		Start:       throttletest.Epoch,
		Logger:      quiet,
	})
	require.NoError(t, err)
	var h http.Handler = sim
	if cfg.Gate != nil {
		h = cfg.Gate(sim)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		require.NoError(t, sim.Close())
	})

	e := &env{t: t, ctx: ctx, clock: throttle.NewManualClock(throttletest.Epoch), sim: sim, simURL: hs.URL}
	e.store = sqlstoretest.MustOpen(t, engine, e.clock.Now)
	e.catalog = dict.NewCatalog("prod")
	require.NoError(t, e.catalog.SetCategory(cfg.LocalCategory))
	e.limiter, err = throttle.NewLimiter(e.store, e.catalog, throttle.Config{Clock: e.clock.Now})
	require.NoError(t, err)
	e.records = dictsql.NewRecords(e.store.DB(), e.store.ReadDB())
	e.client = e.newClient(e.limiter, e.records)
	return e
}

// newClient returns another client of the same participant on the same
// simulator (another app instance when given another limiter).
func (e *env) newClient(lim *throttle.Limiter, records dict.Records) *dict.Client {
	e.t.Helper()
	c, err := dict.NewClient(dict.ClientConfig{
		BaseURL: e.simURL, Participant: ispb, Limiter: lim, Catalog: e.catalog, Records: records, Logger: quiet,
	})
	require.NoError(e.t, err)
	return c
}

// advance moves both clocks: the app's, and the simulator's through
// POST /sim/clock.
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	e.clock.Advance(d)
	resp, err := http.Post(e.simURL+"/sim/clock?advance="+d.String(), "", nil)
	require.NoError(e.t, err)
	resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	require.Equal(e.t, e.clock.Now(), e.sim.Now())
}

// stats reads GET /sim/stats.
func (e *env) stats() dictsim.Stats {
	e.t.Helper()
	resp, err := http.Get(e.simURL + "/sim/stats")
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var st dictsim.Stats
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// sent counts the requests of op the simulator answered.
func (e *env) sent(op string) int64 {
	var n int64
	for _, c := range e.stats()[op] {
		n += c
	}
	return n
}

// pay stands for the SPI receiving a pacs.008 (POST /sim/payments).
func (e *env) pay(e2e string) dictsim.PaymentResult {
	e.t.Helper()
	resp, err := http.Post(e.simURL+"/sim/payments?endToEndId="+e2e, "", nil)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var res dictsim.PaymentResult
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&res))
	return res
}

// lookup sends a getEntry and returns its error.
// A refusal comes back as a *throttle.RefusedError (the result's Decision).
func (e *env) lookup(key, payer string) error {
	res, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: key, PayerID: payer})
	if err == nil && !res.Decision.Allowed {
		return &throttle.RefusedError{Op: "dict getEntry", Decision: res.Decision}
	}
	return err
}

// tokens returns the local balance of policy's bucket for identifier.
func (e *env) tokens(policy, identifier string) int64 {
	e.t.Helper()
	st, err := e.limiter.State(e.ctx, e.catalog.Key(policy, identifier))
	require.NoError(e.t, err)
	return st.Tokens
}

// remoteTokens returns the simulator's balance of the same bucket.
func (e *env) remoteTokens(policy, identifier string) int64 {
	e.t.Helper()
	n, ok := e.sim.Balance(policy, identifier)
	require.True(e.t, ok, "the simulator has no policy %s", policy)
	return n
}

func requireNotFound(t *testing.T, err error) {
	t.Helper()
	var re *dict.RemoteError
	require.ErrorAs(t, err, &re)
	require.True(t, re.NotFound(), "%v", err)
	require.NotNil(t, re.Problem)
	require.Equal(t, dict.ProblemEntryNotFound, re.Problem.TypeName())
}

func requireRefused(t *testing.T, err error) *throttle.RefusedError {
	t.Helper()
	var re *throttle.RefusedError
	require.ErrorAs(t, err, &re)
	return re
}

// makeCPF returns the n-th valid CPF of a series.
func makeCPF(n int) string {
	s := fmt.Sprintf("%09d", 200000000+n)
	for _, length := range []int{9, 10} {
		sum := 0
		for i := 0; i < length; i++ {
			sum += int(s[i]-'0') * (length + 1 - i)
		}
		dv := sum * 10 % 11 % 10
		s += fmt.Sprint(dv)
	}
	return s
}

// Keys of testdata/entries.csv and keys that are not there.
const (
	knownPhone = "+5561988880000"
	knownEmail = "maria.souza@example.com"
	knownEVP   = "123e4567-e89b-12d3-a456-426614174000"
)

func unknownEmail(i int) string { return fmt.Sprintf("nobody%d@example.com", i) }
func unknownEVP(i int) string   { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
