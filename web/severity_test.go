package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"
)

// cards returns the summary cards, label → number, and label → link.
func cards(doc *goquery.Document) (nums, links map[string]string) {
	nums, links = map[string]string{}, map[string]string{}
	doc.Find(".summary .card").Each(func(_ int, s *goquery.Selection) {
		label := strings.TrimSpace(s.Find(".label").Text())
		nums[label] = strings.TrimSpace(s.Find(".num").Text())
		if href, ok := s.Find("a").Attr("href"); ok {
			links[label] = href
		} else if href, ok := s.Attr("href"); ok {
			links[label] = href
		}
	})
	return nums, links
}

// What was seen: cards "Critical 1" while every row showed Healthy.
func TestAdminSummaryCountsTheSeverityNow(t *testing.T) {
	e := newEnv(t)
	e.take(key("P", "a"), 10) // empty: Critical when written
	e.clock.Advance(2 * time.Minute)

	doc := document(t, e.get("/admin/buckets", asAdmin))
	nums, _ := cards(doc)
	require.Equal(t, "0", nums["Critical"])
	require.Equal(t, "1", nums["Healthy"])
	require.Equal(t, "Healthy", strings.TrimSpace(row(t, doc, "a")["Severity"].Text()))
}

// What was seen: no filter by severity; the cards were not links.
func TestAdminCardsLinkToTheFilteredList(t *testing.T) {
	e := newEnv(t)
	e.take(key("P", "crit"), 10)
	e.take(key("P", "half"), 6)
	e.take(key("SLOW", "ruc-1"), 1)

	doc := document(t, e.get("/admin/buckets", asAdmin))
	nums, links := cards(doc)
	require.Equal(t, "1", nums["Critical"])
	require.Contains(t, links["Critical"], "severity=critical")

	doc = document(t, e.get(links["Critical"], asAdmin))
	var ids []string
	doc.Find("table.buckets tbody td.id").Each(func(_ int, s *goquery.Selection) { ids = append(ids, strings.TrimSpace(s.Text())) })
	require.Equal(t, []string{"crit"}, ids)

	doc = document(t, e.get("/admin/buckets?state=cooling", asAdmin))
	ids = nil
	doc.Find("table.buckets tbody td.id").Each(func(_ int, s *goquery.Selection) { ids = append(ids, strings.TrimSpace(s.Text())) })
	require.Equal(t, []string{"ruc-1"}, ids)

	doc = document(t, e.get("/admin/buckets?sort=severity", asAdmin))
	ids = nil
	doc.Find("table.buckets tbody td.id").Each(func(_ int, s *goquery.Selection) { ids = append(ids, strings.TrimSpace(s.Text())) })
	require.Equal(t, []string{"crit", "half", "ruc-1"}, ids)
}

// What was seen: only "Next page »".
func TestAdminBucketsPreviousAndFirstPage(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"a", "b", "c"} {
		e.take(key("P", id), 1)
	}
	ids := func(doc *goquery.Document) []string {
		var out []string
		doc.Find("table.buckets tbody td.id").Each(func(_ int, s *goquery.Selection) { out = append(out, strings.TrimSpace(s.Text())) })
		return out
	}
	link := func(doc *goquery.Document, rel string) string {
		href, _ := doc.Find(`.pager a[rel="` + rel + `"]`).Attr("href")
		return href
	}
	doc := document(t, e.get("/admin/buckets?limit=1", asAdmin))
	require.Equal(t, []string{"a"}, ids(doc))
	require.Empty(t, link(doc, "prev"))
	doc = document(t, e.get(link(doc, "next"), asAdmin))
	require.Equal(t, []string{"b"}, ids(doc))
	doc = document(t, e.get(link(doc, "next"), asAdmin))
	require.Equal(t, []string{"c"}, ids(doc))
	require.Empty(t, link(doc, "next"))
	prev := document(t, e.get(link(doc, "prev"), asAdmin))
	require.Equal(t, []string{"b"}, ids(prev))
	first := document(t, e.get(link(doc, "first"), asAdmin))
	require.Equal(t, []string{"a"}, ids(first))
}

// What was seen: /metrics counted changes but had no gauge of fill.
func TestMetricsGaugesOfFillAndSeverity(t *testing.T) {
	e := newEnv(t)
	e.take(key("P", "a"), 10)
	e.take(key("P", "b"), 1)
	resp := e.get("/metrics")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text := body(t, resp)
	require.Contains(t, text, `balde_buckets{scope="other",severity="Critical"} 1`)
	require.Contains(t, text, `balde_buckets{scope="",severity="Healthy"} 1`)
	require.Contains(t, text, `balde_bucket_worst_fill_ratio{policy="P",scope="other"} 0`)
	require.Contains(t, text, `balde_bucket_worst_tokens{policy="P",scope="other"} 0`)
	require.Contains(t, text, `balde_buckets_blocked{scope="other"} 0`)

	e.clock.Advance(2 * time.Minute)
	text = body(t, e.get("/metrics"))
	require.Contains(t, text, `balde_buckets{scope="other",severity="Critical"} 0`)
	require.Contains(t, text, `balde_buckets{scope="",severity="Healthy"} 2`)
}
