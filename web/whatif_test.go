package web_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// The what-if page: a viewer asks how a payer's scan of keys with no entry
// would have gone with a bucket of 60 instead of 100, and reads it per
// hour, with the words on the lookup the mirror refused then.
func TestWhatifPage(t *testing.T) {
	e := newEnv(t, withViewer(t), withDict(), withServer(func(s *web.Server) {
		s.TimeZone = time.UTC
		s.Policies = append(s.Policies, dict.PolicyEntriesReadUserAntiscanV2)
	}))
	for i := range 6 { // 5 × 404 (20 tokens each), then the sixth refused
		want := http.StatusNotFound
		if i == 5 {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, e.lookup(keyMissing, payerPF).StatusCode)
	}
	q := url.Values{"policy": {dict.PolicyEntriesReadUserAntiscanV2}, "from": {"2026-01-02T03:00"}, "to": {"2026-01-02T04:00"}, "capacity": {"60"}}
	resp := e.get("/admin/whatif?"+q.Encode(), asViewer)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc := document(t, resp)
	require.Equal(t, 1, doc.Find(`nav a[href="/admin/whatif"]`).Length())
	require.Equal(t, "ENTRIES_READ_USER_ANTISCAN_V2: 2/min (capacity 60, stepwise)", doc.Find("h2.policy").First().Text())
	require.Contains(t, doc.Find("p.note").Text(), "recorded under ENTRIES_READ_USER_ANTISCAN_V2: 2/min (capacity 100, stepwise)")
	rows := doc.Find("table.whatif").First().Find("tbody tr")
	require.Equal(t, 2, rows.Length(), "the period and its one hour")
	cells := rows.First().Find("th, td").Map(func(_ int, c *goquery.Selection) string { return c.Text() })
	require.Equal(t, []string{"period", "6", "1", "3", "2", "0", "1m0s", "2026-01-02 03:04:05 UTC"}, cells,
		"6 lookups: 1 refused then, 3 now (2 of them admitted then), told to wait a minute at most, the first at once")
	require.Contains(t, doc.Find("ul.notes").Text(), "Requests refused in the recorded run: 1. Their outcome was never observed")

	// The ledger folds this engine's takes per minute: the page says it
	// cannot replay them.
	folded := newEnv(t, func(e *env) { e.ledger = throttle.LedgerAggregateTakes })
	folded.take(key("P", "x"), 1)
	resp = folded.get("/admin/whatif?policy=P", asAdmin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, document(t, resp).Find(".banner-text").Text(), "P: the ledger does not hold its takes one by one")
}
