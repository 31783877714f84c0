package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

func TestAuthentication(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed pass"), bcrypt.MinCost)
	require.NoError(t, err)
	modes := map[string]struct {
		creds web.Credentials
		pass  string
	}{
		"Plain":  {web.Credentials{User: adminUser, Password: adminPassword}, adminPassword},
		"Bcrypt": {web.Credentials{User: adminUser, PasswordBcrypt: string(hash), Password: "ignored"}, "hashed pass"},
	}
	targets := []struct {
		name, method, path string
		okStatus           int
	}{
		{"AdminBuckets", http.MethodGet, "/admin/buckets", http.StatusOK},
		{"AdminBucket", http.MethodGet, "/admin/buckets/P/prod/x", http.StatusOK},
		{"ResetConfirm", http.MethodGet, "/admin/buckets/P/prod/x/reset", http.StatusOK},
		{"Reset", http.MethodPost, "/admin/buckets/P/prod/x/reset", http.StatusSeeOther},
		{"APIBuckets", http.MethodGet, "/api/buckets", http.StatusOK},
		{"APIBucket", http.MethodGet, "/api/buckets/P/prod/x", http.StatusOK},
	}
	for mode, m := range modes {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, withServer(func(s *web.Server) { s.Admin = m.creds }))
			for _, tt := range targets {
				t.Run(tt.name, func(t *testing.T) {
					send := func(opts ...reqOpt) *http.Response {
						if tt.method == http.MethodPost {
							return e.post(tt.path, url.Values{"confirm": {"yes"}}, opts...)
						}
						return e.get(tt.path, opts...)
					}
					for name, opts := range map[string][]reqOpt{
						"NoCredential":  nil,
						"WrongPassword": {func(r *http.Request) { r.SetBasicAuth(adminUser, "guess") }},
						"WrongUser":     {func(r *http.Request) { r.SetBasicAuth("root", m.pass) }},
						"EmptyPassword": {func(r *http.Request) { r.SetBasicAuth(adminUser, "") }},
					} {
						resp := send(opts...)
						require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
						require.Equal(t, `Basic realm="balde admin", charset="UTF-8"`, resp.Header.Get("WWW-Authenticate"), name)
					}
					ok := func(r *http.Request) { r.SetBasicAuth(adminUser, m.pass) }
					require.Equal(t, tt.okStatus, send(ok).StatusCode)
					// bcrypt's accepted pair is remembered; a second request takes that path.
					require.Equal(t, tt.okStatus, send(ok).StatusCode)
				})
			}
		})
	}
}

func TestUnauthenticatedResetChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.take(key("P", "x"), 5)
	resp := e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	st, err := e.limiter.State(t.Context(), key("P", "x"))
	require.NoError(t, err)
	require.Equal(t, int64(5), st.Tokens)
}

func TestPublicEndpointsNeedNoCredential(t *testing.T) {
	e := newEnv(t)
	require.Equal(t, http.StatusOK, e.get("/healthz").StatusCode)
	require.Equal(t, http.StatusOK, e.get("/metrics").StatusCode)
	require.Equal(t, http.StatusOK, e.get("/static/style.css").StatusCode)
}

func TestCrossOriginResetRefused(t *testing.T) {
	e := newEnv(t)
	k := key("P", "x")
	e.take(k, 5)
	form := url.Values{"confirm": {"yes"}}
	path := "/admin/buckets/P/prod/x/reset"
	tests := []struct {
		name   string
		opts   []reqOpt
		status int
	}{
		{"CrossSiteFetch", []reqOpt{asAdmin, withHeader("Sec-Fetch-Site", "cross-site")}, http.StatusForbidden},
		{"SameSiteOtherOrigin", []reqOpt{asAdmin, withHeader("Sec-Fetch-Site", "same-site")}, http.StatusForbidden},
		{"OldBrowserOtherOrigin", []reqOpt{asAdmin, withHeader("Origin", "https://evil.example")}, http.StatusForbidden},
		{"SameOrigin", []reqOpt{asAdmin, withHeader("Sec-Fetch-Site", "same-origin")}, http.StatusSeeOther},
		{"OldBrowserSameHost", []reqOpt{asAdmin, withHeader("Origin", "http://example.com")}, http.StatusSeeOther},
		{"NotABrowser", []reqOpt{asAdmin}, http.StatusSeeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.take(k, 5) // empty it a little again
			before, err := e.reader.Ledger(t.Context(), inspect.LedgerQuery{Key: &k, Reasons: []throttle.LedgerReason{throttle.LedgerReset}})
			require.NoError(t, err)
			resp := e.post(path, form, tt.opts...)
			require.Equal(t, tt.status, resp.StatusCode)
			after, err := e.reader.Ledger(t.Context(), inspect.LedgerQuery{Key: &k, Reasons: []throttle.LedgerReason{throttle.LedgerReset}})
			require.NoError(t, err)
			if tt.status == http.StatusForbidden {
				require.Len(t, after, len(before), "a refused reset writes nothing")
				require.Contains(t, body(t, resp), "cross-origin")
			} else {
				require.Len(t, after, len(before)+1)
			}
		})
	}
}
