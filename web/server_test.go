package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

const (
	adminUser     = "ana"
	adminPassword = "correct horse battery staple"
)

// testPolicies are the outbound policies of the tests.
var testPolicies = throttle.Policies{
	// P: 10 tokens, one back every 6 s.
	"P": throttle.PerMinute("P", 10, 10),
	// SLOW: a SIFEN-like cooldown of 10 s per key.
	"SLOW": {Name: "SLOW", Capacity: 100, RefillTokens: 100, RefillPeriod: time.Minute, MinInterval: 10 * time.Second},
	// BIG: 25,000 tokens, for numbers with a thousands separator.
	"BIG": throttle.PerMinute("BIG", 25000, 25000),
}

// env is a server under test with its clock, store and limiter.
type env struct {
	t       testing.TB
	clock   *throttle.ManualClock
	store   throttletest.FullStore
	limiter *throttle.Limiter
	reader  *inspect.Reader
	server  *web.Server
	metrics *web.Metrics
	inbound *web.Inbound

	// set by options before the server opens
	inboundConfig *web.InboundConfig
	configure     []func(*web.Server)
	ledger        throttle.LedgerGranularity

	// the SIFEN and DICT sides (world_test.go)
	sims
}

type option func(*env)

// withStore uses a real SQL store on engine instead of the in-memory one.
func withStore(engine sqlstore.Engine) option {
	return func(e *env) { e.store = sqlstoretest.MustOpen(e.t, engine, e.clock.Now) }
}

// withFailingStore wraps the in-memory store so that every call fails
// with ErrStoreUnavailable.
func withFailingStore() option {
	return func(e *env) {
		down := func() error { return throttle.ErrStoreUnavailable }
		e.store = &throttletest.Store{
			Base: throttletest.NewMemStore(e.clock.Now),
			UpdateFn: func(context.Context, []throttle.Key, []throttle.CreditRef, func(*throttle.Tx) error) error {
				return down()
			},
			ListFn:            func(context.Context, inspect.Filter) ([]throttle.Bucket, error) { return nil, down() },
			BucketsFn:         func(context.Context, []throttle.Key) ([]throttle.Bucket, error) { return nil, down() },
			CountBySeverityFn: func(context.Context, inspect.Filter) (map[throttle.Severity]int64, error) { return nil, down() },
		}
	}
}

// withInbound turns the inbound limiter on.
func withInbound(cfg web.InboundConfig) option {
	return func(e *env) { e.inboundConfig = &cfg }
}

// withServer changes the server before it opens.
func withServer(f func(*web.Server)) option {
	return func(e *env) { e.configure = append(e.configure, f) }
}

// withPanels gives the server summary panels built from the env (its
// records, sender, clock) once the simulators are attached.
func withPanels(f func(e *env) []web.PanelFunc) option {
	return func(e *env) {
		e.configure = append(e.configure, func(s *web.Server) { s.Panels = append(s.Panels, f(e)...) })
	}
}

// newEnv opens a server on 127.0.0.1:0 over an in-memory store (or the one
// an option chose), with a fake clock at throttletest.Epoch.
func newEnv(t testing.TB, opts ...option) *env {
	t.Helper()
	e := &env{t: t, clock: throttle.NewManualClock(throttletest.Epoch)}
	for _, o := range opts {
		o(e)
	}
	e.openSQLIfNeeded(t)
	if e.store == nil {
		e.store = throttletest.NewMemStore(e.clock.Now)
	}
	e.metrics = web.NewMetrics()
	resolvers := append(throttle.Resolvers{testPolicies}, e.simResolvers(t)...)
	if e.inboundConfig != nil {
		in, err := web.NewInbound(*e.inboundConfig)
		require.NoError(t, err)
		resolvers = append(resolvers, in.Policies())
		require.NoError(t, in.UseStore(e.store, throttle.Config{Clock: e.clock.Now, Observer: e.metrics, Logger: testLogger(t)}))
		e.inbound = in
	}
	var err error
	e.limiter, err = throttle.NewLimiter(e.store, resolvers, throttle.Config{
		Clock: e.clock.Now, Observer: e.metrics, Ledger: e.ledger, Logger: testLogger(t),
	})
	require.NoError(t, err)
	e.reader = inspect.New(e.limiter, e.store)

	s := web.NewServer()
	s.Addr = "127.0.0.1:0"
	s.Limiter = e.limiter
	s.Reader = e.reader
	s.Inbound = e.inbound
	s.Admin = web.Credentials{User: adminUser, Password: adminPassword}
	s.Metrics = e.metrics
	s.Logger = testLogger(t)
	s.SummaryTTL = 0
	s.Policies = []string{"P", "SLOW"}
	e.attachSims(t, s)
	for _, f := range e.configure {
		f(s)
	}
	require.NoError(t, s.Open())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	e.server = s
	return e
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// request options
type reqOpt func(*http.Request)

func asAdmin(r *http.Request) { r.SetBasicAuth(adminUser, adminPassword) }

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func fromAddr(addr string) reqOpt { return func(r *http.Request) { r.RemoteAddr = addr } }

// do serves one request in memory and returns the response.
func (e *env) do(method, target string, body io.Reader, opts ...reqOpt) *http.Response {
	e.t.Helper()
	r := httptest.NewRequest(method, target, body)
	if body != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, o := range opts {
		o(r)
	}
	rec := httptest.NewRecorder()
	e.server.ServeHTTP(rec, r)
	return rec.Result()
}

func (e *env) get(target string, opts ...reqOpt) *http.Response {
	e.t.Helper()
	return e.do(http.MethodGet, target, nil, opts...)
}

func (e *env) post(target string, form url.Values, opts ...reqOpt) *http.Response {
	e.t.Helper()
	return e.do(http.MethodPost, target, strings.NewReader(form.Encode()), opts...)
}

// take charges cost tokens of key through the outbound limiter.
func (e *env) take(key throttle.Key, cost int64) throttle.Decision {
	e.t.Helper()
	d, err := e.limiter.Take(context.Background(), "test", throttle.Charge{Key: key, Cost: cost})
	require.NoError(e.t, err)
	return d
}

func body(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func document(t testing.TB, resp *http.Response) *goquery.Document {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	require.NoError(t, err)
	return doc
}

func key(policy, identifier string) throttle.Key {
	return throttle.Key{Policy: policy, Env: "prod", Identifier: identifier}
}

func TestServerOpen(t *testing.T) {
	mem := throttletest.NewMemStore(time.Now)
	lim, err := throttle.NewLimiter(mem, testPolicies, throttle.Config{})
	require.NoError(t, err)
	tests := []struct {
		name  string
		setup func(*web.Server)
		want  string
	}{
		{"NoLimiter", func(s *web.Server) { s.Limiter = nil }, "needs a Limiter"},
		{"NoUser", func(s *web.Server) { s.Admin.User = "" }, "user name"},
		{"NoPassword", func(s *web.Server) { s.Admin.Password = "" }, "password"},
		{"BadBcrypt", func(s *web.Server) { s.Admin.PasswordBcrypt = "not-a-hash" }, "hash"},
		{"InboundWithoutLimiter", func(s *web.Server) {
			in, err := web.NewInbound(web.InboundConfig{IPLimit: 5})
			require.NoError(t, err)
			s.Inbound = in
		}, "inbound"},
		{"BadAddr", func(s *web.Server) { s.Addr = "127.0.0.1:notaport" }, "listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := web.NewServer()
			s.Addr = "127.0.0.1:0"
			s.Limiter = lim
			s.Reader = inspect.New(lim, mem)
			s.Admin = web.Credentials{User: adminUser, Password: adminPassword}
			s.Logger = testLogger(t)
			tt.setup(s)
			require.ErrorContains(t, s.Open(), tt.want)
		})
	}
}

func TestServerListensAndCloses(t *testing.T) {
	e := newEnv(t)
	require.NotZero(t, e.server.Port())
	require.True(t, strings.HasPrefix(e.server.URL(), "http://127.0.0.1:"), e.server.URL())

	resp, err := http.Get(e.server.URL() + "/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok"}`, body(t, resp))
	resp.Body.Close()

	require.NoError(t, e.server.Close())
	_, err = http.Get(e.server.URL() + "/healthz")
	require.Error(t, err, "the listener is closed")
}

func TestRoutesUnmatched(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name        string
		method      string
		target      string
		wantStatus  int
		wantType    string
		wantHeaders map[string]string
	}{
		{"HomeRedirects", http.MethodGet, "/", http.StatusSeeOther, "", map[string]string{"Location": "/admin/buckets"}},
		{"NotFoundHTML", http.MethodGet, "/nope", http.StatusNotFound, "text/html; charset=utf-8", nil},
		{"NotFoundJSON", http.MethodGet, "/api/nope", http.StatusNotFound, "application/json; charset=utf-8", nil},
		{"MethodNotAllowed", http.MethodDelete, "/admin/buckets", http.StatusMethodNotAllowed, "text/html; charset=utf-8", nil},
		{"StaticStylesheet", http.MethodGet, "/static/style.css", http.StatusOK, "text/css; charset=utf-8", map[string]string{"Cache-Control": "public, max-age=3600"}},
		{"StaticMissing", http.MethodGet, "/static/nope.css", http.StatusNotFound, "text/html; charset=utf-8", nil},
		{"StaticTraversal", http.MethodGet, "/static/../templates.go", http.StatusNotFound, "text/html; charset=utf-8", nil},
		{"HeadHealthz", http.MethodHead, "/healthz", http.StatusOK, "application/json; charset=utf-8", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do(tt.method, tt.target, nil)
			require.Equal(t, tt.wantStatus, resp.StatusCode)
			if tt.wantType != "" {
				require.Equal(t, tt.wantType, resp.Header.Get("Content-Type"))
			}
			for k, v := range tt.wantHeaders {
				require.Equal(t, v, resp.Header.Get(k), k)
			}
		})
	}
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Block: time.Minute}))
	responses := map[string]*http.Response{
		"Page": e.get("/admin/buckets", asAdmin, fromAddr("192.0.2.10:1")),
		// The admin's page is charged to the admin, the 401 to the IP.
		"Unauthorized": e.get("/admin/buckets", fromAddr("192.0.2.10:1")),
		"NotFound":     e.get("/nope", fromAddr("192.0.2.12:1")),
		"Static":       e.get("/static/style.css"),
		"Healthz":      e.get("/healthz"),
		"TooMany":      e.get("/api/buckets", fromAddr("192.0.2.10:1")),
	}
	require.Equal(t, http.StatusTooManyRequests, responses["TooMany"].StatusCode)
	for name, resp := range responses {
		t.Run(name, func(t *testing.T) {
			h := resp.Header
			require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'none'")
			require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'")
			require.NotContains(t, h.Get("Content-Security-Policy"), "unsafe-inline")
			require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", h.Get("X-Frame-Options"))
			require.Equal(t, "same-origin", h.Get("Referrer-Policy"))
			require.NotEmpty(t, h.Get("X-Request-Id"))
		})
	}
}

func TestRequestIDKeptOrReplaced(t *testing.T) {
	e := newEnv(t)
	resp := e.get("/healthz", withHeader("X-Request-Id", "lb-1234"))
	require.Equal(t, "lb-1234", resp.Header.Get("X-Request-Id"))
	resp = e.get("/healthz", withHeader("X-Request-Id", "<script>"))
	require.NotEqual(t, "<script>", resp.Header.Get("X-Request-Id"))
	require.Regexp(t, `^[0-9a-f]{16}$`, resp.Header.Get("X-Request-Id"))
}

func TestPanicIsACleanError(t *testing.T) {
	e := newEnv(t, withServer(func(s *web.Server) {
		s.Scope = func(k throttle.Key) string {
			if k.Identifier == "boom" {
				panic("scope exploded")
			}
			return "PSP"
		}
	}))
	e.take(key("P", "boom"), 1)
	resp := e.get("/admin/buckets", asAdmin)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	b := body(t, resp)
	require.Contains(t, b, "internal error")
	require.NotContains(t, b, "scope exploded", "a panic's detail stays in the log")
	require.Contains(t, body(t, e.get("/metrics")),
		`balde_http_requests_total{code="500",method="GET",route="/admin/buckets"} 1`, "the panic is counted as the 500 it became")

	// The server goes on serving.
	require.Equal(t, http.StatusOK, e.get("/healthz").StatusCode)
}
