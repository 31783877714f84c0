package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

const gatewayISPB = "12345678"

// gatewayWorld is a DICT simulator (fake clock), and the gateways of one
// participant in front of it, all on one database.
type gatewayWorld struct {
	clock   *throttle.ManualClock
	sim     *dictsim.Server
	simURL  string
	catalog *dict.Catalog
	dsn     string

	// gate, when set before the first request, runs before the simulator
	// sees each request (a test holds one there, not yet charged).
	gate func(r *http.Request)
	// configure, when set, changes the configuration of the gateways
	// started after (their clients, audit trail, metrics).
	configure func(*web.DictGatewayConfig)

	mu     sync.Mutex
	bodies map[string][]byte // request bodies the simulator received, by path
	answer map[string][]byte // the simulator's last answer body, by path
}

func newGatewayWorld(t testing.TB, engine sqlstore.Engine) *gatewayWorld {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	w := &gatewayWorld{clock: throttle.NewManualClock(throttletest.Epoch), bodies: map[string][]byte{}, answer: map[string][]byte{}}
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
		EntriesFile: "../dict/testdata/entries.csv", Category: "A", FakeClock: true, Start: throttletest.Epoch, Logger: quiet,
	})
	require.NoError(t, err)
	w.sim = sim
	// The simulator behind a recorder of what crosses the wire.
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if w.gate != nil {
			w.gate(r)
		}
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, r)
		w.mu.Lock()
		w.bodies[r.URL.Path], w.answer[r.URL.Path] = body, rec.Body.Bytes()
		w.mu.Unlock()
		for k, vs := range rec.Header() {
			rw.Header()[k] = vs
		}
		rw.WriteHeader(rec.Code)
		_, _ = rw.Write(rec.Body.Bytes())
	}))
	t.Cleanup(hs.Close)
	w.simURL = hs.URL
	w.catalog = dict.NewCatalog("prod")
	require.NoError(t, w.catalog.SetCategory("A"))
	w.dsn = sqlstoretest.DSN(t, engine)
	return w
}

// gateway is one gateway instance: a store and limiter of its own on the
// world's database, served over loopback.
type gatewayInstance struct {
	URL     string
	limiter *throttle.Limiter
}

func (w *gatewayWorld) newGateway(t testing.TB) gatewayInstance {
	t.Helper()
	store := sqlstoretest.MustOpenDSN(t, w.dsn, w.clock.Now)
	lim, err := throttle.NewLimiter(store, w.catalog, throttle.Config{Clock: w.clock.Now})
	require.NoError(t, err)
	records := dictsql.NewRecords(store.DB(), store.ReadDB())
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: w.simURL, Participant: gatewayISPB, Limiter: lim, Catalog: w.catalog,
		Records: records, PaymentNoticeURL: w.simURL + "/sim/payments", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	cfg := web.DictGatewayConfig{Target: w.simURL, Participant: gatewayISPB, Meter: client.Meter(),
		Records: records, Payments: client, Logger: slog.New(slog.DiscardHandler), Authenticate: anyClient}
	if w.configure != nil {
		w.configure(&cfg)
	}
	g, err := web.NewDictGateway(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(g)
	t.Cleanup(hs.Close)
	return gatewayInstance{URL: hs.URL, limiter: lim}
}

// stats reads the simulator's GET /sim/stats.
func (w *gatewayWorld) stats(t *testing.T) dictsim.Stats {
	t.Helper()
	resp, err := http.Get(w.simURL + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st dictsim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// requireLedgerMatches checks that the mirror's balance of every bucket
// equals the simulator's: what the gateway charged is what the DICT did.
func (w *gatewayWorld) requireLedgerMatches(t *testing.T, lim *throttle.Limiter, buckets map[string]string) {
	t.Helper()
	for identifier, policy := range buckets {
		local, err := lim.State(context.Background(), w.catalog.Key(policy, identifier))
		require.NoError(t, err)
		remote, ok := w.sim.Balance(policy, identifier)
		require.True(t, ok)
		require.Equal(t, remote, local.Tokens, "%s %s: the simulator's balance, then the mirror's", policy, identifier)
	}
}

// plainLookup is a getEntry as any HTTP client sends it: no balde code.
func plainLookup(t *testing.T, base, key, payer, e2e string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v2/entries/"+key, nil)
	require.NoError(t, err)
	req.Header.Set("PI-RequestingParticipant", gatewayISPB)
	req.Header.Set("PI-PayerId", payer)
	req.Header.Set("PI-EndToEndId", e2e)
	req.Header.Set("Accept", "application/xml")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func e2eID(n int) string {
	return fmt.Sprintf("E%s%s%011d", gatewayISPB, throttletest.Epoch.Format("200601021504"), n)
}

// requireDictRateLimited checks a local refusal reads as the DICT's 429.
func requireDictRateLimited(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "local", resp.Header.Get(web.HeaderLocalRefusal))
	require.Equal(t, dict.ContentTypeProblemXML, resp.Header.Get("Content-Type"))
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Positive(t, secs)
	p, err := dict.DecodeProblem(body)
	require.NoError(t, err)
	require.Equal(t, "RateLimited", p.TypeName())
	require.Equal(t, http.StatusTooManyRequests, p.Status)
}

// Several processes' worth of plain HTTP clients scan unknown keys through
// one gateway: the mirror stops the scan before the DICT does (0 remote
// 429s), every local refusal is a DICT 429, and each bucket's balance is
// the simulator's.
func TestDictGatewayStopsAScanBeforeTheDict(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			w := newGatewayWorld(t, engine)
			g := w.newGateway(t)
			payers := []string{"11144477735", "52998224725", "39053344705"}
			const clients, perClient = 6, 8
			var mu sync.Mutex
			statuses := map[int]int{}
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					for i := range perClient {
						n := c*perClient + i
						resp, body := plainLookup(t, g.URL, fmt.Sprintf("nobody%d@example.com", n), payers[n%len(payers)], e2eID(n))
						if resp.StatusCode == http.StatusTooManyRequests {
							requireDictRateLimited(t, resp, body)
						} else {
							require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
							require.Empty(t, resp.Header.Get(web.HeaderLocalRefusal))
						}
						mu.Lock()
						statuses[resp.StatusCode]++
						mu.Unlock()
					}
				})
			}
			wg.Wait()

			st := w.stats(t)
			require.Zero(t, st.Count(dict.OpGetEntry, http.StatusTooManyRequests), "remote 429s")
			// A PF payer's 100 tokens pay for five 404s (20 each).
			require.Equal(t, int64(5*len(payers)), st.Count(dict.OpGetEntry, http.StatusNotFound))
			require.Equal(t, map[int]int{http.StatusNotFound: 5 * len(payers), http.StatusTooManyRequests: clients*perClient - 5*len(payers)}, statuses)
			buckets := map[string]string{gatewayISPB: dict.PolicyEntriesReadParticipantAntiscan}
			for _, p := range payers {
				buckets[p] = dict.PolicyEntriesReadUserAntiscan
			}
			w.requireLedgerMatches(t, g.limiter, buckets)
		})
	}
}

// Two gateway instances on one PostgreSQL admit exactly what one would: a
// payer's five 404s, whichever instance each lookup goes through.
func TestDictGatewayTwoInstancesAdmitWhatOneWould(t *testing.T) {
	if os.Getenv(sqlstoretest.PostgresEnv) == "" {
		t.Skip(sqlstoretest.PostgresEnv + " not set: skipping PostgreSQL")
	}
	w := newGatewayWorld(t, sqlstore.Postgres)
	gs := []gatewayInstance{w.newGateway(t), w.newGateway(t)}
	const payer = "11144477735"
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 4 {
				n := c*4 + i
				resp, body := plainLookup(t, gs[n%2].URL, fmt.Sprintf("nobody%d@example.com", n), payer, e2eID(n))
				if resp.StatusCode == http.StatusTooManyRequests {
					requireDictRateLimited(t, resp, body)
				}
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusNotFound: 5, http.StatusTooManyRequests: 27}, statuses)
	require.Zero(t, w.stats(t).Count(dict.OpGetEntry, http.StatusTooManyRequests), "remote 429s")
	w.requireLedgerMatches(t, gs[1].limiter, map[string]string{payer: dict.PolicyEntriesReadUserAntiscan, gatewayISPB: dict.PolicyEntriesReadParticipantAntiscan})
}

// The official example body of createEntry crosses the gateway byte for
// byte, and so does the DICT's answer.
func TestDictGatewayPassesBodiesByteForByte(t *testing.T) {
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	official, err := os.ReadFile("../dict/testdata/official/entries/CreateEntryRequest.xml")
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, g.URL+"/api/v2/entries/", bytes.NewReader(official))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/xml")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.NotEqual(t, http.StatusTooManyRequests, resp.StatusCode)
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, official, w.bodies["/api/v2/entries/"])
	require.Equal(t, w.answer["/api/v2/entries/"], answer)
}

// countingReader is n bytes of XML-ish filler, counting what was read.
type countingReader struct {
	left, read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.left))
	for i := range p[:n] {
		p[i] = ' '
	}
	c.left -= int64(n)
	c.read += int64(n)
	return n, nil
}

// A body larger than the DICT takes (1 MiB) is answered 413 before
// anything is reserved: nothing reaches the DICT, no ENTRIES_WRITE token
// is charged, and a body of unknown length is read no further than the
// bound. (The gateway forwarded a 300 MB createEntry and charged a 5 MB
// one.)
func TestDictGatewayRefusesABodyLargerThanTheDictTakes(t *testing.T) {
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	post := func(body io.Reader, length int64) int {
		req, err := http.NewRequest(http.MethodPost, g.URL+"/api/v2/entries/", body)
		require.NoError(t, err)
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/xml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // the gateway answered and closed before the client finished writing
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Contains(t, string(data), "1 MiB", "%s", data)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusRequestEntityTooLarge, post(&countingReader{left: 5 << 20}, 5<<20), "a 5 MB body")
	huge := &countingReader{left: 300 << 20}
	require.Contains(t, []int{http.StatusRequestEntityTooLarge, 0}, post(huge, -1), "300 MB of unknown length")
	require.Less(t, huge.read, int64(16<<20), "read of the 300 MB body")

	require.Empty(t, w.stats(t), "nothing reached the DICT")
	state, err := g.limiter.State(context.Background(), w.catalog.Key("ENTRIES_WRITE", gatewayISPB))
	require.NoError(t, err)
	require.False(t, state.Stored, "no ENTRIES_WRITE token was charged")
}

// A payment reported to the gateway credits the mirror as the SPI credits
// the DICT, once.
func TestDictGatewayCreditsAPaymentOnce(t *testing.T) {
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	const payer = "52998224725"
	resp, body := plainLookup(t, g.URL, "maria.souza@example.com", payer, e2eID(1))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	pay := func() (int, map[string]any) {
		resp, err := http.Post(g.URL+web.DictGatewayPaymentsPath+"?endToEndId="+e2eID(1), "", nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	status, out := pay()
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, false, out["duplicate"])
	status, out = pay()
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, out["duplicate"])
	w.requireLedgerMatches(t, g.limiter, map[string]string{payer: dict.PolicyEntriesReadUserAntiscan, gatewayISPB: dict.PolicyEntriesReadParticipantAntiscan})

	resp, err := http.Post(g.URL+web.DictGatewayPaymentsPath+"?endToEndId="+e2eID(99), "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// GET /policies/ passes through (the DICT's answer unchanged) and lowers
// the mirror to it: lookups sent around the gateway are then accounted.
func TestDictGatewayPoliciesReconcileTheMirror(t *testing.T) {
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	// Another system of the participant spends at the DICT directly.
	for i := range 3 {
		req, err := http.NewRequest(http.MethodGet, w.simURL+"/api/v2/entries/"+fmt.Sprintf("nobody%d@example.com", i), nil)
		require.NoError(t, err)
		req.Header.Set("PI-RequestingParticipant", gatewayISPB)
		req.Header.Set("PI-PayerId", "11144477735")
		req.Header.Set("PI-EndToEndId", e2eID(100+i))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	participant := map[string]string{gatewayISPB: dict.PolicyEntriesReadParticipantAntiscan}
	remote, _ := w.sim.Balance(dict.PolicyEntriesReadParticipantAntiscan, gatewayISPB)
	local, err := g.limiter.State(context.Background(), w.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, gatewayISPB))
	require.NoError(t, err)
	require.Greater(t, local.Tokens, remote, "the mirror did not see the direct lookups")

	req, err := http.NewRequest(http.MethodGet, g.URL+"/api/v2/policies/", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var doc dict.ListPoliciesResponse
	require.NoError(t, xml.Unmarshal(body, &doc))
	require.Equal(t, "A", doc.Category)
	w.requireLedgerMatches(t, g.limiter, participant)
}

// TestDictGatewayPoliciesLeaveHoldsInFlightOut: GET /policies/ passes
// through the gateway while one of its lookups is on the wire, not yet
// charged by the DICT (it charges as it answers). The sync leaves that
// lookup's hold out, so once the lookup settles the mirror is where the
// DICT is. Taking the DICT's number as it was, the lookup's refund lifted
// the mirror above the DICT: the next lookups would be admitted locally
// and refused remotely.
func TestDictGatewayPoliciesLeaveHoldsInFlightOut(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newGatewayWorld(t, engine)
		arrived, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		w.gate = func(r *http.Request) {
			if r.URL.Path == "/api/v2/entries/maria.souza@example.com" {
				once.Do(func() {
					close(arrived)
					select {
					case <-release:
					case <-time.After(30 * time.Second):
					}
				})
			}
		}
		g := w.newGateway(t)
		// Another system of the participant spends at the DICT directly:
		// four keys with no entry, 3 tokens each: the DICT is 12 below
		// the mirror.
		for i := range 4 {
			resp, _ := plainLookup(t, w.simURL, fmt.Sprintf("nobody%d@example.com", i), "11144477735", e2eID(200+i))
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
		}
		participant := w.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, gatewayISPB)

		done := make(chan int, 1)
		req, err := http.NewRequest(http.MethodGet, g.URL+"/api/v2/entries/maria.souza@example.com", nil)
		require.NoError(t, err)
		req.Header.Set("PI-RequestingParticipant", gatewayISPB)
		req.Header.Set("PI-PayerId", "52998224725")
		req.Header.Set("PI-EndToEndId", e2eID(300))
		go func() { // no require off the test's goroutine: the status says it
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		waitfor.Recv(t, arrived, 10*time.Second, "the lookup reaching the DICT")
		resp, err := http.Get(g.URL + "/api/v2/policies/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		close(release)
		require.Equal(t, http.StatusOK, waitfor.Recv(t, done, 10*time.Second, "the held lookup's answer"))

		remote, ok := w.sim.Balance(dict.PolicyEntriesReadParticipantAntiscan, gatewayISPB)
		require.True(t, ok)
		local, err := g.limiter.State(context.Background(), participant)
		require.NoError(t, err)
		require.LessOrEqual(t, local.Tokens, remote, "the mirror above the DICT after the lookup settled")
		require.Equal(t, remote, local.Tokens, "the mirror where the DICT is")
	})
}

// What is not a DICT request of this participant is answered by the
// gateway as the DICT would, and nothing is sent.
func TestDictGatewayAnswersBadRequestsItself(t *testing.T) {
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	tests := []struct {
		name, method, path, participant, payer string
		want                                   int
		wantType                               string
	}{
		{"NotADictOperation", http.MethodGet, "/api/v2/nothing", "", "", http.StatusNotFound, "NotFound"},
		{"AnotherParticipant", http.MethodGet, "/api/v2/entries/maria.souza@example.com", "87654321", "11144477735", http.StatusForbidden, "Forbidden"},
		{"BadPayer", http.MethodGet, "/api/v2/entries/maria.souza@example.com", "", "123", http.StatusBadRequest, "BadRequest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, g.URL+tt.path, nil)
			require.NoError(t, err)
			if tt.participant != "" {
				req.Header.Set("PI-RequestingParticipant", tt.participant)
			}
			if tt.payer != "" {
				req.Header.Set("PI-PayerId", tt.payer)
				req.Header.Set("PI-EndToEndId", e2eID(7))
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, tt.want, resp.StatusCode, "%s", body)
			p, err := dict.DecodeProblem(body)
			require.NoError(t, err)
			require.Equal(t, tt.wantType, p.TypeName())
		})
	}
	require.Empty(t, w.stats(t))
}

// Separate processes that are not Go (testdata/gateway/dict_lookup.py,
// Python's standard library only) scan through one gateway: 0 remote 429s,
// the local refusals are the DICT's 429 problem, the ledger is the
// simulator's.
func TestDictGatewayServesPythonProcesses(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	payers := []string{"11144477735", "52998224725", "39053344705"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type line struct {
		Status      int    `json:"status"`
		Local       bool   `json:"local"`
		RetryAfter  string `json:"retry_after"`
		ProblemType string `json:"problem_type"`
	}
	outs := make([][]byte, len(payers))
	var wg sync.WaitGroup
	for i, payer := range payers {
		args := []string{"../testdata/gateway/dict_lookup.py", "--url", g.URL, "--participant", gatewayISPB, "--payer", payer,
			"--e2e-prefix", e2eID(0)[:21], "--start", strconv.Itoa(100 * i)}
		for k := range 8 {
			args = append(args, fmt.Sprintf("nobody%d.%d@example.com", i, k))
		}
		wg.Go(func() {
			out, err := exec.CommandContext(ctx, python, args...).Output()
			require.NoError(t, err)
			outs[i] = out
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, out := range outs {
		for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var l line
			require.NoError(t, json.Unmarshal(raw, &l), "%s", raw)
			counts[l.Status]++
			if l.Status == http.StatusTooManyRequests {
				require.True(t, l.Local)
				require.NotEmpty(t, l.RetryAfter)
				require.Equal(t, "RateLimited", l.ProblemType)
			}
		}
	}
	require.Equal(t, map[int]int{http.StatusNotFound: 15, http.StatusTooManyRequests: 9}, counts)
	require.Zero(t, w.stats(t).Count(dict.OpGetEntry, http.StatusTooManyRequests), "remote 429s")
	buckets := map[string]string{gatewayISPB: dict.PolicyEntriesReadParticipantAntiscan}
	for _, p := range payers {
		buckets[p] = dict.PolicyEntriesReadUserAntiscan
	}
	w.requireLedgerMatches(t, g.limiter, buckets)
}
