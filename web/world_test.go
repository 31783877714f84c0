package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// participant is the DICT participant of the tests (its ISPB).
const participant = "12345678"

// sims are the SIFEN and DICT sides of a test server: the real sifen.Sender
// over a sifensim on loopback HTTP, and the real dict.Client over a
// dictsim holding dict/testdata/entries.csv. Both share the test's fake
// clock through the SQL store (the dictsim has a fake clock of its own).
type sims struct {
	sifenOn bool
	sifenCf sifenConfig
	dictOn  bool

	sql     *sqlstore.Store // documents and DICT records; also the throttle's store unless an option chose another
	sifenR  *sifen.Resolver
	sim     *sifensim.Server
	simURL  string
	sender  *sifen.Sender
	catalog *dict.Catalog
	dictSim *dictsim.Server
	dictURL string
	dict    *dict.Client
	records *dictsql.Records
}

type sifenConfig struct {
	policy sifen.PolicyConfig
	sim    sifensim.Config
	// fake replaces the SifenSender the server gets.
	fake web.SifenSender
	// front, when set, stands between the sender and the simulator.
	front func(sim http.Handler) http.Handler
}

// withSifen gives the server the documents pages over a real sender.
func withSifen(cfg sifenConfig) option {
	return func(e *env) { e.sifenOn, e.sifenCf = true, cfg }
}

// withDict gives the server the DICT lookup page and /policies/ over a real
// client and a simulator.
func withDict() option {
	return func(e *env) { e.dictOn = true }
}

// openSQLIfNeeded opens a SQLite store for the documents and DICT records
// when a side needs one; it is also the throttle's store unless an option
// chose another (a failing store: then the DICT client has no records).
func (e *env) openSQLIfNeeded(t testing.TB) {
	if !e.sifenOn && !e.dictOn {
		return
	}
	if s, ok := e.store.(*sqlstore.Store); ok {
		e.sql = s
		return
	}
	if e.store == nil || e.sifenOn {
		e.sql = sqlstoretest.MustOpen(t, sqlstore.SQLite, e.clock.Now)
	}
	if e.store == nil {
		e.store = e.sql
	}
}

// simResolvers are the DICT catalog and the SIFEN policies, when on.
func (e *env) simResolvers(t testing.TB) throttle.Resolvers {
	var rs throttle.Resolvers
	if e.dictOn {
		e.catalog = dict.NewCatalog("prod")
		require.NoError(t, e.catalog.SetCategory("A"))
		rs = append(rs, e.catalog)
	}
	if e.sifenOn {
		r, err := sifen.NewResolver(e.sifenCf.policy)
		require.NoError(t, err)
		e.sifenR = r
		rs = append(rs, r)
	}
	return rs
}

// attachSims starts the simulators and gives s the sender and the client.
func (e *env) attachSims(t testing.TB, s *web.Server) {
	if e.sifenOn {
		cfg := e.sifenCf.sim
		cfg.Clock, cfg.Advance = e.clock.Now, e.clock.Advance
		cfg.Logger = testLogger(t)
		sim, err := sifensim.NewServer(cfg)
		require.NoError(t, err)
		var h http.Handler = sim
		if e.sifenCf.front != nil {
			h = e.sifenCf.front(sim)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		e.sim, e.simURL = sim, ts.URL
		client, err := sifen.NewClient(sifen.ClientConfig{BaseURL: ts.URL + "/{env}", Timeout: 10 * time.Second})
		require.NoError(t, err)
		e.sender, err = sifen.NewSender(sifensql.New(e.sql), client, e.limiter, sifen.SenderConfig{Clock: e.clock.Now, Logger: testLogger(t), Resolver: e.sifenR})
		require.NoError(t, err)
		s.Sifen = e.sender
		if e.sifenCf.fake != nil {
			s.Sifen = e.sifenCf.fake
		}
	}
	if e.dictOn {
		entries, err := dictsim.LoadEntries("../dict/testdata/entries.csv")
		require.NoError(t, err)
		sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
			Entries: entries, Category: "A", FakeClock: true, Start: e.clock.Now(), Logger: testLogger(t),
		})
		require.NoError(t, err)
		require.NoError(t, sim.Open("127.0.0.1:0"))
		t.Cleanup(func() { require.NoError(t, sim.Close()) })
		e.dictSim, e.dictURL = sim, sim.URL()
		if e.sql != nil {
			e.records = dictsql.NewRecords(e.sql.DB(), e.sql.ReadDB())
		}
		e.dict, err = dict.NewClient(dict.ClientConfig{
			BaseURL: sim.URL(), Participant: participant, Limiter: e.limiter, Catalog: e.catalog,
			Records: e.records, Logger: testLogger(t),
		})
		require.NoError(t, err)
		s.Dict = e.dict
		s.Scope = web.Scopes(e.catalog)
	}
}

// dictStats reads the DICT simulator's responses by operation and status.
func (e *env) dictStats(t testing.TB) dictsim.Stats {
	t.Helper()
	resp, err := http.Get(e.dictURL + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st dictsim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// sifenSends counts the siRecepLoteDE requests the SIFEN simulator got.
func (e *env) sifenSends(t testing.TB) int64 {
	t.Helper()
	return e.sim.Stats().Count("siRecepLoteDE", "", "", "")
}
