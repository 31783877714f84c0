package balde_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// fakeDICT is a DICT written from the manual for these tests alone, with
// its own token tables: a getEntry is admitted while the payer's and the
// participant's buckets are positive and costs each 1 (200); otherwise it
// is answered 429 with a Retry-After and a problem that names no bucket.
// Its clock stands still (no refill). GET /policies/ and
// /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN report the participant's
// bucket as it is when the request arrives.
type fakeDICT struct {
	mu          sync.Mutex
	payers      map[string]int64
	participant int64
	drainAt     int // the n-th lookup finds the participant drained (0: never)
	lookups     int
	refused     []int // the send numbers (sentTransport) of the lookups answered 429

	// holdList, when set, holds the answer of the next GET /policies/
	// (read on arrival) until it is closed.
	holdList chan struct{}
	listHeld chan struct{}
}

func newFakeDICT() *fakeDICT { return &fakeDICT{payers: map[string]int64{}, participant: 50000} }

// payer returns the payer's balance at the fake DICT (PF: 100 until used).
func (f *fakeDICT) payer(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.payers[id]; ok {
		return n
	}
	return 100
}

// drain empties the participant's bucket (the PSP's other systems spent it).
func (f *fakeDICT) drain() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.participant = 0
}

func (f *fakeDICT) counts() (lookups int, refused []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups, append([]int(nil), f.refused...)
}

const fakeDICTCategory = "A"

func (f *fakeDICT) policyXML(available int64) string {
	return fmt.Sprintf(`<Policy><AvailableTokens>%d</AvailableTokens><Capacity>50000</Capacity><RefillTokens>25000</RefillTokens>`+
		`<RefillPeriodSec>60</RefillPeriodSec><Name>%s</Name></Policy>`, available, dict.PolicyEntriesReadParticipantAntiscan)
}

func (f *fakeDICT) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	head := `<CorrelationId>x</CorrelationId><ResponseTime>2026-01-01T00:00:00Z</ResponseTime><Category>` + fakeDICTCategory + `</Category>`
	path := strings.TrimPrefix(r.URL.Path, dict.APIPrefix)
	switch {
	case r.Method == http.MethodGet && path == "/policies/":
		f.mu.Lock()
		body := `<ListPoliciesResponse>` + head + `<Policies>` + f.policyXML(f.participant) + `</Policies></ListPoliciesResponse>`
		hold := f.holdList
		f.holdList = nil
		f.mu.Unlock()
		if hold != nil {
			close(f.listHeld)
			select {
			case <-hold:
			case <-time.After(30 * time.Second):
			}
		}
		w.Header().Set("Content-Type", dict.ContentTypeXML)
		_, _ = w.Write([]byte(body))
	case r.Method == http.MethodGet && path == "/policies/"+dict.PolicyEntriesReadParticipantAntiscan:
		f.mu.Lock()
		body := `<GetPolicyResponse>` + head + f.policyXML(f.participant) + `</GetPolicyResponse>`
		f.mu.Unlock()
		w.Header().Set("Content-Type", dict.ContentTypeXML)
		_, _ = w.Write([]byte(body))
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/entries/"):
		payer := r.Header.Get(dict.HeaderPayerID)
		f.mu.Lock()
		f.lookups++
		if f.lookups == f.drainAt {
			f.participant = 0
		}
		balance, ok := f.payers[payer]
		if !ok {
			balance = 100
		}
		if balance <= 0 || f.participant <= 0 {
			var sent int
			fmt.Sscan(r.Header.Get("Test-Sent"), &sent)
			f.refused = append(f.refused, sent)
			f.mu.Unlock()
			w.Header().Set("Retry-After", "30")
			w.Header().Set("Content-Type", dict.ContentTypeProblemXML)
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`<problem xmlns="urn:ietf:rfc:7807"><type>https://dict.pi.rsfn.net.br/api/v2/error/RateLimited</type>` +
				`<title>Rate limited</title><status>429</status></problem>`))
			return
		}
		f.payers[payer] = balance - 1
		f.participant--
		f.mu.Unlock()
		w.Header().Set("Content-Type", dict.ContentTypeXML)
		_, _ = fmt.Fprintf(w, `<GetEntryResponse>%s<Entry><Key>%s</Key><KeyType>EMAIL</KeyType><Account><Participant>%s</Participant>`+
			`<Branch>0001</Branch><AccountNumber>0007654321</AccountNumber><AccountType>CACC</AccountType><OpeningDate>2010-01-10T03:00:00.000Z</OpeningDate></Account>`+
			`<Owner><Type>NATURAL_PERSON</Type><TaxIdNumber>11122233300</TaxIdNumber><Name>Maria</Name></Owner>`+
			`<CreationDate>2019-11-18T03:00:00.000Z</CreationDate><KeyOwnershipDate>2019-11-18T03:00:00.000Z</KeyOwnershipDate></Entry></GetEntryResponse>`,
			head, strings.TrimPrefix(path, "/entries/"), attributionISPB)
	default:
		http.NotFound(w, r)
	}
}

// sentTransport numbers every lookup as it leaves the mirror (after its
// hold), in a header the fake DICT records with its 429s.
type sentTransport struct{ sent atomic.Int64 }

func (s *sentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/entries/") {
		r = r.Clone(r.Context())
		r.Header.Set("Test-Sent", fmt.Sprint(s.sent.Add(1)))
	}
	return http.DefaultTransport.RoundTrip(r)
}

const attributionISPB = "60701190"

type attributionEnv struct {
	clock *throttle.ManualClock
	dict  *fakeDICT
	eng   *balde.Engine
	sent  *sentTransport
}

// newAttributionEnv opens an engine on engine whose DICT is a fake DICT
// (policiesURL: GET /policies/'s own base URL, "" the fake's).
func newAttributionEnv(t *testing.T, engine sqlstore.Engine, policiesURL string) *attributionEnv {
	t.Helper()
	e := &attributionEnv{clock: throttle.NewManualClock(throttletest.Epoch), dict: newFakeDICT(), sent: &sentTransport{}}
	hs := httptest.NewServer(e.dict)
	t.Cleanup(hs.Close)
	var err error
	e.eng, err = balde.Open(context.Background(), balde.Config{
		DB: sqlstoretest.DSN(t, engine), Migrate: true, Clock: e.clock.Now, DictCategory: fakeDICTCategory,
		Dict: &balde.DictConfig{BaseURL: hs.URL, PoliciesURL: policiesURL, Participant: attributionISPB,
			HTTPClient: &http.Client{Transport: e.sent, Timeout: 30 * time.Second}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.eng.Close(context.Background())) })
	return e
}

func (e *attributionEnv) lookup(t *testing.T, payer string) (dict.Result[dict.GetEntryResponse], error) {
	t.Helper()
	return e.eng.Dict().GetEntry(context.Background(), dict.LookupRequest{Key: "maria@example.com", PayerID: payer})
}

func (e *attributionEnv) local(t *testing.T, policy, id string) throttle.BucketState {
	t.Helper()
	c := e.eng.Dict().Catalog()
	st, err := e.eng.Dict().Meter().Limiter.State(context.Background(), c.Key(policy, id))
	require.NoError(t, err)
	return st
}

// requirePayersAsTheDICT: every payer's local balance is the fake DICT's.
func (e *attributionEnv) requirePayersAsTheDICT(t *testing.T, payers []string) {
	t.Helper()
	for _, p := range payers {
		require.Equal(t, e.dict.payer(p), e.local(t, dict.PolicyEntriesReadUserAntiscan, p).Tokens, "payer %s: local balance as the DICT has it", p)
	}
}

func is429(err error) bool {
	var re *dict.RemoteError
	return errors.As(err, &re) && re.Status == http.StatusTooManyRequests
}

func attributionPayers(n int) []string {
	out := make([]string, n)
	for i := range out {
		s := fmt.Sprintf("%09d", 300000000+i)
		for _, length := range []int{9, 10} {
			sum := 0
			for j := range length {
				sum += int(s[j]-'0') * (length + 1 - j)
			}
			s += fmt.Sprint(sum * 10 % 11 % 10)
		}
		out[i] = s
	}
	return out
}

// A remote 429 that names no bucket is attributed from a reading of the
// participant's bucket taken after it, never from one taken before
// (decision 0180): the participant drained 0.2 s after a GET /policies/
// answer leaves every payer as the DICT has it, and the next payers are
// refused locally instead of being sent into the same 429. Before, the
// answer of 0.2 s earlier (participant full) blamed each payer in turn:
// every payer zeroed, one remote 429 per payer.
func TestRemote429AttributedFromAReadingAfterIt(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newAttributionEnv(t, engine, "")
		_, err := e.eng.Dict().ListBucketStates(context.Background())
		require.NoError(t, err)
		e.clock.Advance(200 * time.Millisecond)
		e.dict.drain()

		payers := attributionPayers(5)
		_, err = e.lookup(t, payers[0])
		require.True(t, is429(err), "the DICT's 429: %v", err)
		for _, p := range payers[1:] {
			res, err := e.lookup(t, p)
			require.False(t, is429(err), "payer %s sent into the same 429", p)
			require.NoError(t, err)
			require.False(t, res.Decision.Allowed, "refused locally: the participant is empty")
		}
		lookups, refused := e.dict.counts()
		require.Equal(t, 1, lookups, "one lookup sent into the 429")
		require.Len(t, refused, 1)
		e.requirePayersAsTheDICT(t, payers)
		participant := e.local(t, dict.PolicyEntriesReadParticipantAntiscan, attributionISPB)
		require.LessOrEqual(t, participant.Tokens, int64(0), "the participant follows the reading")
		require.Equal(t, 30*time.Second, participant.BlockLeft)
	})
}

// 60 lookups at once over 60 payers while the participant is drained at
// the DICT: once the first 429 of the drain has been answered, no lookup
// is sent into a 429 (those already on the wire excepted), and no payer
// ends below the DICT's balance. Before, a GET /policies/ answer from
// before the drain blamed the payers: 429s went on until every payer was
// zeroed.
func TestConcurrentLookupsStopAtTheFirst429OfADrain(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newAttributionEnv(t, engine, "")
		_, err := e.eng.Dict().ListBucketStates(context.Background())
		require.NoError(t, err)
		e.dict.mu.Lock()
		e.dict.drainAt = 100
		e.dict.mu.Unlock()

		payers := attributionPayers(60)
		var cut atomic.Int64 // the lookups sent when the first 429 was answered
		cut.Store(-1)
		var wg sync.WaitGroup
		for _, p := range payers {
			wg.Go(func() {
				for range 6 {
					res, err := e.lookup(t, p)
					if is429(err) {
						cut.CompareAndSwap(-1, e.sent.sent.Load())
						continue
					}
					if err != nil || !res.Decision.Allowed {
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("the lookups did not end within 2 minutes")
		}
		lookups, refused := e.dict.counts()
		t.Logf("%d lookups sent, %d answered 429, the first 429 answered after %d were sent", lookups, len(refused), cut.Load())
		require.NotEmpty(t, refused, "the drain drew a 429")
		require.GreaterOrEqual(t, cut.Load(), int64(0))
		for _, sent := range refused {
			require.LessOrEqual(t, int64(sent), cut.Load(), "lookup %d sent into a 429 after the first 429 was answered (%d 429s)", sent, len(refused))
		}
		e.requirePayersAsTheDICT(t, payers)
	})
}

// With GET /policies/ unreachable, a 429 that names no bucket lowers
// nobody: the payer and the participant wait out its Retry-After (a block,
// no sync). Before, the payer was blamed (zeroed) whatever the
// participant's bucket.
func TestRemote429WithPoliciesUnreachableLowersNobody(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newAttributionEnv(t, engine, "http://127.0.0.1:1")
		e.dict.drain()
		payers := attributionPayers(3)
		_, err := e.lookup(t, payers[0])
		require.True(t, is429(err), "the DICT's 429: %v", err)
		e.requirePayersAsTheDICT(t, payers)
		payer := e.local(t, dict.PolicyEntriesReadUserAntiscan, payers[0])
		require.Equal(t, 30*time.Second, payer.BlockLeft, "the payer waits out the Retry-After")
		participant := e.local(t, dict.PolicyEntriesReadParticipantAntiscan, attributionISPB)
		require.Equal(t, int64(50000), participant.Tokens, "the participant is not lowered without a reading")
		require.Equal(t, 30*time.Second, participant.BlockLeft, "the participant waits out the Retry-After")
		res, err := e.lookup(t, payers[1])
		require.NoError(t, err)
		require.False(t, res.Decision.Allowed, "refused locally during the Retry-After")
		lookups, _ := e.dict.counts()
		require.Equal(t, 1, lookups)
		e.requirePayersAsTheDICT(t, payers)
	})
}

// The same through the DICT gateway, with a GET /policies/ of the
// gateway's client in flight (read by the DICT before the drain, answered
// after the 429): the gateway's 429 is attributed from its own reading
// after it, shared with the engine's client, and the client's late
// answer raises nothing. Before, the client's earlier answer blamed the
// payers.
func TestGatewayRemote429AttributedFromAReadingAfterIt(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newAttributionEnv(t, engine, "")
		gw, err := e.eng.DictGateway(web.DictGatewayConfig{Authenticate: anyone})
		require.NoError(t, err)
		hs := httptest.NewServer(gw)
		t.Cleanup(hs.Close)
		get := func(path string, header map[string]string) *http.Response {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+dict.APIPrefix+path, nil)
			require.NoError(t, err)
			for k, v := range header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp
		}
		lookup := func(payer string) *http.Response {
			e2e, err := dict.NewEndToEndID(attributionISPB, e.clock.Now())
			require.NoError(t, err)
			return get("/entries/maria@example.com", map[string]string{dict.HeaderPayerID: payer, dict.HeaderEndToEndID: e2e})
		}

		require.Equal(t, http.StatusOK, get("/policies/", nil).StatusCode)
		// The client's next GET /policies/ is read now, answered later.
		release := make(chan struct{})
		var once sync.Once
		unhold := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unhold)
		e.dict.mu.Lock()
		e.dict.holdList, e.dict.listHeld = release, make(chan struct{})
		held := e.dict.listHeld
		e.dict.mu.Unlock()
		listed := make(chan int, 1)
		go func() { listed <- get("/policies/", nil).StatusCode }()
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("the client's GET /policies/ did not reach the DICT")
		}
		e.clock.Advance(200 * time.Millisecond)
		e.dict.drain()

		payers := attributionPayers(5)
		resp := lookup(payers[0])
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Empty(t, resp.Header.Get(web.HeaderLocalRefusal), "the DICT's own 429")
		for _, p := range payers[1:] {
			resp := lookup(p)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			require.NotEmpty(t, resp.Header.Get(web.HeaderLocalRefusal), "refused by the gateway, not sent")
		}
		unhold()
		select {
		case code := <-listed:
			require.Equal(t, http.StatusOK, code)
		case <-time.After(10 * time.Second):
			t.Fatal("the client's GET /policies/ did not end")
		}
		// The engine's own client shares the gateway's reading and mirror.
		res, err := e.lookup(t, payers[0])
		require.NoError(t, err)
		require.False(t, res.Decision.Allowed)

		lookups, refused := e.dict.counts()
		require.Equal(t, 1, lookups, "one lookup sent into the 429")
		require.Len(t, refused, 1)
		e.requirePayersAsTheDICT(t, payers)
		require.LessOrEqual(t, e.local(t, dict.PolicyEntriesReadParticipantAntiscan, attributionISPB).Tokens, int64(0),
			"the late answer raised nothing")
	})
}

// A DICT that is not a simulator, without a Verifier, is refused unless
// AllowUnverified says so, and then logged at Error and exported as
// balde_dict_answers_unverified 1 (decision 0181); a simulator on
// loopback is neither.
func TestUnverifiedDICTIsLoudAndMetered(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want float64
	}{
		{"https://dict.pi.rsfn.net.br:16422", 1},
		{"http://127.0.0.1:1", 0},
	} {
		var logs strings.Builder
		m := web.NewMetrics()
		eng, err := balde.Open(context.Background(), balde.Config{
			DB: sqlstoretest.DSN(t, sqlstore.SQLite), Migrate: true, Observer: m,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Dict:   &balde.DictConfig{BaseURL: tt.url, Participant: attributionISPB, AllowUnverified: true},
		})
		require.NoError(t, err)
		require.NoError(t, eng.Close(context.Background()))
		families, err := m.Registry.Gather()
		require.NoError(t, err)
		got := -1.0
		for _, f := range families {
			if f.GetName() == "balde_dict_answers_unverified" {
				got = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		require.Equal(t, tt.want, got, tt.url)
		require.Equal(t, tt.want == 1, strings.Contains(logs.String(), "NOT verified"), "%s: %s", tt.url, logs.String())
	}
}
