package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// sifenGatewayWorld is the SIFEN simulator and a SIFEN gateway in front of
// it, sharing a fake clock that the gateway's holds move.
type sifenGatewayWorld struct {
	clock *throttle.ManualClock
	// now and sleep are the world's time: the fake clock (a hold moves it),
	// or the real one (newRealSifenGatewayWorld).
	now    throttle.Clock
	sleep  func(context.Context, time.Duration) error
	policy sifen.PolicyConfig
	// consulta is the senders' SenderConfig.ConsultaInterval (0: default).
	consulta time.Duration
	sim      *sifensim.Server
	simURL   string
	// configure, when set, changes the configuration of the gateways
	// started after (their clients, audit trail, metrics); serve, when
	// set, serves them (over TLS).
	configure func(*web.SifenGatewayConfig)
	serve     func(http.Handler) *httptest.Server
	// sender is the first gateway's.
	sender *sifen.Sender
	dsn    string
	URL    string // the first gateway's
}

func newSifenGatewayWorld(t *testing.T, engine sqlstore.Engine, hold time.Duration) *sifenGatewayWorld {
	t.Helper()
	w := &sifenGatewayWorld{clock: throttle.NewManualClock(throttletest.Epoch)}
	w.now = w.clock.Now
	// Each holder wakes at its own instant: concurrent holds of 10 s end
	// together, they do not add up.
	w.sleep = func(_ context.Context, d time.Duration) error { w.clock.AdvanceTo(w.clock.Now().Add(d)); return nil }
	sim, err := sifensim.NewServer(sifensim.Config{Clock: w.clock.Now, Advance: w.clock.Advance, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return w.start(t, sim, engine, hold)
}

// newRealSifenGatewayWorld is a world on the real clock, with an interval
// of 300 ms at the gateway and 250 ms at the simulator (which processes a
// lot in 100 ms; a lot's results may be asked 200 ms after its send): a test of holds
// while lots are really on the wire. On the fake clock, holders that loop
// while a slow lot is in flight move time past that lot's hold (two
// timeouts) in no real time, and the next lot of the RUC leaves while the
// first is still on the wire (0301 under load).
func newRealSifenGatewayWorld(t *testing.T, engine sqlstore.Engine, hold time.Duration) *sifenGatewayWorld {
	t.Helper()
	return newIntervalSifenGatewayWorld(t, engine, hold, 300*time.Millisecond, 250*time.Millisecond)
}

// newIntervalSifenGatewayWorld is newRealSifenGatewayWorld with the RUC
// interval interval at the gateway and simInterval at the simulator.
func newIntervalSifenGatewayWorld(t *testing.T, engine sqlstore.Engine, hold, interval, simInterval time.Duration) *sifenGatewayWorld {
	t.Helper()
	w := &sifenGatewayWorld{now: throttle.SystemClock, policy: sifen.PolicyConfig{Interval: interval}, consulta: 200 * time.Millisecond}
	sim, err := sifensim.NewServer(sifensim.Config{Interval: simInterval, Processing: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return w.start(t, sim, engine, hold)
}

func (w *sifenGatewayWorld) start(t testing.TB, sim *sifensim.Server, engine sqlstore.Engine, hold time.Duration) *sifenGatewayWorld {
	t.Helper()
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	w.sim, w.simURL = sim, ts.URL
	w.dsn = sqlstoretest.DSN(t, engine)
	w.URL = w.newGateway(t, hold)
	return w
}

// newGateway starts another gateway instance (a store, limiter and sender
// of its own on the world's database) and returns its URL.
func (w *sifenGatewayWorld) newGateway(t testing.TB, hold time.Duration) string {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	store := sqlstoretest.MustOpenDSN(t, w.dsn, w.now)
	resolver, err := sifen.NewResolver(w.policy)
	require.NoError(t, err)
	lim, err := throttle.NewLimiter(store, resolver, throttle.Config{Clock: w.now})
	require.NoError(t, err)
	client, err := sifen.NewClient(sifen.ClientConfig{BaseURL: w.simURL + "/{env}", Timeout: 10 * time.Second})
	require.NoError(t, err)
	sender, err := sifen.NewSender(sifensql.New(store), client, lim, sifen.SenderConfig{Clock: w.now, ConsultaInterval: w.consulta, Logger: quiet, Resolver: resolver})
	require.NoError(t, err)
	cfg := web.SifenGatewayConfig{Sender: sender, Client: client, Env: sifen.EnvTest, Hold: hold, Logger: quiet,
		Sleep: w.sleep, Authenticate: anyClient}
	if w.configure != nil {
		w.configure(&cfg)
	}
	g, err := web.NewSifenGateway(cfg)
	require.NoError(t, err)
	serve := httptest.NewServer
	if w.serve != nil {
		serve = w.serve
	}
	gs := serve(g)
	t.Cleanup(gs.Close)
	if w.sender == nil {
		w.sender = sender
	}
	return gs.URL
}

// sendLot posts siRecepLoteDE with docs to the gateway, as any SOAP
// client would, and returns the status, Retry-After and body.
func (w *sifenGatewayWorld) sendLot(t *testing.T, docs ...sifentest.Doc) (int, string, []byte) {
	t.Helper()
	return w.sendLotTo(t, w.URL, docs...)
}

func (w *sifenGatewayWorld) sendLotTo(t *testing.T, base string, docs ...sifentest.Doc) (int, string, []byte) {
	t.Helper()
	z, err := sifen.ZipLote(sifentest.Lote(docs...))
	require.NoError(t, err)
	body, err := sifen.MarshalSOAP(sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(z)})
	require.NoError(t, err)
	return w.postTo(t, base, sifen.RecepcionPath, body)
}

func (w *sifenGatewayWorld) post(t *testing.T, path string, body []byte) (int, string, []byte) {
	t.Helper()
	return w.postTo(t, w.URL, path, body)
}

func (w *sifenGatewayWorld) postTo(t *testing.T, base, path string, body []byte) (int, string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", sifen.SOAPContentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Retry-After"), data
}

// Lots of three RUCs from several concurrent clients, two lots per RUC
// back to back: the gateway holds each second lot for its RUC's interval,
// so SIFEN queues every lot (0 × 0301) and no DE goes twice.
func TestSifenGatewayHoldsLotsForTheirRUC(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			w := newRealSifenGatewayWorld(t, engine, time.Minute)
			rucs := []string{"80069563", "80012345", "80000005"}
			var mu sync.Mutex
			lots := map[string]bool{}
			var wg sync.WaitGroup
			for i, ruc := range rucs {
				for k := range 2 {
					wg.Go(func() {
						status, _, body := w.sendLot(t, sifentest.Doc{RUC: ruc, Number: 10*i + k + 1}, sifentest.Doc{RUC: ruc, Number: 10*i + k + 5})
						require.Equal(t, http.StatusOK, status, "%s", body)
						resp, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](body)
						require.NoError(t, err)
						require.Nil(t, fault)
						require.Equal(t, sifensim.CodeLotQueued, resp.Code)
						mu.Lock()
						lots[resp.LotNumber] = true
						mu.Unlock()
					})
				}
			}
			wg.Wait()
			require.Len(t, lots, 6)
			st := w.sim.Stats()
			require.Zero(t, st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotNotQueued), "0301s")
			require.Equal(t, int64(6), st.Count(sifen.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued))
		})
	}
}

// Without a hold, a lot inside its RUC's interval is a SOAP fault with
// Retry-After, not a SIFEN code, and nothing is sent; a lot sent twice is
// refused the second time.
func TestSifenGatewayRefusesWithAFault(t *testing.T) {
	w := newSifenGatewayWorld(t, sqlstore.SQLite, -1)
	status, _, body := w.sendLot(t, sifentest.Doc{Number: 1})
	require.Equal(t, http.StatusOK, status, "%s", body)
	// SIFEN's own prefixes, which clients written against SIFEN read by.
	require.Contains(t, string(body), `<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Header/><env:Body><ns2:rResEnviLoteDe xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:dFecProc>`)

	status, retryAfter, body := w.sendLot(t, sifentest.Doc{Number: 2})
	require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	secs, err := strconv.Atoi(retryAfter)
	require.NoError(t, err)
	require.Positive(t, secs)
	_, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](body)
	require.NoError(t, err)
	require.NotNil(t, fault)
	require.Contains(t, fault.Reason, fmt.Sprintf("send again after %d s", secs))

	status, _, body = w.sendLot(t, sifentest.Doc{Number: 1})
	require.Equal(t, http.StatusConflict, status, "%s", body)
	require.Equal(t, int64(1), w.sim.Stats().Count(sifen.ServiceRecepcionLote, "", "", ""), "what reached SIFEN")
}

// The results of a lot are read through the gateway.
func TestSifenGatewayAnswersLotResults(t *testing.T) {
	w := newSifenGatewayWorld(t, sqlstore.SQLite, time.Minute)
	status, _, body := w.sendLot(t, sifentest.Doc{Number: 1})
	require.Equal(t, http.StatusOK, status, "%s", body)
	sent, _, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](body)
	require.NoError(t, err)
	w.clock.Advance(time.Hour)
	q, err := sifen.MarshalSOAP(sifen.ConsultaLote{ID: "2", LotNumber: sent.LotNumber})
	require.NoError(t, err)
	status, _, body = w.post(t, sifen.ConsultaLotePath, q)
	require.Equal(t, http.StatusOK, status, "%s", body)
	res, fault, err := sifen.UnmarshalSOAP[sifen.ConsultaLoteResponse](body)
	require.NoError(t, err)
	require.Nil(t, fault)
	require.Equal(t, sifensim.CodeLotDone, res.Code)
	require.Len(t, res.Results, 1)
	require.True(t, res.Results[0].Approved())
}

// Two gateway instances on one PostgreSQL, neither holding: lots of one
// RUC sent to both at once are admitted exactly as by one gateway — one
// lot reaches SIFEN, every other is a 429 fault, none a 0301.
func TestSifenGatewayTwoInstancesShareTheRUCGate(t *testing.T) {
	if os.Getenv(sqlstoretest.PostgresEnv) == "" {
		t.Skip(sqlstoretest.PostgresEnv + " not set: skipping PostgreSQL")
	}
	w := newSifenGatewayWorld(t, sqlstore.Postgres, -1)
	urls := []string{w.URL, w.newGateway(t, -1)}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			status, _, body := w.sendLotTo(t, urls[i%2], sifentest.Doc{Number: i + 1})
			require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, status, "%s", body)
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusTooManyRequests: 7}, statuses)
	st := w.sim.Stats()
	require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "", "", ""))
	require.Zero(t, st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotNotQueued))
}

// anyClient is the Authenticate of the tests that are not about clients:
// every request is the client "test" (gateway_auth_test.go tests clients).
func anyClient(*http.Request) (string, bool) { return "test", true }

// What the gateway refuses leaves no document behind: a lot of 51 DEs, a
// lot of two RUCs, a lot already sent, a lot whose client stopped waiting
// during its hold and a lot whose hold ran out behind the RUC's other
// lots are each refused and stored nowhere, so "Send all drafts"
// afterwards finds nothing to send. (The gateway imported a lot before it
// checked the lot rules: a 51-DE lot was answered 400 and its DEs stayed
// drafts, which "Send all drafts" then sent.)
func TestSifenGatewayRefusalsLeaveNoDraft(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			// An interval of 1 s at the gateway (800 ms at the simulator).
			w := newIntervalSifenGatewayWorld(t, engine, time.Minute, time.Second, 800*time.Millisecond)
			status, _, body := w.sendLot(t, sifentest.Docs("80069563", 1, 51)...)
			require.Equal(t, http.StatusBadRequest, status, "%s", body)
			require.Contains(t, string(body), "50")
			status, _, body = w.sendLot(t, sifentest.Doc{RUC: "80069563", Number: 100}, sifentest.Doc{RUC: "80012345", Number: 101})
			require.Equal(t, http.StatusBadRequest, status, "%s", body)

			sent := []sifentest.Doc{{RUC: "80000005", Number: 200}, {RUC: "80000005", Number: 201}}
			status, _, body = w.sendLot(t, sent...)
			require.Equal(t, http.StatusOK, status, "%s", body)
			status, _, body = w.sendLot(t, sent...)
			require.Equal(t, http.StatusConflict, status, "%s", body)

			// Held for the RUC's interval, the client gives up first.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+sifen.RecepcionPath, bytes.NewReader(lotBody(t, sifentest.Doc{RUC: "80000005", Number: 202})))
			require.NoError(t, err)
			_, err = http.DefaultClient.Do(req)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)

			// Three lots of a RUC at once, held at most 1.9 s with an
			// interval of 1 s from the previous lot's answer: the first
			// goes, the second after the interval (0.9 s left for the
			// first lot's answer on a loaded machine), the third's hold
			// runs out in line (it could go 2 s after the first at best).
			short := w.newGateway(t, 1900*time.Millisecond)
			var mu sync.Mutex
			statuses := map[int]int{}
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Go(func() {
					status, _, body := w.sendLotTo(t, short, sifentest.Doc{RUC: "80069563", Number: 300 + i})
					require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, status, "%s", body)
					mu.Lock()
					statuses[status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			require.Equal(t, map[int]int{http.StatusOK: 2, http.StatusTooManyRequests: 1}, statuses)

			drafts, err := w.sender.List(context.Background(), sifen.Filter{Statuses: []sifen.Status{sifen.StatusDraft, sifen.StatusError}})
			require.NoError(t, err)
			require.Empty(t, drafts, "a draft of a refused request")
			results, err := sifen.SendDocuments(context.Background(), w.sender, drafts, sifen.BatchConfig{})
			require.NoError(t, err)
			require.Empty(t, results, "Send all drafts sends nothing")
			all, err := w.sender.List(context.Background(), sifen.Filter{})
			require.NoError(t, err)
			require.Len(t, all, 4, "the DEs SIFEN received, and no other")
			st := w.sim.Stats()
			require.Equal(t, int64(3), st.Count(sifen.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued))
			require.Zero(t, st.Count("", "", "", sifen.CodeLotNotQueued))
		})
	}
}
