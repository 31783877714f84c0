package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// step is one request of a rate-limit scenario: at an offset from the start,
// what the limiter must answer.
type step struct {
	at             time.Duration
	wantStatus     int
	wantRetryAfter string // "" when none
	wantRateLimit  string
}

// anonymousAPI is a path under /api/ that answers a JSON 404 without a
// credential: charged to the client's IP. (An admin's /api/buckets is
// charged to the admin's own bucket.)
const anonymousAPI = "/api/orders"

// runSteps sends the steps in order from one client, moving the fake clock.
func runSteps(t *testing.T, e *env, path string, steps []step, opts ...reqOpt) {
	t.Helper()
	start := e.clock.Now()
	for i, s := range steps {
		e.clock.Set(start.Add(s.at))
		resp := e.get(path, opts...)
		require.Equal(t, s.wantStatus, resp.StatusCode, "step %d (at %s)", i, s.at)
		require.Equal(t, s.wantRetryAfter, resp.Header.Get("Retry-After"), "step %d (at %s)", i, s.at)
		require.Equal(t, s.wantRateLimit, resp.Header.Get("RateLimit"), "step %d (at %s)", i, s.at)
	}
}

func TestInboundExactSlidingWindow(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 3, Window: time.Minute}))
	ms := time.Millisecond
	runSteps(t, e, anonymousAPI, []step{
		{0, 404, "", `"ip";r=2;t=60`},
		{10 * time.Second, 404, "", `"ip";r=1;t=60`},
		{20 * time.Second, 404, "", `"ip";r=0;t=60`},
		// The window holds 3 requests: the 4th waits for the first to
		// leave it, at exactly 60 s.
		{30 * time.Second, 429, "30", `"ip";r=0;t=50`},
		{60*time.Second - ms, 429, "1", `"ip";r=0;t=21`},
		{60 * time.Second, 404, "", `"ip";r=0;t=60`},
		// The next slot frees when the request of 10 s leaves the window.
		{60 * time.Second, 429, "10", `"ip";r=0;t=60`},
		{70 * time.Second, 404, "", `"ip";r=0;t=60`},
	})
}

func TestInboundBlockAfterLimit(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 3, Window: time.Minute, Block: 5 * time.Minute}))
	block := time.Second + 5*time.Minute
	runSteps(t, e, anonymousAPI, []step{
		{0, 404, "", `"ip";r=2;t=60`},
		{0, 404, "", `"ip";r=1;t=60`},
		{0, 404, "", `"ip";r=0;t=60`},
		// Exceeding the limit blocks for 5 minutes, although the window
		// would free a slot after 59 s.
		{time.Second, 429, "300", `"ip";r=0;t=300`},
		{2 * time.Minute, 429, "181", `"ip";r=0;t=181`},
		{block - time.Second, 429, "1", `"ip";r=0;t=1`},
		{block, 404, "", `"ip";r=2;t=60`},
	})
}

func TestInboundRefusalBody(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Block: time.Minute}))
	require.Equal(t, http.StatusNotFound, e.get(anonymousAPI).StatusCode)

	resp := e.get(anonymousAPI)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	var got struct {
		Status     int     `json:"status"`
		Error      string  `json:"error"`
		RetryAfter float64 `json:"retry_after_seconds"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, 429, got.Status)
	require.Equal(t, 60.0, got.RetryAfter)
	require.Contains(t, got.Error, "too many requests")

	resp = e.get("/admin/buckets")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body(t, resp), "Retry in 1m0s")
}

func TestInboundPolicyHeader(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 100, Window: 90 * time.Second}))
	resp := e.get("/nope")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "unmatched paths are limited too")
	require.Equal(t, `"ip";q=100;w=90`, resp.Header.Get("RateLimit-Policy"))
	// The request is counted at the end of its grain (1.5 s of a 90 s
	// window): the clock's instant is 0.5 s into one, so its token comes
	// back 1 s + 90 s later.
	require.Equal(t, `"ip";r=99;t=91`, resp.Header.Get("RateLimit"))

	for _, exempt := range []string{"/healthz", "/metrics", "/static/style.css"} {
		resp := e.get(exempt)
		require.Equal(t, http.StatusOK, resp.StatusCode, exempt)
		require.Empty(t, resp.Header.Get("RateLimit-Policy"), exempt)
	}
}

func TestInboundPaths(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Paths: []string{"/api/"}, Exempt: []string{"/api/buckets/"}}))
	for range 3 {
		require.Equal(t, http.StatusOK, e.get("/admin/buckets", asAdmin).StatusCode, "not under a limited prefix")
		require.Empty(t, e.get("/api/buckets/P/prod/x").Header.Get("RateLimit-Policy"), "exempt")
	}
	require.Equal(t, http.StatusUnauthorized, e.get("/api/buckets").StatusCode)
	require.Equal(t, http.StatusTooManyRequests, e.get("/api/buckets").StatusCode)
}

func TestInboundTokenOverridesIP(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{
		IPLimit: 2, Window: time.Minute, Block: time.Minute,
		Tokens: []web.InboundToken{{Hash: web.HashToken("tok-A"), Limit: 5, Window: 10 * time.Second}},
	}))
	tokA := withHeader(web.TokenHeader, "tok-A")
	for i := range 5 {
		resp := e.get(anonymousAPI, tokA)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "token request %d", i)
		require.Equal(t, `"token";q=5;w=10`, resp.Header.Get("RateLimit-Policy"))
	}
	resp := e.get(anonymousAPI, tokA)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "60", resp.Header.Get("Retry-After"), "the token takes the IP's block when it has none")

	// The same IP without the token has its own, untouched limit.
	require.Equal(t, `"ip";r=1;t=60`, e.get(anonymousAPI).Header.Get("RateLimit"))
	// An unknown token does not escape the IP limit.
	resp = e.get(anonymousAPI, withHeader(web.TokenHeader, "made-up"))
	require.Equal(t, `"ip";q=2;w=60`, resp.Header.Get("RateLimit-Policy"))
	require.Equal(t, `"ip";r=0;t=60`, resp.Header.Get("RateLimit"))
	require.Equal(t, http.StatusTooManyRequests, e.get(anonymousAPI, withHeader(web.TokenHeader, "another")).StatusCode)
}

func TestInboundClientIP(t *testing.T) {
	const proxy = "192.0.2.50:4000"
	tests := []struct {
		name    string
		trusted string
		// requests, each (peer, X-Forwarded-For); the limit is 1, so every
		// request after the first on one bucket is refused.
		requests   [][2]string
		wantStatus []int
		wantIDs    []string // identifiers of the INBOUND_IP buckets
	}{
		{
			name:       "SpoofedForwardedForIgnored",
			requests:   [][2]string{{proxy, "198.51.100.1"}, {proxy, "198.51.100.2"}, {proxy, ""}},
			wantStatus: []int{404, 429, 429},
			wantIDs:    []string{"192.0.2.50"},
		},
		{
			name:       "TrustedProxyForwardsClients",
			trusted:    "192.0.2.50/32",
			requests:   [][2]string{{proxy, "198.51.100.1"}, {proxy, "198.51.100.2"}, {proxy, "198.51.100.1"}},
			wantStatus: []int{404, 404, 429},
			wantIDs:    []string{"198.51.100.1", "198.51.100.2"},
		},
		{
			name:    "LeftOfTheFirstUntrustedHopIsNotBelieved",
			trusted: "192.0.2.0/24",
			requests: [][2]string{
				{proxy, "203.0.113.9, 198.51.100.1"},
				{proxy, "203.0.113.10, 198.51.100.1, 192.0.2.7"},
			},
			wantStatus: []int{404, 429},
			wantIDs:    []string{"198.51.100.1"},
		},
		{
			name:       "UntrustedPeerWithTrustedLookingHeader",
			trusted:    "192.0.2.50/32",
			requests:   [][2]string{{"203.0.113.5:1", "192.0.2.50"}, {"203.0.113.5:2", "198.51.100.9"}},
			wantStatus: []int{404, 429},
			wantIDs:    []string{"203.0.113.5"},
		},
		{
			name:       "IPv6CountedPer64",
			requests:   [][2]string{{"[2001:db8:1:2::5]:1", ""}, {"[2001:db8:1:2:ffff::6]:1", ""}, {"[2001:db8:1:3::5]:1", ""}},
			wantStatus: []int{404, 429, 404},
			wantIDs:    []string{"2001:db8:1:2::/64", "2001:db8:1:3::/64"},
		},
		{
			name:       "IPv4MappedIsIPv4",
			requests:   [][2]string{{"[::ffff:198.51.100.4]:1", ""}, {"198.51.100.4:2", ""}},
			wantStatus: []int{404, 429},
			wantIDs:    []string{"198.51.100.4"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trusted, err := settings.ParseTrustedProxies(tt.trusted)
			require.NoError(t, err)
			e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Block: time.Minute}),
				withServer(func(s *web.Server) { s.TrustedProxies = trusted }))
			for i, req := range tt.requests {
				opts := []reqOpt{fromAddr(req[0])}
				if req[1] != "" {
					opts = append(opts, withHeader("X-Forwarded-For", req[1]))
				}
				require.Equal(t, tt.wantStatus[i], e.get(anonymousAPI, opts...).StatusCode, "request %d", i)
			}
			page, err := e.reader.List(t.Context(), inspect.Filter{Policy: web.PolicyInboundIP})
			require.NoError(t, err)
			var ids []string
			for _, st := range page.States {
				ids = append(ids, st.Key.Identifier)
			}
			require.Equal(t, tt.wantIDs, ids)
		})
	}
}

func TestInboundStoreDown(t *testing.T) {
	t.Run("FailOpen", func(t *testing.T) {
		e := newEnv(t, withFailingStore(), withInbound(web.InboundConfig{IPLimit: 1}))
		for range 3 {
			resp := e.get("/nope")
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "admitted: the handler answered")
			require.Equal(t, `"ip";q=1;w=60`, resp.Header.Get("RateLimit-Policy"))
			require.Empty(t, resp.Header.Get("RateLimit"), "nothing is known about the bucket")
		}
		want := `balde_throttle_fail_open_total{policy="INBOUND_IP"} 3`
		require.True(t, strings.Contains(body(t, e.get("/metrics")), want), "metrics lack %s", want)
	})
	t.Run("FailClosed", func(t *testing.T) {
		e := newEnv(t, withFailingStore(), withInbound(web.InboundConfig{IPLimit: 1, FailClosed: true}))
		resp := e.get("/nope")
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
	})
}

func TestInboundStoresNoRawToken(t *testing.T) {
	e := newEnv(t, withStore(sqlstore.SQLite), withInbound(web.InboundConfig{
		IPLimit: 5, Tokens: []web.InboundToken{{Hash: web.HashToken("very-secret-token"), Limit: 1}},
	}))
	tok := withHeader(web.TokenHeader, "very-secret-token")
	require.Equal(t, http.StatusNotFound, e.get(anonymousAPI, tok).StatusCode)
	require.Equal(t, http.StatusTooManyRequests, e.get(anonymousAPI, tok).StatusCode)

	page, err := e.reader.List(t.Context(), inspect.Filter{Policy: web.PolicyInboundToken})
	require.NoError(t, err)
	require.Len(t, page.States, 1)
	require.Equal(t, web.HashToken("very-secret-token"), page.States[0].Key.Identifier)
	require.False(t, page.States[0].Orphan)

	db := e.store.(*sqlstore.Store).DB()
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM balde_buckets WHERE identifier LIKE '%secret%'`))
	require.Zero(t, n)
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM balde_token_ledger WHERE identifier LIKE '%secret%' OR ref LIKE '%secret%'`))
	require.Zero(t, n)
}

func TestInboundBucketsShowInAdmin(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 5, Window: time.Minute, Block: 5 * time.Minute}))
	e.get("/api/buckets", fromAddr("198.51.100.77:1"))
	e.get("/nope", fromAddr("198.51.100.77:1"))
	doc := document(t, e.get("/admin/buckets?policy=INBOUND_IP", asAdmin, fromAddr("198.51.100.77:1")))
	r := row(t, doc, "198.51.100.77")
	require.Equal(t, "3", strings.TrimSpace(r["Tokens"].Text()), "the API without the credential and unmatched requests were charged to the IP, the admin's page to the admin")
	require.Equal(t, "5/min (sliding window)", r["Refill"].Text())
}
