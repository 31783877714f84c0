package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// middleware returns the inbound limiter of cfg as middleware in front of
// a plain ServeMux of an application, on a fake clock.
func middleware(t *testing.T, cfg web.InboundConfig) (http.Handler, *throttle.ManualClock) {
	t.Helper()
	clock := throttle.NewManualClock(throttletest.Epoch)
	in, err := web.NewInbound(cfg)
	require.NoError(t, err)
	require.NoError(t, in.UseStore(throttletest.NewMemStore(clock.Now), throttle.Config{Clock: clock.Now}))
	app := http.NewServeMux()
	app.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "app") })
	return in.Middleware(app), clock
}

func serve(h http.Handler, target, peer string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestInboundMiddlewareOnAPlainMux(t *testing.T) {
	h, clock := middleware(t, web.InboundConfig{IPLimit: 2, Window: time.Minute, Block: 2 * time.Minute})
	const peer = "198.51.100.1:1234"
	for i := range 2 {
		rec := serve(h, "/api/orders", peer)
		require.Equal(t, http.StatusOK, rec.Code, "request %d", i)
		require.Equal(t, "app", rec.Body.String())
	}
	rec := serve(h, "/api/orders", peer)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "120", rec.Header().Get("Retry-After"))
	require.Equal(t, `"ip";q=2;w=60`, rec.Header().Get("RateLimit-Policy"))
	require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Body.String(), "too many requests: retry in 2m0s")

	require.Equal(t, http.StatusOK, serve(h, "/api/orders", "198.51.100.2:1").Code, "another client has its own limit")
	rec = serve(h, "/healthz", peer)
	require.Equal(t, http.StatusOK, rec.Code, "exempt")
	require.Empty(t, rec.Header().Get("RateLimit-Policy"))

	clock.Advance(2 * time.Minute)
	require.Equal(t, http.StatusOK, serve(h, "/api/orders", peer).Code, "the block is over")
}

func TestInboundMiddlewareOptions(t *testing.T) {
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	var refused []string
	h, _ := middleware(t, web.InboundConfig{
		IPLimit:         1,
		Tokens:          []web.InboundToken{{Hash: web.HashToken("partner-key"), Limit: 3}},
		TokenHeader:     "X-Api-Key",
		TrustedProxies:  []netip.Prefix{proxy},
		ForwardedHeader: "X-Client-Chain",
		Refused: func(w http.ResponseWriter, r *http.Request, err error) {
			refused = append(refused, err.Error())
			w.WriteHeader(http.StatusTeapot)
		},
	})
	const lb = "10.1.2.3:443"
	tests := []struct {
		name       string
		peer       string
		header     []string
		wantStatus int
		wantPolicy string
	}{
		{"ClientBehindTheProxy", lb, []string{"X-Client-Chain", "203.0.113.5"}, 200, `"ip";q=1;w=60`},
		{"SameClientRefusedByTheAppsWriter", lb, []string{"X-Client-Chain", "203.0.113.5"}, http.StatusTeapot, `"ip";q=1;w=60`},
		{"AnotherClientBehindTheProxy", lb, []string{"X-Client-Chain", "203.0.113.6"}, 200, `"ip";q=1;w=60`},
		{"XForwardedForIsNotTheConfiguredHeader", lb, []string{"X-Forwarded-For", "203.0.113.7"}, 200, `"ip";q=1;w=60`},
		{"TheProxyItselfIsNowLimited", lb, []string{"X-Forwarded-For", "203.0.113.8"}, http.StatusTeapot, `"ip";q=1;w=60`},
		{"TokenInItsHeader", lb, []string{"X-Client-Chain", "203.0.113.5", "X-Api-Key", "partner-key"}, 200, `"token";q=3;w=60`},
		{"TokenInTheDefaultHeaderIsIgnored", "192.0.2.1:1", []string{"API_KEY", "partner-key"}, 200, `"ip";q=1;w=60`},
	}
	for _, tt := range tests {
		rec := serve(h, "/api/orders", tt.peer, tt.header...)
		require.Equal(t, tt.wantStatus, rec.Code, tt.name)
		require.Equal(t, tt.wantPolicy, rec.Header().Get("RateLimit-Policy"), tt.name)
	}
	require.Len(t, refused, 2)
	require.Contains(t, refused[0], "too many requests")
}

func TestInboundMiddlewareNeedsItsLimiter(t *testing.T) {
	in, err := web.NewInbound(web.InboundConfig{IPLimit: 1})
	require.NoError(t, err)
	require.PanicsWithValue(t, "web: Inbound.Middleware: the inbound limiter needs its throttle.Limiter",
		func() { in.Middleware(http.NotFoundHandler()) }, "refused when built, never on a request")
}
