package balde_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// The admin pages switch a policy's shadow mode: an admin's action with a
// reason, recorded in the audit trail each time; a viewer's attempt is a
// 403, recorded as refused; a DICT mirror policy is a 400 and nothing
// changes. The bucket page and the list mark the bucket "shadow", its
// ledger shows the would-be refusal, and /metrics counts it.
func TestShadowModeFromTheAdminPages(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		clock := throttle.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
		eng, err := balde.Open(ctx, balde.Config{DB: sqlstoretest.DSN(t, engine), Migrate: true, Clock: clock.Now, Observer: web.NewMetrics(),
			Resolvers: throttle.Resolvers{throttle.Policies{shadowPolicy.Name: shadowPolicy}}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
		s := eng.NewServer("12345678")
		s.Authenticate = func(r *http.Request) (string, bool) { u := r.Header.Get("X-User"); return u, u != "" }
		s.RoleOf = func(_ *http.Request, user string) web.Role {
			if user == "vera" {
				return web.RoleViewer
			}
			return web.RoleAdmin
		}
		h, err := s.Handler()
		require.NoError(t, err)
		do := func(method, path, user string, form url.Values) *http.Response {
			var body io.Reader
			if form != nil {
				body = strings.NewReader(form.Encode())
			}
			r := httptest.NewRequest(method, path, body)
			if form != nil {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			r.Header.Set("X-User", user)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Result()
		}
		page := func(path string) *goquery.Document {
			resp := do(http.MethodGet, path, "ana", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			doc, err := goquery.NewDocumentFromReader(resp.Body)
			require.NoError(t, err)
			return doc
		}
		key := throttle.Key{Policy: shadowPolicy.Name, Env: "prod", Identifier: "a"}
		d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: key, Cost: shadowPolicy.Capacity})
		require.NoError(t, err)
		require.True(t, d.Allowed)
		bucketPath := "/admin/buckets/APP_SMS/prod/a"
		switchPath := "/admin/policies/APP_SMS/shadow"
		on := url.Values{"shadow": {"on"}, "reason": {"new limit, one week of watching"}, "env": {"prod"}, "identifier": {"a"}}

		doc := page(bucketPath)
		require.Equal(t, switchPath, doc.Find("form.shadow-switch").AttrOr("action", ""))
		require.Equal(t, "on", doc.Find(`form.shadow-switch input[name="shadow"]`).AttrOr("value", ""))
		require.Zero(t, doc.Find("dd.shadow").Length())

		require.Equal(t, http.StatusForbidden, do(http.MethodPost, switchPath, "vera", on).StatusCode)
		require.Equal(t, http.StatusBadRequest, do(http.MethodPost, switchPath, "ana", url.Values{"shadow": {"on"}}).StatusCode, "a reason is required")
		require.False(t, eng.InShadow(shadowPolicy.Name))
		resp := do(http.MethodPost, "/admin/policies/ENTRIES_READ_PARTICIPANT_ANTISCAN/shadow", "ana", on)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		b, _ := io.ReadAll(resp.Body)
		require.Contains(t, string(b), "mirror policy cannot be in shadow mode")
		require.Empty(t, eng.ShadowPolicies())

		resp = do(http.MethodPost, switchPath, "ana", on)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, bucketPath+"?shadow=on", resp.Header.Get("Location"))
		require.True(t, eng.InShadow(shadowPolicy.Name))

		clock.Advance(time.Second)
		d, err = eng.Limiter().Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.True(t, d.Shadow)

		doc = page(bucketPath + "?shadow=on")
		require.Equal(t, "shadow: refusals are recorded, requests admitted", doc.Find("dd.shadow").Text())
		require.Equal(t, "off", doc.Find(`form.shadow-switch input[name="shadow"]`).AttrOr("value", ""))
		require.Contains(t, doc.Find("p.flash").Text(), "shadow mode")
		require.Equal(t, "shadow-blocked", doc.Find("table.ledger tr.ledger-shadow td").Eq(1).Text())
		list := page("/admin/buckets")
		require.Equal(t, "shadow", list.Find(`td.policy .badge.shadow`).Text())
		resp = do(http.MethodGet, "/metrics", "", nil)
		b, _ = io.ReadAll(resp.Body)
		require.Contains(t, string(b), `balde_throttle_shadow_refusals_total{policy="APP_SMS",reason="blocked"} 1`)
		require.NotContains(t, string(b), `balde_throttle_refusals_total{policy="APP_SMS"`)

		off := url.Values{"shadow": {"off"}, "reason": {"the limit holds"}}
		resp = do(http.MethodPost, switchPath, "ana", off)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/admin/buckets?policy=APP_SMS", resp.Header.Get("Location"))
		require.False(t, eng.InShadow(shadowPolicy.Name))
		require.Zero(t, page(bucketPath).Find("dd.shadow").Length())

		entries := listAudit(t, eng)
		for i := range entries {
			entries[i].ID, entries[i].At = 0, time.Time{}
		}
		require.Equal(t, []audit.Entry{
			{User: "ana", Action: audit.ActionShadow, Target: "APP_SMS", Reason: "the limit holds", Outcome: "shadow=off"},
			{User: "ana", Action: audit.ActionShadow, Target: "APP_SMS", Reason: "new limit, one week of watching", Outcome: "shadow=on"},
			{User: "vera", Action: audit.ActionDenied, Target: "action=shadow&target=APP_SMS", Reason: "new limit, one week of watching",
				Outcome: "error=this+action+needs+the+admin+role%3B+viewers+can+only+read&status=403"},
		}, entries)
		audits := page("/admin/audit")
		require.Equal(t, "Shadow mode", audits.Find("table.audit tbody tr").Eq(1).Find("td.action").Text())
		require.Equal(t, "shadow mode on", audits.Find("table.audit tbody tr").Eq(1).Find("td.outcome").Text())
	})
}
