package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/audit/auditsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

const (
	viewerUser     = "vera"
	viewerPassword = "read only please"
)

func asViewer(r *http.Request) { r.SetBasicAuth(viewerUser, viewerPassword) }

// withViewer adds a viewer (plain password) and a second admin (bcrypt)
// beside the env's admin.
func withViewer(t *testing.T) option {
	hash, err := bcrypt.GenerateFromPassword([]byte("second admin"), bcrypt.MinCost)
	require.NoError(t, err)
	return withServer(func(s *web.Server) {
		s.Users = []web.Credentials{
			{User: viewerUser, Password: viewerPassword, Role: web.RoleViewer},
			{User: "bruno", PasswordBcrypt: string(hash), Role: web.RoleAdmin},
		}
	})
}

// A viewer reads every page and the API; every action that changes state
// answers 403 with a message in the page's language, and changes nothing.
func TestViewerReadsButCannotAct(t *testing.T) {
	var trail *auditsql.Store
	e := newEnv(t, withViewer(t), withDict(), withSifen(sifenConfig{}), withAudit(t, &trail))
	k := key("P", "x")
	e.take(k, 5)
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 1)...), sifen.EnvTest)
	doc := docPath(ids[0])

	for _, path := range []string{"/admin/buckets", "/admin/buckets/P/prod/x", "/api/buckets", "/api/buckets/P/prod/x", "/documents", doc, "/dict/lookup", "/admin/audit"} {
		require.Equal(t, http.StatusOK, e.get(path, asViewer).StatusCode, path)
	}
	actions := []struct {
		name, method, path string
		form               url.Values
	}{
		{"ResetConfirm", http.MethodGet, "/admin/buckets/P/prod/x/reset", nil},
		{"Reset", http.MethodPost, "/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}, "reason": {"test"}}},
		{"Send", http.MethodPost, doc + "/send", url.Values{}},
		{"SendAll", http.MethodPost, "/documents/send-ruc", url.Values{"ruc": {"88888801"}, "env": {"test"}}},
		{"Lookup", http.MethodPost, "/dict/lookup", url.Values{"key": {keyFound}, "payer_id": {payerPF}}},
		{"Payment", http.MethodPost, "/dict/payments", url.Values{"end_to_end_id": {"E1234567820250101120000000000001"}}},
	}
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			pt := withHeader("Accept-Language", "pt-BR")
			var resp *http.Response
			if a.method == http.MethodGet {
				resp = e.get(a.path, asViewer, pt)
			} else {
				resp = e.post(a.path, a.form, asViewer, pt)
			}
			require.Equal(t, http.StatusForbidden, resp.StatusCode)
			require.Contains(t, body(t, resp), "esta ação exige o papel de admin")
		})
	}
	require.Equal(t, int64(5), e.balance(k), "no reset happened")
	require.Zero(t, e.sifenSends(t), "nothing was sent")
	require.Zero(t, e.dictStats(t).Count(dict.OpGetEntry, http.StatusOK), "nothing was looked up")
	// Each refused attempt is in the audit trail: who, when, what was
	// refused (the action and what it was on), the reason typed, the 403.
	entries, err := trail.List(t.Context(), audit.Query{})
	require.NoError(t, err)
	var got []audit.Entry
	for _, en := range entries {
		require.False(t, en.At.IsZero())
		require.Equal(t, viewerUser, en.User)
		require.Equal(t, audit.ActionDenied, en.Action)
		require.Equal(t, "error=this+action+needs+the+admin+role%3B+viewers+can+only+read&status=403", en.Outcome)
		got = append(got, audit.Entry{Target: en.Target, Reason: en.Reason})
	}
	require.Equal(t, []audit.Entry{ // newest first
		{Target: "action=dict-payment"},
		{Target: "action=dict-lookup&target=" + payerPF},
		{Target: "action=sifen-send-all&target=env%3Dtest%26ruc%3D88888801"},
		{Target: "action=sifen-send&target=" + strings.TrimPrefix(doc, "/documents/")},
		{Target: "action=reset&target=P%2Fprod%2Fx", Reason: "test"},
		{Target: "action=reset&target=P%2Fprod%2Fx"},
	}, got)

	// The API in JSON.
	resp := e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}}, asViewer, withHeader("Accept-Language", "es-PY"))
	require.Contains(t, body(t, resp), "esta acción requiere el rol de admin")
}

// A viewer's pages mark the admin-only actions and say why; an admin's do not.
func TestViewerSeesAdminActionsDisabled(t *testing.T) {
	e := newEnv(t, withViewer(t), withDict())
	e.take(key("P", "x"), 5)

	viewer := document(t, e.get("/admin/buckets/P/prod/x", asViewer))
	require.Equal(t, "read-only", viewer.Find("body").AttrOr("class", ""))
	require.Contains(t, viewer.Find(".read-only-note").Text(), "viewer")
	require.Zero(t, viewer.Find(`a[href$="/reset"]`).Length(), "no link to the reset form")
	reset := viewer.Find("button.danger")
	_, disabled := reset.Attr("disabled")
	require.True(t, disabled)
	require.Contains(t, viewer.Text(), "Only an admin can reset a bucket.")

	lookup := document(t, e.get("/dict/lookup", asViewer))
	_, disabled = lookup.Find("button#lookup").Attr("disabled")
	require.True(t, disabled)

	admin := document(t, e.get("/admin/buckets/P/prod/x", asAdmin))
	require.Zero(t, admin.Find(".read-only-note").Length())
	require.Equal(t, 1, admin.Find(`a[href$="/reset"]`).Length())
}

// A viewer's Upload, Send and Send-all buttons on the documents pages are
// disabled in the page itself, not greyed by a stylesheet alone; an
// admin's are not. The upload of a viewer is refused (403) and recorded.
func TestViewerDocumentActionsAreDisabled(t *testing.T) {
	var trail *auditsql.Store
	e := newEnv(t, withViewer(t), withSifen(sifenConfig{}), withAudit(t, &trail))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 1)...), sifen.EnvTest)
	for _, path := range []string{"/documents?ruc=88888801&env=test", docPath(ids[0])} {
		controls := func(who reqOpt) (n int, enabled []string) {
			doc := document(t, e.get(path, who))
			doc.Find(`form[method="post"] button, form[method="post"] input:not([type="hidden"]), form[method="post"] select`).Each(func(_ int, c *goquery.Selection) {
				n++
				if _, off := c.Attr("disabled"); !off {
					enabled = append(enabled, goquery.NodeName(c)+" "+c.AttrOr("name", c.AttrOr("id", c.Text())))
				}
			})
			return n, enabled
		}
		n, enabled := controls(asViewer)
		require.Empty(t, enabled, "%s: a viewer's controls that change state", path)
		if path == docPath(ids[0]) {
			require.Equal(t, 1, n, "Send")
		} else {
			require.Equal(t, 6, n, "the file, env, replace and Upload; Send all; Send")
		}
		n, enabled = controls(asAdmin)
		require.Len(t, enabled, n, "%s: an admin's are all enabled", path)
	}

	resp := e.upload(sifentest.Lote(sifentest.Docs("88888801", 2, 1)...), "test", asViewer)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	entries, err := trail.List(t.Context(), audit.Query{User: viewerUser})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, audit.ActionDenied, entries[0].Action)
	require.Equal(t, "action=sifen-import", entries[0].Target)
}

// Several admins: the second one (bcrypt) resets; a wrong password or a
// name nobody has is a 401 for any role.
func TestUsersWithRoles(t *testing.T) {
	e := newEnv(t, withViewer(t))
	k := key("P", "x")
	e.take(k, 5)
	bruno := func(r *http.Request) { r.SetBasicAuth("bruno", "second admin") }
	for name, opt := range map[string]reqOpt{
		"ViewerWrongPassword": func(r *http.Request) { r.SetBasicAuth(viewerUser, "guess") },
		"AdminWithViewerPass": func(r *http.Request) { r.SetBasicAuth("bruno", viewerPassword) },
		"Nobody":              func(r *http.Request) { r.SetBasicAuth("mallory", "second admin") },
	} {
		require.Equal(t, http.StatusUnauthorized, e.get("/admin/buckets", opt).StatusCode, name)
	}
	resp := e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}, "reason": {"customer called"}}, bruno)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, int64(10), e.balance(k))
}

func TestParseUsers(t *testing.T) {
	tests := []struct {
		name, in string
		want     []web.Credentials
		wantErr  string
	}{
		{name: "OK", in: "# on call\noncall:viewer:$2a$10$abc\nlead:admin:pass:with:colons, ops:Viewer:x",
			want: []web.Credentials{
				{User: "oncall", PasswordBcrypt: "$2a$10$abc", Role: web.RoleViewer},
				{User: "lead", Password: "pass:with:colons", Role: web.RoleAdmin},
				{User: "ops", Password: "x", Role: web.RoleViewer},
			}},
		{name: "ErrRole", in: "a:root:x", wantErr: `line 1: user "a": web: role "root" (want viewer or admin)`},
		{name: "ErrShape", in: "a:admin", wantErr: "line 1: want NAME:ROLE:SECRET"},
		{name: "ErrTwice", in: "a:admin:x\na:viewer:y", wantErr: `line 2: user "a" listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := web.ParseUsers(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// balance is k's balance now.
func (e *env) balance(k throttle.Key) int64 {
	e.t.Helper()
	st, err := e.limiter.State(e.t.Context(), k)
	require.NoError(e.t, err)
	return st.Tokens
}

// An application with its own login gives roles through RoleOf; without
// it every user it authenticates is an admin, as before roles.
func TestAppLoginWithRoles(t *testing.T) {
	for _, tt := range []struct {
		name       string
		roleOf     func(*http.Request, string) web.Role
		wantStatus int
	}{
		{"RoleOfViewer", func(_ *http.Request, user string) web.Role {
			if user == "guest" {
				return web.RoleViewer
			}
			return web.RoleAdmin
		}, http.StatusForbidden},
		{"NoRoleOfIsAdmin", nil, http.StatusSeeOther},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, withServer(func(s *web.Server) {
				s.Authenticate = func(r *http.Request) (string, bool) { return r.Header.Get("X-User"), r.Header.Get("X-User") != "" }
				s.RoleOf = tt.roleOf
			}))
			k := key("P", "x")
			e.take(k, 5)
			guest := withHeader("X-User", "guest")
			require.Equal(t, http.StatusOK, e.get("/admin/buckets/P/prod/x", guest).StatusCode)
			require.Equal(t, tt.wantStatus, e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}}, guest).StatusCode)
		})
	}
}
