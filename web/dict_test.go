package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// Keys and payers of dict/testdata/entries.csv.
const (
	keyFound    = "11144477735" // a CPF key of João Silva
	keyMissing  = "39053344705" // a valid CPF with no entry
	payerPF     = "52998224725" // Maria Souza's CPF
	payerPJ     = "11222333000181"
	keyEmail    = "maria.souza@example.com"
	capacityPF  = 100
	capacityPSP = 50000 // category A
)

func (e *env) lookup(key, payer string, opts ...reqOpt) *http.Response {
	e.t.Helper()
	return e.post("/dict/lookup", url.Values{"key": {key}, "payer_id": {payer}}, append([]reqOpt{asAdmin}, opts...)...)
}

func (e *env) pay(e2e string, opts ...reqOpt) *http.Response {
	e.t.Helper()
	return e.post("/dict/payments", url.Values{"end_to_end_id": {e2e}}, append([]reqOpt{asAdmin}, opts...)...)
}

func (e *env) tokens(policy, identifier string) int64 {
	e.t.Helper()
	st, err := e.limiter.State(context.Background(), e.catalog.Key(policy, identifier))
	require.NoError(e.t, err)
	return st.Tokens
}

// lookupBuckets returns the page's bucket table as identifier → tokens.
func lookupBuckets(doc *goquery.Document) map[string]string {
	out := map[string]string{}
	doc.Find("table.buckets tbody tr").Each(func(_ int, tr *goquery.Selection) {
		out[strings.TrimSpace(tr.Find("td.id").Text())] = strings.TrimSpace(tr.Find("td.num").First().Text())
	})
	return out
}

func TestDictLookupFound(t *testing.T) {
	e := newEnv(t, withDict())
	resp := e.get("/dict/lookup", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	form := document(t, resp)
	require.Equal(t, 1, form.Find(`form[action="/dict/lookup"][method="post"] input[name="payer_id"]`).Length())
	require.Contains(t, form.Find("p.note").First().Text(), "category A")

	resp = e.lookup(keyFound, payerPF)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := document(t, resp)
	entry := page.Find("section.state dl").Text()
	require.Contains(t, entry, "João Silva")
	require.Contains(t, entry, "0007654321 (CACC)")
	e2e, ok := page.Find(`form[action="/dict/payments"] input[name="end_to_end_id"]`).Attr("value")
	require.True(t, ok, "a payment button")
	require.NoError(t, dict.ValidateEndToEndID(e2e))

	// 200 costs 1 to the payer (CPF key: the V2 policy) and 1 to the participant.
	require.Equal(t, int64(capacityPF-1), e.tokens(dict.PolicyEntriesReadUserAntiscanV2, payerPF))
	require.Equal(t, int64(capacityPSP-1), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, participant))
	require.Equal(t, map[string]string{payerPF: "99", participant: "49,999"}, lookupBuckets(page))
	require.Equal(t, int64(1), e.dictStats(t).Count(dict.OpGetEntry, http.StatusOK))
}

func TestDictLookupNotFound(t *testing.T) {
	e := newEnv(t, withDict())
	resp := e.lookup(keyMissing, payerPF)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	page := document(t, resp)
	require.Equal(t, "No entry for this key at the DICT (404).", page.Find(".banner-text").Text())
	require.Zero(t, page.Find(`form[action="/dict/payments"]`).Length(), "nothing to pay")
	// A 404 costs 20 to the payer and 3 to the participant (seed 001).
	require.Equal(t, map[string]string{payerPF: "80", participant: "49,997"}, lookupBuckets(page))
	require.Equal(t, int64(1), e.dictStats(t).Count(dict.OpGetEntry, http.StatusNotFound))
}

func TestDictLookupRefusedLocally(t *testing.T) {
	e := newEnv(t, withDict())
	payerKey := e.catalog.Key(dict.PolicyEntriesReadUserAntiscanV2, payerPF)
	require.True(t, e.take(payerKey, capacityPF).Allowed)
	e.clock.Advance(10 * time.Second)
	st, err := e.limiter.State(context.Background(), payerKey)
	require.NoError(t, err)
	require.Positive(t, st.RetryAfter)

	resp := e.lookup(keyFound, payerPF)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, secondsHeader(st.RetryAfter), resp.Header.Get("Retry-After"))
	page := document(t, resp)
	text := page.Find(".banner-text").Text()
	require.Contains(t, text, "the payer's bucket ENTRIES_READ_USER_ANTISCAN_V2 / "+payerPF+" is empty")
	require.Contains(t, text, "retry in "+st.RetryAfter.Round(time.Second).String())
	link, _ := page.Find(".banner-text a").Attr("href")
	require.Equal(t, "/admin/buckets/ENTRIES_READ_USER_ANTISCAN_V2/prod/"+payerPF, link)
	require.Zero(t, e.dictStats(t).Count(dict.OpGetEntry, http.StatusOK), "nothing was sent")
	require.Equal(t, int64(capacityPSP), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, participant), "all or nothing")

	// The participant's bucket empty: the refusal names it.
	e2 := newEnv(t, withDict())
	require.True(t, e2.take(e2.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, participant), capacityPSP).Allowed)
	resp = e2.lookup(keyFound, payerPJ)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, document(t, resp).Find(".banner-text").Text(),
		"the participant's bucket ENTRIES_READ_PARTICIPANT_ANTISCAN / "+participant+" is empty")
}

// secondsHeader is a wait as Retry-After writes it: whole seconds, rounded up.
func secondsHeader(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func TestDictLookupBadInput(t *testing.T) {
	e := newEnv(t, withDict())
	tests := []struct {
		name, key, payer, want string
	}{
		{"UnknownKeyType", "not a key", payerPF, "invalid key"},
		{"BadCPFKey", "11144477736", payerPF, "invalid CPF"},
		{"CapitalEmail", "Maria.Souza@example.com", payerPF, "capital letters"},
		{"BadPayer", keyFound, "12345678901", "invalid payer id"},
		{"NoPayer", keyFound, "", "invalid payer id"},
		{"Hostile", `<script>alert("x")</script>@x.com`, payerPF, "invalid EMAIL key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.lookup(tt.key, tt.payer)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			b := body(t, resp)
			require.NotContains(t, b, "<script>")
			page, err := goquery.NewDocumentFromReader(strings.NewReader(b))
			require.NoError(t, err)
			require.Contains(t, page.Find(".banner-text").Text(), tt.want)
			value, _ := page.Find(`input[name="key"]`).Attr("value")
			require.Equal(t, tt.key, value, "the form keeps what was typed")
		})
	}
	// Nothing was taken or sent.
	list, err := e.reader.List(context.Background(), inspect.Filter{})
	require.NoError(t, err)
	require.Empty(t, list.States)
	require.Zero(t, e.dictStats(t).Total(http.StatusBadRequest)+e.dictStats(t).Total(http.StatusOK))
}

func TestDictPaymentIsIdempotent(t *testing.T) {
	sqlstoretest.ForEachEngine(t, testDictPaymentIsIdempotent)
}

func testDictPaymentIsIdempotent(t *testing.T, engine sqlstore.Engine) {
	e := newEnv(t, withStore(engine), withDict())
	// Two lookups by a PJ payer: 1000 - 2; the second one is paid.
	require.Equal(t, http.StatusOK, e.lookup(keyEmail, payerPJ).StatusCode)
	page := document(t, e.lookup(keyEmail, payerPJ))
	e2e, _ := page.Find(`input[name="end_to_end_id"]`).Attr("value")
	userPolicy := dict.PolicyEntriesReadUserAntiscan // an EMAIL key
	require.Equal(t, int64(998), e.tokens(userPolicy, payerPJ))
	require.Equal(t, int64(capacityPSP-2), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, participant))

	resp := e.pay(e2e)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page = document(t, resp)
	require.Equal(t, "Credit applied.", page.Find(".flash").Text())
	credits := page.Find("table.credits tbody tr")
	require.Equal(t, 2, credits.Length())
	// +2 to a PJ payer, +1 to the participant.
	require.Equal(t, []string{userPolicy, payerPJ, "+2", "1000"}, cells(credits.Eq(0)))
	require.Equal(t, []string{dict.PolicyEntriesReadParticipantAntiscan, participant, "+1", "49999"}, cells(credits.Eq(1)))
	require.Equal(t, int64(1000), e.tokens(userPolicy, payerPJ))

	// Pressed again: nothing changes, and the page says so.
	resp = e.pay(e2e)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page = document(t, resp)
	require.Contains(t, page.Find(".warning").Text(), "already applied")
	require.Equal(t, []string{userPolicy, payerPJ, "already applied", "1000"}, cells(page.Find("table.credits tbody tr").Eq(0)))
	require.Equal(t, int64(capacityPSP-1), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, participant))

	// An unknown or malformed id is refused.
	unknown, err := dict.NewEndToEndID(participant, e.clock.Now())
	require.NoError(t, err)
	tests := []struct {
		name, e2e string
		want      int
		text      string
	}{
		{"Unknown", unknown, http.StatusNotFound, "no lookup with that EndToEndId"},
		{"Malformed", "<b>E123</b>", http.StatusBadRequest, "invalid EndToEndId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.pay(tt.e2e)
			require.Equal(t, tt.want, resp.StatusCode)
			b := body(t, resp)
			require.Contains(t, b, tt.text)
			require.NotContains(t, b, "<b>E123")
		})
	}
}

func TestDictPaymentOfANotFoundLookupConflicts(t *testing.T) {
	e := newEnv(t, withDict())
	// The 404's EndToEndId is in the records; a payment for it is refused.
	resp := e.lookup(keyMissing, payerPF)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	rows, err := e.sql.ReadDB().QueryContext(context.Background(), `SELECT end_to_end_id FROM balde_dict_lookups`)
	require.NoError(t, err)
	var e2e string
	for rows.Next() {
		require.NoError(t, rows.Scan(&e2e))
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())

	resp = e.pay(e2e)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body(t, resp), "lookup did not find an entry")
	require.Equal(t, int64(capacityPF-20), e.tokens(dict.PolicyEntriesReadUserAntiscanV2, payerPF))
}

func TestDictFormsRefuseCrossSite(t *testing.T) {
	e := newEnv(t, withDict())
	cross := withHeader("Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, e.lookup(keyFound, payerPF, cross).StatusCode)
	require.Equal(t, http.StatusForbidden, e.pay("E12345678202601020304abcdefghijk", cross).StatusCode)
	require.Equal(t, http.StatusUnauthorized, e.post("/dict/lookup", url.Values{"key": {keyFound}, "payer_id": {payerPF}}).StatusCode)
	require.Zero(t, e.dictStats(t).Count(dict.OpGetEntry, http.StatusOK), "nothing was sent")
	require.Equal(t, int64(capacityPF), e.tokens(dict.PolicyEntriesReadUserAntiscanV2, payerPF))
}

func cells(tr *goquery.Selection) []string {
	var out []string
	tr.Find("td").Each(func(_ int, td *goquery.Selection) { out = append(out, strings.TrimSpace(td.Text())) })
	return out
}

// TestDictLookupShowsStatistics: the entry's Statistics (the DICT's
// anti-fraud counters) are shown with it.
func TestDictLookupShowsStatistics(t *testing.T) {
	e := newEnv(t, withDict())
	resp := e.lookup(keyFound, payerPF)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := document(t, resp)
	rows := page.Find("table.statistics tbody tr")
	require.Equal(t, 12, rows.Length(), "4 counters by key, owner and account")
	var cells []string
	rows.First().Find("td").Each(func(_ int, td *goquery.Selection) { cells = append(cells, td.Text()) })
	require.Equal(t, []string{"SETTLEMENTS", "KEY", "0", "0", "0"}, cells)
}

// TestDictLookupAnswerSurvivesTheBucketPanel: when the buckets cannot be
// read after the lookup, the page still shows the DICT's answer (before:
// a 503 for a lookup the DICT had answered).
func TestDictLookupAnswerSurvivesTheBucketPanel(t *testing.T) {
	var readsDown atomic.Bool
	e := newEnv(t, withDict(), func(e *env) {
		e.store = &throttletest.Store{
			Base: throttletest.NewMemStore(e.clock.Now),
			BucketsFn: func(ctx context.Context, keys []throttle.Key) ([]throttle.Bucket, error) {
				if readsDown.Load() {
					return nil, throttle.ErrStoreUnavailable
				}
				return nil, nil
			},
		}
	})
	readsDown.Store(true)
	resp := e.lookup(keyFound, payerPF)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := document(t, resp)
	require.Contains(t, page.Find("section.state dl").Text(), "João Silva")
	require.Contains(t, page.Find("p.warning").Text(), "The buckets cannot be read right now")
	require.Zero(t, page.Find("table.buckets").Length())
}
