package web_test

import (
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
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// An application mounts the handler under /balde/ in its own plain
// ServeMux, beside routes of its own; every link, form and redirect of
// balde's pages stays under the prefix and leads to a page that exists.
func TestHandlerMountedUnderAPrefix(t *testing.T) {
	for _, strip := range []bool{false, true} {
		name := "MountedAsIs"
		if strip {
			name = "MountedWithStripPrefix"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, withDict(), withSifen(sifenConfig{}), withInbound(web.InboundConfig{IPLimit: 1000}),
				withServer(func(s *web.Server) { s.BasePath = "/balde" }))
			e.take(key("P", "x/y"), 3)
			h, err := e.server.Handler()
			require.NoError(t, err)
			if strip {
				h = http.StripPrefix("/balde", h)
			}
			mux := http.NewServeMux()
			mux.Handle("/balde/", h)
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "the app's own 404", http.StatusTeapot) })

			seen := crawl(t, mux, "/balde/")
			t.Logf("crawled %d pages", len(seen))
			for _, want := range []string{"/balde/admin/buckets", "/balde/documents", "/balde/dict/lookup", "/balde/static/style.css", "/balde/admin/buckets/P/prod/x%2Fy"} {
				require.Contains(t, seen, want)
			}
			// The DICT-format endpoints and the probes are there too.
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/balde/policies/", nil)
			req.Header.Set("PI-RequestingParticipant", "12345678")
			mux.ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			rec = httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/balde/healthz", nil))
			require.Equal(t, http.StatusOK, rec.Code)
		})
	}
}

// crawl follows, as the admin, every link, stylesheet, GET form and
// redirect from start, requiring each to stay under /balde/ and answer;
// POST forms are only checked for their target. It returns the paths seen.
func crawl(t *testing.T, h http.Handler, start string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	queue := []string{start}
	for len(queue) > 0 && len(seen) < 60 {
		target := queue[0]
		queue = queue[1:]
		u, err := url.Parse(target)
		require.NoError(t, err)
		if seen[u.EscapedPath()] {
			continue
		}
		seen[u.EscapedPath()] = true
		require.True(t, strings.HasPrefix(target, "/balde/"), "a link left the prefix: %s", target)

		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.SetBasicAuth(adminUser, adminPassword)
		h.ServeHTTP(rec, req)
		if loc := rec.Header().Get("Location"); loc != "" {
			queue = append(queue, loc)
			continue
		}
		require.Equal(t, http.StatusOK, rec.Code, "GET %s: %s", target, rec.Body.String())
		if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			continue
		}
		doc, err := goquery.NewDocumentFromReader(rec.Body)
		require.NoError(t, err)
		doc.Find("a[href], link[href]").Each(func(_ int, s *goquery.Selection) {
			href, _ := s.Attr("href")
			queue = append(queue, resolve(t, target, href))
		})
		doc.Find("form").Each(func(_ int, s *goquery.Selection) {
			action, _ := s.Attr("action")
			action = resolve(t, target, action)
			require.True(t, strings.HasPrefix(action, "/balde/"), "a form on %s posts outside the prefix: %s", target, action)
			if method, _ := s.Attr("method"); strings.EqualFold(method, "get") || method == "" {
				queue = append(queue, action)
			}
		})
	}
	return seen
}

// resolve makes href absolute against the page at base (a path).
func resolve(t *testing.T, base, href string) string {
	t.Helper()
	b, err := url.Parse(base)
	require.NoError(t, err)
	r, err := url.Parse(href)
	require.NoError(t, err)
	require.Empty(t, r.Host, "balde links within itself: %s", href)
	return b.ResolveReference(r).RequestURI()
}

func TestHandlerValidatesInsteadOfPanicking(t *testing.T) {
	mem := throttletest.NewMemStore(time.Now)
	lim, err := throttle.NewLimiter(mem, testPolicies, throttle.Config{})
	require.NoError(t, err)
	tests := []struct {
		name  string
		setup func(*web.Server)
		want  string
	}{
		{"NoLimiter", func(s *web.Server) { s.Limiter = nil }, "needs a Limiter"},
		{"NoReader", func(s *web.Server) { s.Reader = nil }, "needs a Reader"},
		{"NoAdmin", func(s *web.Server) { s.Admin = web.Credentials{} }, "user name"},
		{"BadBasePath", func(s *web.Server) { s.BasePath = "balde/" }, "base path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := web.NewServer()
			s.Limiter = lim
			s.Reader = inspect.New(lim, mem)
			s.Admin = web.Credentials{User: adminUser, Password: adminPassword}
			s.Logger = testLogger(t)
			tt.setup(s)
			_, err := s.Handler()
			require.ErrorContains(t, err, tt.want)
		})
	}

	// A server used without Open or Handler answers, it does not panic.
	rec := httptest.NewRecorder()
	web.NewServer().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/buckets", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Contains(t, rec.Body.String(), "Open or Handler")
}

// The application brings its own login: Authenticate replaces basic auth.
func TestHandlerWithTheApplicationsAuthentication(t *testing.T) {
	e := newEnv(t, withServer(func(s *web.Server) {
		s.Admin = web.Credentials{}
		s.Authenticate = func(r *http.Request) (string, bool) {
			c, err := r.Cookie("app_session")
			if err != nil || c.Value != "s3ss10n-of-ana" {
				return "", false
			}
			return "ana@app", true
		}
	}))
	resp := e.get("/admin/buckets")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Header.Get("WWW-Authenticate"), "no basic-auth dialog over the app's login")
	resp = e.get("/admin/buckets", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "app_session", Value: "s3ss10n-of-ana"}) })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body(t, resp), "ana@app")
}
