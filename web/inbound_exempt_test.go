package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde/web"
)

// Issue 13 point 6: exemptions were path prefixes, so /healthzX and
// /metricsfoo escaped the limiter.
func TestInboundExemptsExactPathsOnly(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 100}))
	tests := []struct {
		path   string
		exempt bool
	}{
		{"/healthz", true},
		{"/livez", true},
		{"/readyz", true},
		{"/metrics", true},
		{"/favicon.ico", true},
		{"/static/style.css", true},
		{"/healthzX", false},
		{"/healthz/x", false},
		{"/metricsfoo", false},
		{"/livez2", false},
		{"/readyz.json", false},
		{"/favicon.ico.bak", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := e.get(tt.path)
			if tt.exempt {
				require.Empty(t, resp.Header.Get("RateLimit-Policy"), "%s is exempt", tt.path)
			} else {
				require.Equal(t, `"ip";q=100;w=60`, resp.Header.Get("RateLimit-Policy"), "%s is limited", tt.path)
			}
		})
	}
}

func TestMetricsToken(t *testing.T) {
	e := newEnv(t, withServer(func(s *web.Server) { s.MetricsToken = "scrape-secret" }))
	tests := []struct {
		name       string
		opts       []reqOpt
		wantStatus int
	}{
		{"NoToken", nil, http.StatusUnauthorized},
		{"WrongToken", []reqOpt{withHeader("Authorization", "Bearer nope")}, http.StatusUnauthorized},
		{"AdminIsNotTheToken", []reqOpt{asAdmin}, http.StatusUnauthorized},
		{"Token", []reqOpt{withHeader("Authorization", "Bearer scrape-secret")}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.wantStatus, e.get("/metrics", tt.opts...).StatusCode)
		})
	}
	// Without a token /metrics stays open (the default).
	require.Equal(t, http.StatusOK, newEnv(t).get("/metrics").StatusCode)
}

// Issue 14 point 6: the logged-in admin was locked out by the public per-IP
// limit after 120 page loads a minute.
func TestInboundAdminLimitedPerCredential(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 3, Window: time.Minute, Block: 5 * time.Minute, AdminLimit: 50}))
	for i := range 50 {
		resp := e.get("/admin/buckets", asAdmin)
		require.Equal(t, http.StatusOK, resp.StatusCode, "admin page load %d", i)
		require.Equal(t, `"admin";q=50;w=60`, resp.Header.Get("RateLimit-Policy"))
	}
	resp := e.get("/admin/buckets", asAdmin)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "generous is not unlimited")

	// The public limit of the same IP is untouched by the admin's loads...
	resp = e.get("/nope")
	require.Equal(t, `"ip";r=2;t=60`, resp.Header.Get("RateLimit"))
	// ...and still applies to anyone without the credential, guessing
	// passwords included.
	wrong := func(r *http.Request) { r.SetBasicAuth(adminUser, "guess") }
	require.Equal(t, http.StatusUnauthorized, e.get("/admin/buckets", wrong).StatusCode)
	require.Equal(t, http.StatusUnauthorized, e.get("/admin/buckets").StatusCode)
	require.Equal(t, http.StatusTooManyRequests, e.get("/admin/buckets", wrong).StatusCode)
}

func TestFaviconServed(t *testing.T) {
	e := newEnv(t)
	resp := e.get("/favicon.ico")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "image/x-icon", resp.Header.Get("Content-Type"))
	b := body(t, resp)
	require.Equal(t, "\x00\x00\x01\x00", b[:4], "an ICO file")
}

// Issue 14 point 6: the 429 page linked to the bucket list, itself a 429.
// Its one link now retries the page that was refused, and the page reloads
// itself once the wait is over.
func TestTooManyRequestsPageLinksToARetryThatWorks(t *testing.T) {
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Window: time.Minute, Block: 2 * time.Minute}))
	const target = "/admin/buckets?policy=P"
	require.Equal(t, http.StatusUnauthorized, e.get(target).StatusCode)
	resp := e.get(target)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	doc := document(t, resp)

	refresh, ok := doc.Find(`meta[http-equiv="refresh"]`).Attr("content")
	require.True(t, ok, "the page reloads itself when the wait is over")
	require.Equal(t, strconv.Itoa(wait), refresh)

	hrefs := doc.Find("a[href]").Map(func(_ int, s *goquery.Selection) string { h, _ := s.Attr("href"); return h })
	require.NotEmpty(t, hrefs)
	for _, h := range hrefs {
		require.Equal(t, target, h, "every link retries the refused page")
	}

	e.clock.Advance(time.Duration(wait) * time.Second)
	u, err := url.Parse(hrefs[0])
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, e.get(u.String()).StatusCode, "after the wait the link is answered, not refused")
}

// With a bcrypt hash the first load is charged to the IP (only bcrypt can
// tell the password, and it runs after the IP limit); once bcrypt accepted
// the pair, the admin is charged to its own bucket.
func TestInboundAdminWithBcrypt(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte(adminPassword), bcrypt.MinCost)
	require.NoError(t, err)
	e := newEnv(t, withInbound(web.InboundConfig{IPLimit: 1, Window: time.Minute, AdminLimit: 100}),
		withServer(func(s *web.Server) { s.Admin = web.Credentials{User: adminUser, PasswordBcrypt: string(hash)} }))
	resp := e.get("/admin/buckets", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `"ip";q=1;w=60`, resp.Header.Get("RateLimit-Policy"))
	for range 5 {
		resp := e.get("/admin/buckets", asAdmin)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, `"admin";q=100;w=60`, resp.Header.Get("RateLimit-Policy"))
	}
}
