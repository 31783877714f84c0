package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// panelRows returns the admin summary's panel titled title as label →
// {value, class}.
func panelRows(t testing.TB, doc *goquery.Document, title string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	doc.Find(".panel").Each(func(_ int, p *goquery.Selection) {
		if p.Find("h2").Text() != title {
			return
		}
		p.Find("tr").Each(func(_ int, tr *goquery.Selection) {
			td := tr.Find("td")
			class, _ := td.Attr("class")
			out[tr.Find("th").Text()] = [2]string{td.Text(), class}
		})
	})
	require.NotEmpty(t, out, "no panel %q", title)
	return out
}

// recordLookups records n lookups of payer by participant by, the first
// notFound of them answered 404, and pays paid of the others.
func (e *env) recordLookups(tag, payer, by string, n, notFound, paid int) {
	e.t.Helper()
	ctx := context.Background()
	for i := range n {
		e2e := fmt.Sprintf("E%s%s%s%07d", by, e.clock.Now().UTC().Format("200601021504"), tag, i)
		status := http.StatusOK
		if i < notFound {
			status = http.StatusNotFound
		}
		require.NoError(e.t, e.records.RecordLookup(ctx, dict.Lookup{
			EndToEndID: e2e, Env: "prod", PayerID: payer, KeyType: dict.KeyCPF,
			Policy: dict.PolicyEntriesReadUserAntiscanV2, Participant: by, Status: status, LookedUpAt: e.clock.Now(),
		}))
		if status == http.StatusOK && paid > 0 {
			paid--
			require.NoError(e.t, e.records.MarkPaid(ctx, e2e, e.clock.Now()))
		}
	}
}

func TestAntiScanPanel(t *testing.T) {
	e := newEnv(t, withDict(), withPanels(func(e *env) []web.PanelFunc {
		return []web.PanelFunc{web.AntiScanPanel(e.records.Monitors, e.clock.Now)}
	}))
	const title = "DICT anti-scan monitors (24 h)"

	empty := panelRows(t, document(t, e.get("/admin/buckets", asAdmin)), title)
	require.Equal(t, [2]string{"0", ""}, empty["Lookups"])
	require.Equal(t, [2]string{"no payment order yet", ""}, empty["Lookups per payment order"])
	require.Equal(t, [2]string{"0 (0 suspicious)", "sev-healthy"}, empty["Payers with ≥ 100 lookups"])

	// Lookups older than the window do not count.
	e.recordLookups("old", "52998224725", participant, 60, 60, 0)
	e.clock.Advance(web.AntiScanWindow + time.Second)

	// Participant 12345678: payer A 100 lookups, 20 404s (20.0 %: not above
	// 20 %); payer B 100, 21 (21.0 %: suspicious); payer C 50, none (not
	// watched below 100). In all 250, 41 404s: 16.4 %, suspicious (> 7 %).
	// Participant 87654321: payer D 100 lookups, 7 404s: 7.0 %, not above.
	e.recordLookups("aaa", "52998224725", participant, 100, 20, 10)
	e.recordLookups("bbb", "39053344705", participant, 100, 21, 0)
	e.recordLookups("ccc", "11144477735", participant, 50, 0, 15)
	e.recordLookups("ddd", "11222333000181", "87654321", 100, 7, 0)

	rows := panelRows(t, document(t, e.get("/admin/buckets", asAdmin)), title)
	require.Equal(t, map[string][2]string{
		"Lookups":                         {"350", ""},
		"Payment orders":                  {"25", ""},
		"Lookups per payment order":       {"14.0", ""},
		"404 share, participant 12345678": {"16.4 % (41 of 250) suspicious", "sev-critical"},
		"404 share, participant 87654321": {"7.0 % (7 of 100)", "sev-healthy"},
		"Payers with ≥ 100 lookups":       {"3 (1 suspicious)", "sev-critical"},
		"404 share, payer 39053344705":    {"21.0 % (21 of 100) suspicious", "sev-critical"},
		"404 share, payer 52998224725":    {"20.0 % (20 of 100)", "sev-healthy"},
		"404 share, payer 11222333000181": {"7.0 % (7 of 100)", "sev-healthy"},
	}, rows)
	note := document(t, e.get("/admin/buckets", asAdmin)).Find(".panel .note").Text()
	require.Contains(t, note, "more than 7.0 %")
	require.Contains(t, note, "at least 100 lookups and more than 20.0 %")

	// In Portuguese and Spanish the shares have a decimal comma.
	for _, tc := range []struct{ accept, participant, note string }{
		{"pt-BR", "16,4 % (41 de 250) suspeito", "mais de 7,0 %"},
		{"es-PY", "16,4 % (41 de 250) sospechoso", "más de 7,0 %"},
	} {
		doc := document(t, e.get("/admin/buckets", asAdmin, withHeader("Accept-Language", tc.accept)))
		require.Contains(t, doc.Find(".panel td.sev-critical").First().Text(), tc.participant, tc.accept)
		require.Contains(t, doc.Find(".panel .note").Text(), tc.note, tc.accept)
	}
}

// A share is rounded to the nearest tenth of a percent, never cut: 10 of
// 18 lookups ended in 404 is 55.6 % (55.55…), not 55.5 %.
func TestAntiScanPanelRoundsShares(t *testing.T) {
	e := newEnv(t, withDict(), withPanels(func(e *env) []web.PanelFunc {
		return []web.PanelFunc{web.AntiScanPanel(e.records.Monitors, e.clock.Now)}
	}))
	e.recordLookups("r", "52998224725", participant, 18, 10, 0)
	rows := panelRows(t, document(t, e.get("/admin/buckets", asAdmin)), "DICT anti-scan monitors (24 h)")
	require.Equal(t, [2]string{"55.6 % (10 of 18) suspicious", "sev-critical"}, rows["404 share, participant "+participant])
	doc := document(t, e.get("/admin/buckets", asAdmin, withHeader("Accept-Language", "es-PY")))
	require.Contains(t, doc.Find(".panel td.sev-critical").First().Text(), "55,6 % (10 de 18)")
}

func TestDictCategoryPanel(t *testing.T) {
	e := newEnv(t, withDict(), withPanels(func(e *env) []web.PanelFunc {
		return []web.PanelFunc{web.DictCategoryPanel(e.catalog, participant)}
	}))
	rows := panelRows(t, document(t, e.get("/admin/buckets", asAdmin)), "DICT participant")
	require.Equal(t, map[string][2]string{
		"ISPB":             {participant, ""},
		"Category":         {"A", ""},
		"Anti-scan bucket": {"25,000/min, capacity 50,000", ""},
	}, rows)

	// Reconciliation learns another category: the panel follows.
	require.NoError(t, e.catalog.SetCategory("H"))
	rows = panelRows(t, document(t, e.get("/admin/buckets", asAdmin)), "DICT participant")
	require.Equal(t, [2]string{"H", ""}, rows["Category"])
	require.Equal(t, [2]string{"2/min, capacity 50", ""}, rows["Anti-scan bucket"])
}

func TestSifenDocumentsPanel(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}), withPanels(func(e *env) []web.PanelFunc {
		return []web.PanelFunc{web.SifenDocumentsPanel(e.sender)}
	}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 3)...), sifen.EnvTest)
	require.Equal(t, http.StatusSeeOther, e.send(ids[0]).StatusCode) // sent
	require.Equal(t, http.StatusSeeOther, e.send(ids[1]).StatusCode) // blocked: stays a draft

	rows := panelRows(t, document(t, e.get("/admin/buckets", asAdmin)), "SIFEN documents")
	require.Equal(t, map[string][2]string{
		"draft":             {"2", ""},
		"sending":           {"0", ""},
		"sent":              {"1", "sev-healthy"},
		"approved":          {"0", ""},
		"rejected":          {"0", ""},
		"not queued (0301)": {"0", ""},
		"error":             {"0", ""},
	}, rows)
}

func TestScopes(t *testing.T) {
	catalog := dict.NewCatalog("prod")
	scope := web.Scopes(catalog)
	tests := []struct {
		policy, want string
	}{
		{dict.PolicyEntriesReadUserAntiscan, "USER"},
		{dict.PolicyEntriesReadUserAntiscanV2, "USER"},
		{dict.PolicyEntriesReadParticipantAntiscan, "PSP"},
		{"POLICIES_LIST", "PSP"},
		{sifen.PolicyRecepcionLote, "RUC"},
		{"SIFEN_CONSULTA_LOTE", ""}, // lot queries are a schedule, not a policy
		{web.PolicyInboundIP, "IP"},
		{web.PolicyInboundToken, "TOKEN"},
		{"SOMETHING_ELSE", ""},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			require.Equal(t, tt.want, scope(throttle.Key{Policy: tt.policy, Env: "prod", Identifier: "x"}))
		})
	}
	require.Equal(t, "", web.Scopes(nil)(throttle.Key{Policy: "KEYS_CHECK"}), "no catalog, no DICT scope")
}

func TestAdminBucketsScopeColumn(t *testing.T) {
	e := newEnv(t, withDict(), withSifen(sifenConfig{}))
	require.Equal(t, http.StatusNotFound, e.lookup(keyMissing, payerPF).StatusCode)
	ids := e.importDocs(sifentest.Doc{RUC: "80069563"}.File(), sifen.EnvTest)
	require.Equal(t, http.StatusSeeOther, e.send(ids[0]).StatusCode)

	doc := document(t, e.get("/admin/buckets", asAdmin))
	require.Equal(t, "USER", row(t, doc, payerPF)["Scope"].Text())
	require.Equal(t, "PSP", row(t, doc, participant)["Scope"].Text())
	require.Equal(t, "RUC", row(t, doc, "80069563")["Scope"].Text())
	// What was seen: lot polling buried the DICT's buckets. A lot waiting
	// for its result is no bucket at all: the lots tab shows it with when
	// it is queried next (a schedule, not a limit).
	require.NotZero(t, doc.Find(`a[href*="tab=lots"]`).Length())
	require.Zero(t, doc.Find(`table.buckets td.id:contains("`+e.doc(ids[0]).LotNumber+`")`).Length())
	lots := document(t, e.get("/admin/buckets?tab=lots", asAdmin))
	require.Zero(t, lots.Find(`table.buckets`).Length(), "no bucket on the lots tab")
	lot := lots.Find(`table.lots tbody tr`)
	require.Equal(t, 1, lot.Length())
	require.Equal(t, e.doc(ids[0]).LotNumber, lot.Find("td.id").Text())
	require.Equal(t, "next query at "+e.clock.Now().Add(sifen.DefaultConsultaInterval).UTC().Format(i18n.TimeLayout)+" (in 10m0s)", lot.Find("td.next-query").Text())
}
