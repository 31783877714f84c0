package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/web"
)

// composedApp is an application's router with balde's handler mounted
// under /balde/ and the inbound middleware placed as named.
func composedApp(t *testing.T, e *env, layout string) http.Handler {
	t.Helper()
	h, err := e.server.Handler()
	require.NoError(t, err)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "app") })
	mux := http.NewServeMux()
	switch layout {
	case "MiddlewareAroundTheApp":
		mux.Handle("/balde/", h)
		mux.Handle("/", app)
		return e.inbound.Middleware(mux)
	case "MiddlewareAroundTheAppWithStripPrefix":
		mux.Handle("/balde/", http.StripPrefix("/balde", h))
		mux.Handle("/", app)
		return e.inbound.Middleware(mux)
	case "MiddlewareAroundEachRoute":
		mux.Handle("/balde/", e.inbound.Middleware(h))
		mux.Handle("/", e.inbound.Middleware(app))
	case "MountBesideTheMiddleware":
		mux.Handle("/balde/", h)
		mux.Handle("/", e.inbound.Middleware(app))
	default:
		t.Fatalf("layout %q", layout)
	}
	return mux
}

var composedLayouts = []string{"MiddlewareAroundTheApp", "MiddlewareAroundTheAppWithStripPrefix", "MiddlewareAroundEachRoute", "MountBesideTheMiddleware"}

func serveAs(h http.Handler, target, peer string, opts ...reqOpt) *http.Response {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = peer
	for _, o := range opts {
		o(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// Issue 19 item 4: following the README (the middleware around the router,
// balde's admin mounted inside it) every admin page was charged to the IP
// and to the admin: a 429 on the 4th page with IPLimit 3. Each request is
// now charged once, to the admin's bucket, whichever wraps which.
func TestInboundComposedChargesOnce(t *testing.T) {
	for _, layout := range composedLayouts {
		t.Run(layout, func(t *testing.T) {
			e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 3, Window: time.Minute, Block: 5 * time.Minute}),
				withServer(func(s *web.Server) { s.BasePath = "/balde" }))
			h := composedApp(t, e, layout)
			const peer = "198.51.100.7:1000"
			pages := []string{"/balde/admin/buckets", "/balde/admin/buckets?policy=P", "/balde/api/buckets"}
			for i := range 10 {
				resp := serveAs(h, pages[i%len(pages)], peer, asAdmin)
				require.Equal(t, http.StatusOK, resp.StatusCode, "admin page %d", i)
				require.Equal(t, fmt.Sprintf(`"admin";r=%d;t=60`, web.DefaultInboundAdminLimit-int64(i)-1), resp.Header.Get("RateLimit"),
					"page %d charged once, to the admin", i)
			}

			// Anyone else from that IP: the app's pages and balde's public
			// endpoints share the IP's limit, one charge each.
			for i, target := range []string{"/orders", "/balde/policies/", "/orders"} {
				resp := serveAs(h, target, peer)
				require.NotEqual(t, http.StatusTooManyRequests, resp.StatusCode, target)
				require.Equal(t, fmt.Sprintf(`"ip";r=%d;t=60`, 2-i), resp.Header.Get("RateLimit"), "%s charged once", target)
			}
			require.Equal(t, http.StatusTooManyRequests, serveAs(h, "/balde/admin/buckets", peer).StatusCode, "no credential: the IP's limit")
			require.Equal(t, http.StatusOK, serveAs(h, "/balde/admin/buckets", peer, asAdmin).StatusCode, "the admin is not the IP")

			// The exemptions hold under the mount too.
			resp := serveAs(h, "/balde/static/style.css", peer)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, resp.Header.Get("RateLimit-Policy"))
			require.Equal(t, http.StatusOK, serveAs(h, "/balde/healthz", peer).StatusCode)
		})
	}
}

// Issue 19 item 4: /api/buckets was always charged per IP, so 121
// anonymous requests to /policies/ from the monitor's IP locked the
// authenticated monitor out for 5 minutes.
func TestInboundAnonymousFloodDoesNotLockOutTheMonitor(t *testing.T) {
	for _, layout := range append([]string{"Standalone"}, composedLayouts...) {
		t.Run(layout, func(t *testing.T) {
			e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 120, Window: time.Minute, Block: 5 * time.Minute}),
				withServer(func(s *web.Server) {
					if layout != "Standalone" {
						s.BasePath = "/balde"
					}
				}))
			var h http.Handler = e.server
			base := ""
			if layout != "Standalone" {
				h, base = composedApp(t, e, layout), "/balde"
			}
			const peer = "203.0.113.9:4000"
			var last *http.Response
			for range 121 {
				last = serveAs(h, base+"/policies/", peer, withHeader("PI-RequestingParticipant", "12345678"))
			}
			require.Equal(t, http.StatusTooManyRequests, last.StatusCode, "the 121st anonymous request is refused")
			require.Equal(t, http.StatusTooManyRequests, serveAs(h, base+"/api/buckets", peer).StatusCode, "and so is that IP without the credential")

			resp := serveAs(h, base+"/api/buckets", peer, asAdmin)
			require.Equal(t, http.StatusOK, resp.StatusCode, "the monitor with the credential")
			require.Equal(t, `"admin";q=1200;w=60`, resp.Header.Get("RateLimit-Policy"))
		})
	}
}

// Paths means one thing: the path as the application's router sees it,
// for the middleware and the mounted server alike.
func TestInboundPathsAreTheApplicationsPaths(t *testing.T) {
	for _, layout := range composedLayouts {
		t.Run(layout, func(t *testing.T) {
			e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Paths: []string{"/balde/policies/", "/orders"}}),
				withServer(func(s *web.Server) { s.BasePath = "/balde" }))
			h := composedApp(t, e, layout)
			const peer = "192.0.2.44:1"
			for range 3 {
				resp := serveAs(h, "/balde/admin/buckets", peer)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "not under a limited path")
				require.Empty(t, resp.Header.Get("RateLimit-Policy"))
			}
			require.NotEqual(t, http.StatusTooManyRequests, serveAs(h, "/balde/policies/", peer).StatusCode)
			require.Equal(t, http.StatusTooManyRequests, serveAs(h, "/balde/policies/", peer).StatusCode, "/balde/policies/ is limited")
			require.Equal(t, http.StatusTooManyRequests, serveAs(h, "/orders", peer).StatusCode, "one IP bucket")
		})
	}
}
