package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// liveFragments fetches a page's live update (the URL its <main> names)
// and returns the HTML fragments by element id.
func liveFragments(t *testing.T, e *env, liveURL string, opts ...reqOpt) map[string]*goquery.Document {
	t.Helper()
	resp := e.get(liveURL, append([]reqOpt{asAdmin}, opts...)...)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body struct {
		Fragments map[string]string `json:"fragments"`
		At        string            `json:"at"`
	}
	require.NoError(t, json.Unmarshal(b, &body), string(b))
	require.NotEmpty(t, body.At)
	out := map[string]*goquery.Document{}
	for id, html := range body.Fragments {
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
		require.NoError(t, err)
		out[id] = doc
	}
	return out
}

// What was asked: live updates of the summary and the chart without
// reloading the whole page every 10 s. The pages load static/live.js (the
// CSP allows scripts and fetches from the page's origin only) and name
// their own ?live=1 URL, which answers the parts that change as HTML
// fragments in JSON; the fragments follow the state.
func TestLiveUpdatesFollowTheState(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	key := throttle.Key{Policy: "P", Env: "prod", Identifier: "live"}
	take := func(n int64) {
		t.Helper()
		d, err := e.limiter.Take(ctx, "t", throttle.Charge{Key: key, Cost: n})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	take(1)

	resp := e.get("/admin/buckets", asAdmin)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "connect-src 'self'")
	doc := document(t, resp)
	require.Empty(t, doc.Find(`meta[http-equiv="refresh"]`).Nodes, "no reload of the whole page")
	src, _ := doc.Find(`script[src]`).Attr("src")
	require.Equal(t, "/static/live.js", src)
	require.Empty(t, doc.Find(`script:not([src])`).Nodes, "no inline script")
	liveURL, ok := doc.Find("main").Attr("data-live-url")
	require.True(t, ok)
	require.Equal(t, "/admin/buckets?live=1", liveURL)

	js := e.get("/static/live.js")
	require.Equal(t, http.StatusOK, js.StatusCode)
	require.Contains(t, js.Header.Get("Content-Type"), "javascript")
	js.Body.Close()

	card := func(f map[string]*goquery.Document, class string) string {
		return strings.TrimSpace(f["live-summary"].Find(".summary a.card." + class + " .num").First().Text())
	}
	f := liveFragments(t, e, liveURL)
	require.Contains(t, f, "live-summary")
	require.NotContains(t, f, "live-list", "the table updates only with auto-refresh on")
	require.Equal(t, "0", card(f, "sev-critical"))
	take(9) // 0 of 10 left: Critical
	require.Equal(t, "1", card(liveFragments(t, e, liveURL), "sev-critical"), "the summary follows without a reload")

	// Auto-refresh on: the table updates in place too.
	doc = document(t, e.get("/admin/buckets?refresh=1", asAdmin))
	liveURL, _ = doc.Find("main").Attr("data-live-url")
	f = liveFragments(t, e, liveURL)
	require.Equal(t, "0", strings.TrimSpace(f["live-list"].Find(`table.buckets tbody tr td.tokens`).Text()))

	// The bucket page at the 5-minute window: state, chart and ledger.
	doc = document(t, e.get("/admin/buckets/P/prod/live?window=5m", asAdmin))
	require.Equal(t, "last 5 minutes", strings.TrimSpace(doc.Find(`nav.tabs a[aria-current="page"]`).Text()))
	var windows []string
	doc.Find(`nav.tabs a`).Each(func(_ int, a *goquery.Selection) { windows = append(windows, a.Text()) })
	require.Equal(t, []string{"last 5 minutes", "last 15 minutes", "last hour", "last day", "last week"}, windows)
	liveURL, _ = doc.Find("main").Attr("data-live-url")
	require.Contains(t, liveURL, "window=5m")
	f = liveFragments(t, e, liveURL)
	dots := f["live-chart"].Find("svg.chart circle.chart-dot").Length()
	require.Equal(t, 1, dots, "two takes at one instant: one slot")
	e.clock.Advance(30 * time.Second)
	_, err := e.limiter.Take(ctx, "t", throttle.Charge{Key: key, Cost: 1})
	require.NoError(t, err)
	f = liveFragments(t, e, liveURL)
	require.Equal(t, dots+1, f["live-chart"].Find("svg.chart circle.chart-dot").Length(), "the chart follows")
	require.Equal(t, 3, f["live-ledger"].Find("table.ledger tbody tr").Length())
	require.Contains(t, f["live-state"].Find("section.state").Text(), "4 of 10", "30 s refilled 5 tokens, the take used one")

	// A window the page does not offer is a bad request.
	require.Equal(t, http.StatusBadRequest, e.get("/admin/buckets/P/prod/live?window=2m", asAdmin).StatusCode)
}

// What was asked: a refusals/decisions overview per policy over the
// selected window, read from the ledger, on SQLite and PostgreSQL.
func TestDecisionsOverviewPerPolicy(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, withStore(engine), withServer(func(s *web.Server) { s.Policies = []string{"P", "SLOW", "BIG"} }))
			take := func(policy, id string, n int64) bool {
				t.Helper()
				d, err := e.limiter.Take(ctx, "t", throttle.Charge{Key: throttle.Key{Policy: policy, Env: "prod", Identifier: id}, Cost: n})
				require.NoError(t, err)
				return d.Allowed
			}
			// An hour ago: outside the 15-minute window, inside the hour.
			require.True(t, take("SLOW", "old", 1))
			e.clock.Advance(time.Hour - time.Minute)
			// P: 10 admitted then 3 refused (empty); SLOW: 1 admitted, 2
			// refused (cooldown).
			for range 10 {
				require.True(t, take("P", "a", 1))
			}
			for range 3 {
				require.False(t, take("P", "a", 1))
			}
			require.True(t, take("SLOW", "x", 1))
			require.False(t, take("SLOW", "x", 1))
			require.False(t, take("SLOW", "x", 1))

			rows := func(doc *goquery.Document) map[string][]string {
				out := map[string][]string{}
				doc.Find("table.overview tbody tr, table.overview tfoot tr").Each(func(_ int, tr *goquery.Selection) {
					name := strings.TrimSpace(tr.Find("td.policy, th").First().Text())
					var cells []string
					tr.Find("td.num").Each(func(_ int, td *goquery.Selection) { cells = append(cells, strings.TrimSpace(td.Text())) })
					out[name] = cells
				})
				return out
			}
			doc := document(t, e.get("/admin/overview?window=15m", asAdmin))
			require.Equal(t, map[string][]string{
				// admitted, refused, share, empty, cooldown, blocked; shares
				// are rounded to the nearest tenth: 3 of 13 is 23.1 %, 2 of
				// 3 is 66.7 %, 5 of 16 (31.25 %) is 31.3 %.
				"P":            {"10", "3", "23.1 %", "3", "0", "0"},
				"SLOW":         {"1", "2", "66.7 %", "0", "2", "0"},
				"All policies": {"11", "5", "31.3 %", "3", "2", "0"},
			}, rows(doc))
			require.Equal(t, "P", strings.TrimSpace(doc.Find("table.overview tbody tr").First().Find("td.policy").Text()), "the most refused first")
			require.True(t, doc.Find("table.overview tbody tr").First().Find("td.share").HasClass("sev-high"))
			href, _ := doc.Find(`table.overview td.policy a`).First().Attr("href")
			require.Contains(t, href, "policy=P")

			hour := rows(document(t, e.get("/admin/overview?window=hour", asAdmin)))
			require.Equal(t, "2", hour["SLOW"][0], "the hour has the older take too")

			// In Portuguese, a decimal comma; the overview updates in place.
			pt := withHeader("Accept-Language", "pt-BR")
			doc = document(t, e.get("/admin/overview?window=15m", asAdmin, pt))
			require.Equal(t, "23,1 %", strings.TrimSpace(doc.Find("table.overview tbody tr").First().Find("td.share").Text()))
			liveURL, _ := doc.Find("main").Attr("data-live-url")
			require.False(t, take("P", "a", 1))
			f := liveFragments(t, e, liveURL, pt)
			require.Equal(t, "4", strings.TrimSpace(f["live-overview"].Find("table.overview tbody tr").First().Find("td.refused").Text()))

			require.Equal(t, http.StatusBadRequest, e.get("/admin/overview?window=month", asAdmin).StatusCode)
		})
	}
}

// What was seen: "25000" and "39.3 %" on pt-BR and es-PY pages, and times
// in UTC only. Numbers carry the language's separators, and times are in
// the configured zone, which the page names; UTC only when configured.
func TestNumbersAndTimesInTheOperatorsLanguageAndZone(t *testing.T) {
	ctx := context.Background()
	asu, err := time.LoadLocation("America/Asuncion")
	require.NoError(t, err)
	for _, tc := range []struct {
		accept           string
		zone             *time.Location
		tokens, zoneName string
		at               string
	}{
		{"pt-BR", asu, "24.000", "America/Asuncion (-03)", "-03"},
		{"es-PY", asu, "24.000", "America/Asuncion (-03)", "-03"},
		{"en", asu, "24,000", "America/Asuncion (-03)", "-03"},
		{"pt-BR", time.UTC, "24.000", "UTC", "UTC"},
	} {
		t.Run(tc.accept+"/"+tc.zone.String(), func(t *testing.T) {
			e := newEnv(t, withServer(func(s *web.Server) { s.TimeZone = tc.zone }))
			_, err := e.limiter.Take(ctx, "t", throttle.Charge{Key: throttle.Key{Policy: "BIG", Env: "prod", Identifier: "n"}, Cost: 1000})
			require.NoError(t, err)
			lang := withHeader("Accept-Language", tc.accept)
			doc := document(t, e.get("/admin/buckets", asAdmin, lang))
			r := row(t, doc, "n")
			require.Equal(t, tc.tokens, strings.TrimSpace(r[doc.Find("table.buckets thead th.num").First().Text()].Text()))
			require.Contains(t, doc.Find("footer").Text(), tc.zoneName)
			require.Regexp(t, `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `+tc.at+`\.`, doc.Find(".summary p.note").Last().Text())

			doc = document(t, e.get("/admin/buckets/BIG/prod/n", asAdmin, lang))
			require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `+tc.at+`$`, strings.TrimSpace(doc.Find("table.ledger tbody tr td").First().Text()))
			require.Contains(t, doc.Find("section.state").Text(), tc.tokens)
		})
	}
}
