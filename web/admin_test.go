package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
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

// row returns the cells of the bucket list row whose identifier is id,
// keyed by column header.
func row(t *testing.T, doc *goquery.Document, id string) map[string]*goquery.Selection {
	t.Helper()
	var headers []string
	doc.Find("table.buckets thead th").Each(func(_ int, s *goquery.Selection) { headers = append(headers, s.Text()) })
	out := map[string]*goquery.Selection{}
	doc.Find("table.buckets tbody tr").Each(func(_ int, tr *goquery.Selection) {
		if strings.TrimSpace(tr.Find("td.id").Text()) != id {
			return
		}
		tr.Find("td").Each(func(i int, td *goquery.Selection) { out[headers[i]] = td })
	})
	require.NotEmpty(t, out, "no row for %q", id)
	return out
}

func TestAdminBucketsShowsState(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// "neg": 10 taken, then a penalty of 5: -5 tokens, Critical.
	e.take(key("P", "neg"), 10)
	_, err := e.limiter.Adjust(ctx, throttle.Adjustment{Key: key("P", "neg"), Delta: -5, Reason: throttle.LedgerPenalty})
	require.NoError(t, err)
	// "half": 4 of 10 left is Medium (below 50 %, not below 25 %).
	e.take(key("P", "half"), 6)
	// "slow": in its 10 s cooldown.
	e.take(key("SLOW", "ruc-1"), 1)
	e.clock.Advance(3 * time.Second)

	resp := e.get("/admin/buckets", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	doc := document(t, resp)

	neg := row(t, doc, "neg")
	require.Equal(t, "P", neg["Policy"].Text())
	require.Equal(t, "prod", neg["Env"].Text())
	require.Equal(t, "-5", strings.TrimSpace(neg["Tokens"].Text()), "3 s of refill is not a whole token yet (one per 6 s)")
	require.Equal(t, 1, neg["Tokens"].Find(".negative").Length())
	require.Equal(t, "10", neg["Capacity"].Text())
	require.Equal(t, "10/min", neg["Refill"].Text())
	require.Equal(t, "Critical", neg["Severity"].Find(".badge").Text())
	require.Equal(t, "negative", neg["Severity"].Find(".cond").Text())
	bar, _ := neg["Fill"].Find("rect.fill-bar").Attr("width")
	require.Equal(t, "0", bar)
	require.Equal(t, "1", neg["Sends"].Text())
	require.Equal(t, "3s ago", neg["Last send"].Text())
	at, _ := neg["Last send"].Attr("title")
	require.Contains(t, at, "2026-01-02 03:04:05 UTC")

	half := row(t, doc, "half")
	require.Equal(t, "4", strings.TrimSpace(half["Tokens"].Text()))
	require.Equal(t, "Medium", half["Severity"].Find(".badge").Text())
	bar, _ = half["Fill"].Find("rect.fill-bar").Attr("width")
	require.Equal(t, "40", bar)

	slow := row(t, doc, "ruc-1")
	require.Equal(t, "cooldown 7s", slow["Cooldown / block"].Text())
	link, _ := slow["Identifier"].Find("a").Attr("href")
	require.Equal(t, "/admin/buckets/SLOW/prod/ruc-1", link)

	// The summary counts stored buckets by stored severity.
	cards := map[string]string{}
	doc.Find(".summary .card").Each(func(_ int, s *goquery.Selection) {
		cards[s.Find(".label").Text()] = s.Find(".num").Text()
	})
	require.Equal(t, "1", cards["Critical"])
	require.Equal(t, "3", cards["stored buckets"])
	require.Equal(t, "0", cards["refusals in the last hour"])
}

func TestAdminBucketsSummaryCountsRefusalsOfTheLastHour(t *testing.T) {
	e := newEnv(t)
	k := key("SLOW", "ruc-1")
	e.take(k, 1)
	require.False(t, e.take(k, 1).Allowed) // cooldown
	e.clock.Advance(61 * time.Minute)
	e.take(k, 1)
	require.False(t, e.take(k, 1).Allowed)
	require.False(t, e.take(k, 1).Allowed)

	doc := document(t, e.get("/admin/buckets", asAdmin))
	var refusals string
	doc.Find(".summary .card").Each(func(_ int, s *goquery.Selection) {
		if s.Find(".label").Text() == "refusals in the last hour" {
			refusals = s.Find(".num").Text()
		}
	})
	require.Equal(t, "2", refusals, "the refusal of more than an hour ago is not counted")
}

func TestAdminSummaryPanels(t *testing.T) {
	e := newEnv(t, withServer(func(s *web.Server) {
		s.Panels = []web.PanelFunc{func(context.Context) (web.Panel, error) {
			return web.Panel{Title: "DICT participant", Rows: []web.PanelRow{
				{Label: "Category", Value: "A"},
				{Label: "404 share", Value: "<b>9 %</b>", Class: "sev-high"},
			}, Note: "suspicious above 7 %"}, nil
		}}
	}))
	resp := e.get("/admin/buckets", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc := document(t, resp)
	panel := doc.Find(".summary .panel")
	require.Equal(t, "DICT participant", panel.Find("h2").Text())
	require.Equal(t, "<b>9 %</b>", panel.Find("td.sev-high").Text(), "panel values are text, escaped")
	require.Equal(t, 0, panel.Find("b").Length())
}

// summaryTotal is the "stored buckets" card of the admin summary.
func summaryTotal(t *testing.T, e *env) string {
	t.Helper()
	doc := document(t, e.get("/admin/buckets", asAdmin))
	var n string
	doc.Find(".summary .card").Each(func(_ int, s *goquery.Selection) {
		if s.Find(".label").Text() == "stored buckets" {
			n = s.Find(".num").Text()
		}
	})
	return n
}

func TestAdminSummaryIsFreshWhileCheap(t *testing.T) {
	e := newEnv(t, withServer(func(s *web.Server) { s.SummaryTTL, s.SummaryFresh = time.Minute, time.Hour }))
	total := func() string { return summaryTotal(t, e) }
	require.Equal(t, "0", total())
	e.take(key("P", "a"), 1)
	require.Equal(t, "1", total(), "a summary cheaper than SummaryFresh is computed for every request")
}

func TestAdminSummaryIsCached(t *testing.T) {
	// SummaryFresh < 0: as on a large table, the cache is always used.
	e := newEnv(t, withServer(func(s *web.Server) { s.SummaryTTL, s.SummaryFresh = time.Minute, -1 }))
	total := func() string { return summaryTotal(t, e) }
	// Open warmed the cache in the background; wait until a page shows it.
	require.Eventually(t, func() bool { return total() == "0" }, 5*time.Second, time.Millisecond)
	e.take(key("P", "a"), 1)
	require.Equal(t, "0", total(), "within the TTL the cached summary is shown")
	e.clock.Advance(time.Minute)
	require.Eventually(t, func() bool { return total() == "1" }, 5*time.Second, time.Millisecond,
		"past the TTL a request triggers a background refresh")
}

// What was seen: once counting took 50 ms or more, the first view after
// 45 s idle showed the last summary, "0 Critical" while the API had 1.
// Past its time-to-live a summary is recounted and the page waits for the
// count (bounded); a count that does not end in time leaves the old
// summary on the page marked stale with its age, never unmarked.
func TestAdminSummaryIsNeverStaleUnmarked(t *testing.T) {
	// hold, when set, keeps a count waiting until it is closed.
	var hold atomic.Pointer[chan struct{}]
	slowCount := func(ctx context.Context) (web.Panel, error) {
		if ch := hold.Load(); ch != nil {
			select {
			case <-*ch:
			case <-ctx.Done():
				return web.Panel{}, ctx.Err()
			}
		}
		return web.Panel{Title: "count"}, nil
	}
	// SummaryFresh < 0: counting is slow, as on a large table.
	e := newEnv(t, withServer(func(s *web.Server) {
		s.SummaryTTL, s.SummaryFresh = 15*time.Second, -1
		s.Panels = []web.PanelFunc{slowCount}
		s.SetSummaryWait(10 * time.Second)
	}))
	type view struct{ critical, stale string }
	look := func() view {
		t.Helper()
		doc := document(t, e.get("/admin/buckets", asAdmin))
		v := view{stale: strings.TrimSpace(doc.Find(".summary .stale-note").Text())}
		doc.Find(".summary .card").Each(func(_ int, c *goquery.Selection) {
			if c.Find(".label").Text() == "Critical" {
				v.critical = c.Find(".num").Text()
			}
		})
		require.Equal(t, v.stale != "", doc.Find(".summary.stale").Length() == 1, "the note and the greyed cards go together")
		return v
	}
	require.Equal(t, view{critical: "0"}, look())

	// A bucket 100 tokens below zero after a penalty: Critical for
	// minutes (P refills 10 a minute).
	penalize := func(id string) {
		t.Helper()
		_, err := e.limiter.Adjust(context.Background(), throttle.Adjustment{Key: key("P", id), Delta: -110, Reason: throttle.LedgerPenalty})
		require.NoError(t, err)
	}
	penalize("drained")
	e.clock.Advance(5 * time.Second)
	require.Equal(t, view{critical: "0"}, look(), "within its 15 s the cached summary is shown")

	e.clock.Advance(40 * time.Second) // 45 s idle
	require.Equal(t, view{critical: "1"}, look(), "past its TTL the page waits for the recount")

	// A recount that does not end within the wait: the old summary, marked.
	release := make(chan struct{})
	hold.Store(&release)
	penalize("drained-2")
	e.clock.Advance(45 * time.Second)
	e.server.SetSummaryWait(20 * time.Millisecond)
	require.Equal(t, view{critical: "1", stale: "Stale: counted 45s ago. A new count is under way; it shows here when done."}, look())
	e.clock.Advance(30 * time.Second)
	require.Equal(t, view{critical: "1", stale: "Stale: counted 1m15s ago. A new count is under way; it shows here when done."}, look(),
		"the age follows the clock; one recount runs")
	es := document(t, e.get("/admin/buckets", asAdmin, withHeader("Accept-Language", "es-PY"))).Find(".stale-note").Text()
	require.Equal(t, "Desactualizado: contado hace 1m15s. Hay un nuevo conteo en curso; aparece aquí cuando termine.", es)

	// The count ends: the next page has it, unmarked.
	hold.Store(nil)
	close(release)
	e.server.SetSummaryWait(10 * time.Second)
	require.Equal(t, view{critical: "2"}, look())
}

func TestAdminBucketsFilter(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"alpha-1", "alpha-2", "beta-1"} {
		e.take(key("P", id), 1)
	}
	e.take(throttle.Key{Policy: "P", Env: "test", Identifier: "alpha-3"}, 1)
	e.take(key("SLOW", "alpha-4"), 1)

	ids := func(query string) []string {
		resp := e.get("/admin/buckets?"+query, asAdmin)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out []string
		document(t, resp).Find("table.buckets td.id").Each(func(_ int, s *goquery.Selection) { out = append(out, s.Text()) })
		return out
	}
	require.Equal(t, []string{"alpha-1", "alpha-2", "beta-1"}, ids("policy=P&env=prod"))
	require.Equal(t, []string{"alpha-3"}, ids("env=test"))
	require.Equal(t, []string{"alpha-1", "alpha-2", "alpha-3"}, ids("policy=P&identifier=alpha"))
	require.Equal(t, []string{"alpha-4"}, ids("policy=SLOW"))
	require.Empty(t, ids("policy=UNKNOWN"))

	// The filter form shows the current filter back, escaped.
	doc := document(t, e.get("/admin/buckets?identifier=%22%3E%3Cscript%3E", asAdmin))
	v, _ := doc.Find(`input[name=identifier]`).Attr("value")
	require.Equal(t, `"><script>`, v)
	require.Equal(t, 0, doc.Find("main script").Length())
}

func TestAdminBucketsBadQuery(t *testing.T) {
	e := newEnv(t)
	for name, q := range map[string]string{
		"LimitNotANumber": "limit=many",
		"LimitTooBig":     "limit=5000",
		"LimitZero":       "limit=0",
		"CursorGarbage":   "after=!!!",
	} {
		t.Run(name, func(t *testing.T) {
			resp := e.get("/admin/buckets?"+q, asAdmin)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		})
	}
}

func TestAdminPagination(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, withStore(engine))
		var want []string
		for i := range 7 {
			id := fmt.Sprintf("id-%02d", i)
			want = append(want, id)
			e.take(key("P", id), 1)
		}
		e.take(key("SLOW", "other"), 1) // filtered out

		var got []string
		next := "/admin/buckets?policy=P&limit=3"
		pages := 0
		for next != "" {
			pages++
			require.LessOrEqual(t, pages, 3)
			resp := e.get(next, asAdmin)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			doc := document(t, resp)
			doc.Find("table.buckets td.id").Each(func(_ int, s *goquery.Selection) { got = append(got, s.Text()) })
			next, _ = doc.Find(`.pager a[rel=next]`).Attr("href")
			if pages > 1 {
				first, ok := doc.Find(`.pager a`).First().Attr("href")
				require.True(t, ok)
				require.Equal(t, "/admin/buckets?limit=3&policy=P", first)
			}
		}
		require.Equal(t, 3, pages)
		require.Equal(t, want, got, "every bucket once, in key order")
	})
}

func TestAdminHostileIdentifierIsEscaped(t *testing.T) {
	e := newEnv(t)
	hostile := `<script>alert("x")</script>/../"'&`
	k := key("P", hostile)
	e.take(k, 3)

	resp := e.get("/admin/buckets", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	html := body(t, resp)
	require.NotContains(t, html, "<script>")
	require.Contains(t, html, "&lt;script&gt;")

	doc := document(t, e.get("/admin/buckets", asAdmin))
	link, ok := doc.Find("table.buckets td.id a").Attr("href")
	require.True(t, ok)
	require.Equal(t, "/admin/buckets/P/prod/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E%2F..%2F%22%27&", link)

	// The link leads to the bucket, through the escaped path.
	detail := e.get(link, asAdmin)
	require.Equal(t, http.StatusOK, detail.StatusCode)
	dhtml := body(t, detail)
	require.NotContains(t, dhtml, "<script>")
	require.Contains(t, dhtml, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")

	// And the reset, on the same escaped path, reaches the same bucket.
	resetResp := e.post(link+"/reset", url.Values{"confirm": {"yes"}}, asAdmin)
	require.Equal(t, http.StatusSeeOther, resetResp.StatusCode)
	st, err := e.limiter.State(t.Context(), k)
	require.NoError(t, err)
	require.Equal(t, int64(10), st.Tokens)
}

func TestAdminBucketDetail(t *testing.T) {
	e := newEnv(t)
	k := key("P", "payer-1")
	e.take(k, 4)
	e.clock.Advance(30 * time.Second)
	e.take(k, 6)
	e.clock.Advance(time.Second)
	require.False(t, e.take(k, 5).Allowed)

	resp := e.get("/admin/buckets/P/prod/payer-1", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc := document(t, resp)

	// Ledger, newest first: refused, take 6, take 4.
	var reasons, deltas []string
	doc.Find("table.ledger tbody tr").Each(func(_ int, tr *goquery.Selection) {
		reasons = append(reasons, tr.Find("td").Eq(1).Text())
		deltas = append(deltas, tr.Find("td").Eq(2).Text())
	})
	require.Equal(t, []string{"refused-empty", "take", "take"}, reasons)
	require.Equal(t, []string{"+0", "-6", "-4"}, deltas)
	require.Equal(t, 1, doc.Find("table.ledger tr.ledger-refusal").Length())

	// The chart spans the last hour up to now (the refusal's instant):
	// 10→6 at 0 s, refilled (continuous, 10/min) to the capacity at 24 s,
	// 10→4 at 30 s, then 4 until now. One dot per take; the refusal is a
	// red mark under the plot.
	points, ok := doc.Find("svg.chart polyline.chart-line").Attr("points")
	require.True(t, ok)
	require.Equal(t, "704.4,10.0 704.4,82.0 708.7,10.0 709.8,10.0 709.8,118.0 710.0,118.0", points)
	require.Equal(t, 2, doc.Find("svg.chart circle").Length())
	require.Equal(t, "2026-01-02 03:04:35 UTC: take -6 → 4", doc.Find("svg.chart circle title").Eq(1).Text())
	require.Equal(t, "2026-01-02 03:04:36 UTC: 1 refused", doc.Find("svg.chart rect.chart-refusal title").Text())
	day, _ := doc.Find(`nav.tabs a:contains("last day")`).Attr("href")
	require.Equal(t, "/admin/buckets/P/prod/payer-1?window=day", day)

	reset, _ := doc.Find("a.button.danger").Attr("href")
	require.Equal(t, "/admin/buckets/P/prod/payer-1/reset", reset)
}

func TestAdminBucketDetailErrors(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		path   string
		status int
	}{
		{"UnknownPolicy", "/admin/buckets/NOPE/prod/x", http.StatusNotFound},
		{"IdentifierTooLong", "/admin/buckets/P/prod/" + strings.Repeat("x", 200), http.StatusBadRequest},
		{"ControlCharacter", "/admin/buckets/P/prod/a%0Ab", http.StatusBadRequest},
		{"BadBefore", "/admin/buckets/P/prod/x?before=-1", http.StatusBadRequest},
		{"NoRowIsFull", "/admin/buckets/P/prod/never-seen", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.get(tt.path, asAdmin)
			require.Equal(t, tt.status, resp.StatusCode)
		})
	}
	doc := document(t, e.get("/admin/buckets/P/prod/never-seen", asAdmin))
	require.Contains(t, doc.Find("section.state").Text(), "no row: the bucket is full")
}

func TestAdminLedgerPagination(t *testing.T) {
	e := newEnv(t)
	k := key("SLOW", "busy")
	for range 130 {
		e.take(k, 1)
		e.clock.Advance(10 * time.Second)
	}
	doc := document(t, e.get("/admin/buckets/SLOW/prod/busy", asAdmin))
	require.Equal(t, 100, doc.Find("table.ledger tbody tr").Length())
	older, ok := doc.Find(`.pager a[rel=next]`).Attr("href")
	require.True(t, ok)
	doc = document(t, e.get(older, asAdmin))
	require.Equal(t, 30, doc.Find("table.ledger tbody tr").Length())
	require.Equal(t, 0, doc.Find(`.pager a[rel=next]`).Length())
	newest, _ := doc.Find(`.pager a`).First().Attr("href")
	require.Equal(t, "/admin/buckets/SLOW/prod/busy", newest)
}

func TestAdminResetFlow(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, withStore(engine))
		k := key("SLOW", "ruc-9")
		e.take(k, 60)
		require.False(t, e.take(k, 1).Allowed, "in cooldown")

		// The confirmation step: a page with a form posting confirm=yes.
		resp := e.get("/admin/buckets/SLOW/prod/ruc-9/reset", asAdmin)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		doc := document(t, resp)
		form := doc.Find("main form")
		action, _ := form.Attr("action")
		method, _ := form.Attr("method")
		require.Equal(t, "/admin/buckets/SLOW/prod/ruc-9/reset", action)
		require.Equal(t, "post", method)
		confirm, _ := form.Find(`input[name=confirm]`).Attr("value")
		require.Equal(t, "yes", confirm)
		require.Contains(t, doc.Find("main").Text(), adminUser)

		// Posting without the confirmation does nothing.
		resp = e.post(action, url.Values{}, asAdmin)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		st, err := e.limiter.State(t.Context(), k)
		require.NoError(t, err)
		require.Equal(t, int64(40), st.Tokens)

		resp = e.post(action, url.Values{"confirm": {"yes"}}, asAdmin)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/admin/buckets/SLOW/prod/ruc-9?reset=1", resp.Header.Get("Location"))

		st, err = e.limiter.State(t.Context(), k)
		require.NoError(t, err)
		require.Equal(t, int64(100), st.Tokens)
		require.Zero(t, st.CooldownLeft)
		require.True(t, e.take(k, 1).Allowed, "the cooldown is cleared")

		entries, err := e.reader.Ledger(t.Context(), inspect.LedgerQuery{Key: &k, Reasons: []throttle.LedgerReason{throttle.LedgerReset}})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, adminUser, entries[0].Ref, "the ledger names the admin")
		require.Equal(t, int64(60), entries[0].Delta)

		doc = document(t, e.get(resp.Header.Get("Location"), asAdmin))
		require.Contains(t, doc.Find(".flash").Text(), "reset")
	})
}

func TestAdminResetUnknownPolicy(t *testing.T) {
	e := newEnv(t)
	resp := e.post("/admin/buckets/NOPE/prod/x/reset", url.Values{"confirm": {"yes"}}, asAdmin)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestAdminStoreDown(t *testing.T) {
	e := newEnv(t, withFailingStore())
	for _, path := range []string{"/admin/buckets", "/admin/buckets/P/prod/x", "/api/buckets"} {
		resp := e.get(path, asAdmin)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
		require.Equal(t, "5", resp.Header.Get("Retry-After"), path)
	}
}

// What was seen: the chart read at most 20,000 raw ledger rows, so a busy
// bucket's "last hour" showed its last minutes. 25,000 requests in the hour
// (one every 144 ms, most of them refused): the chart spans the whole hour
// from its first refusals, counts them all, and the page reads one page of
// the ledger table and at most one row per chart slot.
func TestAdminBucketChartOfABusyHourReadsSlots(t *testing.T) {
	var ledgerRows, windowCalls, slots int
	e := newEnv(t, func(e *env) {
		e.store = &throttletest.Store{
			Base: throttletest.NewMemStore(e.clock.Now),
			LedgerFn: func(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error) {
				es, err := e.store.(*throttletest.Store).Base.Ledger(ctx, q)
				ledgerRows += len(es)
				return es, err
			},
			LedgerWindowFn: func(ctx context.Context, q inspect.LedgerWindowQuery) (inspect.LedgerWindow, error) {
				w, err := e.store.(*throttletest.Store).Base.LedgerWindow(ctx, q)
				windowCalls, slots = windowCalls+1, slots+len(w.Slots)
				return w, err
			},
		}
	})
	k := key("P", "busy")
	start := e.clock.Now()
	var refused int64
	for i := range 25_000 {
		e.clock.Set(start.Add(time.Duration(i) * 144 * time.Millisecond))
		if !e.take(k, 1).Allowed {
			refused++
		}
	}
	e.clock.Set(start.Add(time.Hour))
	inLedger, err := e.reader.CountLedger(t.Context(), inspect.LedgerQuery{Key: &k, Reasons: throttle.RefusalReasons})
	require.NoError(t, err)
	ledgerRows = 0

	resp := e.get("/admin/buckets/P/prod/busy?window=hour", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc := document(t, resp)
	require.Equal(t, 100, ledgerRows, "one page of the ledger table")
	require.Equal(t, 1, windowCalls)
	require.LessOrEqual(t, slots, 360, "at most one row per slot")

	var marked int64
	var firstX float64 = -1
	doc.Find("svg.chart rect.chart-refusal").Each(func(_ int, s *goquery.Selection) {
		var n int64
		_, err := fmt.Sscanf(s.Find("title").Text()[len("2026-01-02 03:04:05 UTC: "):], "%d refused", &n)
		require.NoError(t, err)
		marked += n
		if firstX < 0 {
			x, _ := s.Attr("x")
			_, err := fmt.Sscan(x, &firstX)
			require.NoError(t, err)
		}
	})
	require.Greater(t, refused, int64(20_000))
	require.Greater(t, inLedger, int64(20_000))
	require.Equal(t, inLedger, marked, "every refusal of the hour in the ledger is marked")
	require.Less(t, firstX, 58.0, "the first refusals are at the window's start (x=56)")
	require.NotContains(t, doc.Find(".chart-legend").Text(), "only the newest")
}
