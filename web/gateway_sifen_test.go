package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
	sim    *sifensim.Server
	simURL string
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
// of 300 ms at the gateway and 250 ms at the simulator: a test of holds
// while lots are really on the wire. On the fake clock, holders that loop
// while a slow lot is in flight move time past that lot's hold (two
// timeouts) in no real time, and the next lot of the RUC leaves while the
// first is still on the wire (0301 under load).
func newRealSifenGatewayWorld(t *testing.T, engine sqlstore.Engine, hold time.Duration) *sifenGatewayWorld {
	t.Helper()
	w := &sifenGatewayWorld{now: throttle.SystemClock, policy: sifen.PolicyConfig{Interval: 300 * time.Millisecond}}
	sim, err := sifensim.NewServer(sifensim.Config{Interval: 250 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return w.start(t, sim, engine, hold)
}

func (w *sifenGatewayWorld) start(t *testing.T, sim *sifensim.Server, engine sqlstore.Engine, hold time.Duration) *sifenGatewayWorld {
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
func (w *sifenGatewayWorld) newGateway(t *testing.T, hold time.Duration) string {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	store := sqlstoretest.MustOpenDSN(t, w.dsn, w.now)
	resolver, err := sifen.NewResolver(w.policy)
	require.NoError(t, err)
	lim, err := throttle.NewLimiter(store, resolver, throttle.Config{Clock: w.now})
	require.NoError(t, err)
	client, err := sifen.NewClient(sifen.ClientConfig{BaseURL: w.simURL + "/{env}", Timeout: 10 * time.Second})
	require.NoError(t, err)
	sender, err := sifen.NewSender(sifensql.New(store), client, lim, sifen.SenderConfig{Clock: w.now, Logger: quiet})
	require.NoError(t, err)
	g, err := web.NewSifenGateway(web.SifenGatewayConfig{Sender: sender, Client: client, Env: sifen.EnvTest, Hold: hold, Logger: quiet,
		Sleep: w.sleep})
	require.NoError(t, err)
	gs := httptest.NewServer(g)
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
						require.Equal(t, sifen.CodeLotQueued, resp.Code)
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
			require.Equal(t, int64(6), st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotQueued))
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
	require.Equal(t, sifen.CodeLotDone, res.Code)
	require.Len(t, res.Results, 1)
	require.True(t, res.Results[0].Approved())
}

// Two Python processes (testdata/gateway/send_sirecepde.py, the standard
// library only, written like an issuer's send_sirecepde.py) send lots of
// three RUCs through one gateway at once: every lot is queued (0 × 0301),
// no DE twice, and the results are read back through the gateway.
func TestSifenGatewayServesPythonProcesses(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	w := newSifenGatewayWorld(t, sqlstore.SQLite, time.Minute)
	dir := t.TempDir()
	rucs := []string{"80069563", "80012345", "80000005"}
	files := [2][]string{}
	for p := range 2 {
		for i, ruc := range rucs {
			name := filepath.Join(dir, fmt.Sprintf("lote-%d-%d.xml", p, i))
			lot := sifentest.Lote(sifentest.Doc{RUC: ruc, Number: 100*p + 10*i + 1}, sifentest.Doc{RUC: ruc, Number: 100*p + 10*i + 2})
			require.NoError(t, os.WriteFile(name, lot, 0o644))
			files[p] = append(files[p], name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type sent struct {
		Status    int    `json:"status"`
		Code      string `json:"code"`
		LotNumber string `json:"lot_number"`
		Fault     string `json:"fault"`
	}
	outs := make([][]byte, 2)
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Go(func() {
			args := append([]string{"../testdata/gateway/send_sirecepde.py", "--url", w.URL, "--deadline", "30"}, files[p]...)
			out, err := exec.CommandContext(ctx, python, args...).Output()
			require.NoError(t, err, "%s", out)
			outs[p] = out
		})
	}
	wg.Wait()
	var lots []string
	for _, out := range outs {
		for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var s sent
			require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
			require.Equal(t, sifen.CodeLotQueued, s.Code, "%s", raw)
			lots = append(lots, s.LotNumber)
		}
	}
	require.Len(t, lots, 6)
	st := w.sim.Stats()
	require.Zero(t, st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotNotQueued), "0301s")
	require.Equal(t, int64(6), st.Count(sifen.ServiceRecepcionLote, "", "", ""), "lots that reached SIFEN")

	w.clock.Advance(time.Hour)
	out, err := exec.CommandContext(ctx, python, append([]string{"../testdata/gateway/send_sirecepde.py", "--url", w.URL, "--results"}, lots...)...).Output()
	require.NoError(t, err, "%s", out)
	cdcs := map[string]int{}
	for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r struct {
			Code    string `json:"code"`
			Results []struct {
				CDC    string `json:"cdc"`
				Result string `json:"result"`
			} `json:"results"`
		}
		require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
		require.Equal(t, sifen.CodeLotDone, r.Code, "%s", raw)
		for _, res := range r.Results {
			cdcs[res.CDC]++
			require.Equal(t, sifen.ResultApproved, res.Result)
		}
	}
	require.Len(t, cdcs, 12)
	for cdc, n := range cdcs {
		require.Equal(t, 1, n, "%s went twice", cdc)
	}
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

// facturacionelectronicapy-setapi (npm), unchanged but for the host of its
// hardcoded SIFEN URL, sends lots of three RUCs from two Node processes at
// once through the gateway: every lot answered 0300 as SIFEN writes it
// (setapi parses env:Envelope/ns2:rResEnviLoteDe), 0 × 0301, no DE twice.
// It needs node, openssl and setapi installed in test-tools/ (pinned by its
// package-lock.json; `make test` runs `npm ci --prefix test-tools`), or in
// the directory BALDE_TEST_SETAPI_DIR names.
func TestSifenGatewayServesSetapi(t *testing.T) {
	dir := os.Getenv("BALDE_TEST_SETAPI_DIR")
	if dir == "" {
		abs, err := filepath.Abs(filepath.Join("..", "test-tools"))
		require.NoError(t, err)
		dir = abs
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "facturacionelectronicapy-setapi")); err != nil {
		t.Skipf("SKIP (setapi through the gateway): facturacionelectronicapy-setapi is not installed in %s: run `npm ci --prefix test-tools` (make test does)", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed (setapi needs a PKCS#12 certificate)")
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key, crt, p12 := filepath.Join(tmp, "k.pem"), filepath.Join(tmp, "c.pem"), filepath.Join(tmp, "cert.p12")
	out, err := exec.CommandContext(ctx, openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=balde test").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.CommandContext(ctx, openssl, "pkcs12", "-export", "-out", p12, "-inkey", key, "-in", crt, "-passout", "pass:test").CombinedOutput()
	require.NoError(t, err, "%s", out)

	w := newSifenGatewayWorld(t, sqlstore.SQLite, time.Minute)
	rucs := []string{"80069563", "80012345", "80000005"}
	outs := make([][]byte, 2)
	var wg sync.WaitGroup
	for p := range 2 {
		args := []string{"../testdata/gateway/setapi_send.js", w.URL, p12, "test"}
		for i, ruc := range rucs {
			if i > 0 {
				args = append(args, "--")
			}
			args = append(args, strconv.Itoa(100*p+i+1))
			for k := range 2 {
				name := filepath.Join(tmp, fmt.Sprintf("de-%d-%d-%d.xml", p, i, k))
				require.NoError(t, os.WriteFile(name, sifentest.Doc{RUC: ruc, Number: 100*p + 10*i + k + 1}.File(), 0o644))
				args = append(args, name)
			}
		}
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, node, args...)
			cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
			out, err := cmd.Output()
			require.NoError(t, err, "%s", out)
			outs[p] = out
		})
	}
	wg.Wait()
	n := 0
	for _, out := range outs {
		for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var r struct {
				OK   bool `json:"ok"`
				Body struct {
					Answer map[string]any `json:"ns2:rResEnviLoteDe"`
				} `json:"body"`
			}
			require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
			require.True(t, r.OK, "%s", raw)
			require.Equal(t, sifen.CodeLotQueued, r.Body.Answer["ns2:dCodRes"], "%s", raw)
			n++
		}
	}
	require.Equal(t, 6, n)
	st := w.sim.Stats()
	require.Zero(t, st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotNotQueued), "0301s")
	require.Equal(t, int64(6), st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotQueued))
}
