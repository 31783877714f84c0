package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/audit/auditsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// withAudit gives the server an audit trail in a SQLite database of its
// own, returned through into.
func withAudit(t *testing.T, into **auditsql.Store) option {
	return func(e *env) {
		st := sqlstoretest.MustOpen(t, sqlstore.SQLite, e.clock.Now)
		a := auditsql.New(st)
		*into = a
		e.configure = append(e.configure, func(s *web.Server) { s.Audit = a })
	}
}

func trail(t *testing.T, a *auditsql.Store) []audit.Entry {
	t.Helper()
	es, err := a.List(t.Context(), audit.Query{})
	require.NoError(t, err)
	for i := range es {
		es[i].ID, es[i].At = 0, time.Time{}
	}
	return es
}

// Each state-changing action of the admin pages is recorded with who,
// what, why and what came of it; a request refused before the action for
// its input (no reason, bad input) records nothing, and a viewer's is
// recorded as refused to a viewer (docs/decisions/0141).
func TestAuditRecordsOperatorActions(t *testing.T) {
	var a *auditsql.Store
	e := newEnv(t, withAudit(t, &a), withViewer(t), withDict(), withSifen(sifenConfig{}))
	k := key("P", "x")
	e.take(k, 5)

	// A reset needs a reason: without one, a 400 and nothing done.
	resp := e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}}, asAdmin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body(t, resp), "a reset needs a reason")
	require.Equal(t, int64(5), e.balance(k))
	confirm := document(t, e.get("/admin/buckets/P/prod/x/reset", asAdmin))
	_, required := confirm.Find(`form input[name="reason"]`).Attr("required")
	require.True(t, required, "the confirmation form asks why")

	resp = e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}, "reason": {"payer called, key fixed"}}, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, http.StatusForbidden, e.post("/admin/buckets/P/prod/x/reset", url.Values{"confirm": {"yes"}, "reason": {"x"}}, asViewer).StatusCode)

	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 1)...), sifen.EnvTest)
	resp = e.post(docPath(ids[0])+"/send", url.Values{}, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	require.Equal(t, http.StatusOK, e.lookup(keyFound, payerPF).StatusCode)
	require.Equal(t, http.StatusBadRequest, e.lookup("not a key", payerPF).StatusCode, "bad input: not tried, not recorded")

	got := trail(t, a)
	require.Len(t, got, 4)
	lookup, send, denied, reset := got[0], got[1], got[2], got[3]
	require.Equal(t, audit.Entry{User: viewerUser, Action: audit.ActionDenied, Target: "action=reset&target=P%2Fprod%2Fx",
		Reason: "x", Outcome: "error=this+action+needs+the+admin+role%3B+viewers+can+only+read&status=403"}, denied)
	require.Equal(t, audit.Entry{User: adminUser, Action: audit.ActionReset, Target: "P/prod/x",
		Reason: "payer called, key fixed", Outcome: "before=5&after=10"}, reset)
	require.Equal(t, audit.ActionSifenSend, send.Action)
	require.Equal(t, fmt.Sprint(ids[0]), send.Target)
	require.Equal(t, "result=sent", send.Outcome)
	require.Equal(t, audit.ActionDictLookup, lookup.Action)
	require.Equal(t, payerPF, lookup.Target)
	require.Regexp(t, `^e2e=E[0-9A-Za-z]{31}&status=200$`, lookup.Outcome)

	// The page says it in the reader's language, with links.
	page := document(t, e.get("/admin/audit", asViewer, withHeader("Accept-Language", "pt-BR")))
	rows := page.Find("table.audit tbody tr")
	require.Equal(t, 4, rows.Length())
	require.Equal(t, "5 → 10 fichas", rows.Eq(3).Find("td.outcome").Text())
	require.Equal(t, "/admin/buckets/P/prod/x", rows.Eq(3).Find("td.target a").AttrOr("href", ""))
	require.Equal(t, viewerUser, rows.Eq(2).Find("td.user").Text())
	require.Equal(t, "Recusado a um visualizador", rows.Eq(2).Find("td.action").Text())
	require.Equal(t, "Reinício de balde · P/prod/x", rows.Eq(2).Find("td.target a").Text())
	require.Equal(t, "/admin/buckets/P/prod/x", rows.Eq(2).Find("td.target a").AttrOr("href", ""))
	require.Equal(t, "403 · esta ação exige o papel de admin; visualizadores só podem ler", rows.Eq(2).Find("td.outcome").Text())
	require.Equal(t, "enviado", rows.Eq(1).Find("td.outcome").Text())
	require.Equal(t, fmt.Sprintf("documento %d", ids[0]), rows.Eq(1).Find("td.target a").Text())
	require.Equal(t, docPath(ids[0]), rows.Eq(1).Find("td.target a").AttrOr("href", ""))
	require.Equal(t, "pagador "+payerPF, rows.Eq(0).Find("td.target").Text())
}

// Outcomes recorded as fields are rendered in the reader's language; free
// text recorded by an application is shown as it is.
func TestAuditOutcomeInTheReadersLanguage(t *testing.T) {
	var a *auditsql.Store
	e := newEnv(t, withAudit(t, &a))
	for _, en := range []audit.Entry{
		{User: "ana", Action: audit.ActionSifenSendAll, Target: "env=test&ruc=80069563", Outcome: "n=3&result=blocked&wait=540"},
		{User: "ana", Action: audit.ActionDictLookup, Target: payerPF, Outcome: "refused=ENTRIES_READ_USER_ANTISCAN_V2%2Fprod%2F52998224725&status=429"},
		{User: "ana", Action: audit.ActionSifenSend, Target: "7", Outcome: "error=the+store+is+unavailable&status=503"},
		{User: "app:billing", Action: audit.ActionSifenSend, Target: "8", Outcome: "queued by the billing job"},
	} {
		_, err := a.Record(t.Context(), en)
		require.NoError(t, err)
	}
	outcomes := func(lang string) []string {
		var out []string
		document(t, e.get("/admin/audit", asAdmin, withHeader("Accept-Language", lang))).Find("td.outcome").Each(func(_ int, s *goquery.Selection) {
			out = append(out, s.Text())
		})
		return out
	}
	require.Equal(t, []string{
		"queued by the billing job",
		"503 · the store is unavailable",
		"429 · refused locally by ENTRIES_READ_USER_ANTISCAN_V2/prod/52998224725, not sent",
		"blocked · 3 document(s) · in 9m0s",
	}, outcomes("en"))
	require.Equal(t, []string{
		"queued by the billing job",
		"503 · o armazenamento não está disponível",
		"429 · rechazada localmente por ENTRIES_READ_USER_ANTISCAN_V2/prod/52998224725, no enviada",
		"bloqueado · 3 documento(s) · en 9m0s",
	}[2:], outcomes("es-PY")[2:])
}

func auditRows(doc *goquery.Document) [][]string {
	var out [][]string
	doc.Find("table.audit tbody tr").Each(func(_ int, tr *goquery.Selection) {
		out = append(out, []string{tr.Find("td.user").Text(), tr.Find("td.action").Text(), tr.Find("td.target").Text(), tr.Find("td.reason").Text()})
	})
	return out
}

// The Audit page: newest first, filtered by user and action, a page at a
// time, in the reader's language, for viewers too.
func TestAuditPage(t *testing.T) {
	var a *auditsql.Store
	e := newEnv(t, withAudit(t, &a), withViewer(t))
	for i := range 5 {
		_, err := a.Record(t.Context(), audit.Entry{User: "ana", Action: audit.ActionReset, Target: fmt.Sprintf("P/prod/%d", i), Reason: "r"})
		require.NoError(t, err)
		e.clock.Advance(time.Minute)
	}
	_, err := a.Record(t.Context(), audit.Entry{User: audit.CLIUser("root"), Action: audit.ActionReset, Target: "P/prod/cli", Reason: "drill"})
	require.NoError(t, err)
	_, err = a.Record(t.Context(), audit.Entry{User: "bruno", Action: audit.ActionSifenSend, Target: "9", Outcome: "result=sent"})
	require.NoError(t, err)

	page := document(t, e.get("/admin/audit", asViewer))
	require.Equal(t, 1, page.Find(`header.top nav a[href="/admin/audit"][aria-current="page"]`).Length())
	rows := auditRows(page)
	require.Len(t, rows, 7)
	require.Equal(t, []string{"bruno", "SIFEN send", "document 9", ""}, rows[0], "newest first")
	require.Equal(t, []string{"cli:root", "Bucket reset", "P/prod/cli", "drill"}, rows[1])

	page = document(t, e.get("/admin/audit?user=ana&action=reset&limit=2", asAdmin))
	require.Equal(t, [][]string{{"ana", "Bucket reset", "P/prod/4", "r"}, {"ana", "Bucket reset", "P/prod/3", "r"}}, auditRows(page))
	next, ok := page.Find(".pager a").Attr("href")
	require.True(t, ok)
	page = document(t, e.get(next, asAdmin))
	require.Equal(t, []string{"ana", "Bucket reset", "P/prod/2", "r"}, auditRows(page)[0])

	pt := document(t, e.get("/admin/audit?action=sifen-send", asAdmin, withHeader("Accept-Language", "pt-BR")))
	require.Equal(t, "Auditoria", pt.Find("h1").Text())
	require.Equal(t, [][]string{{"bruno", "Envio ao SIFEN", "documento 9", ""}}, auditRows(pt))
	es := document(t, e.get("/admin/audit?user=nobody", asAdmin, withHeader("Accept-Language", "es-PY")))
	require.Equal(t, "Ninguna acción registrada.", strings.TrimSpace(es.Find("p.empty").Text()))

	for _, bad := range []string{"?action=drop", "?before=x", "?limit=501"} {
		require.Equal(t, http.StatusBadRequest, e.get("/admin/audit"+bad, asAdmin).StatusCode, bad)
	}
}

// Without an audit trail the page is not there and a reset needs no reason.
func TestAuditOff(t *testing.T) {
	e := newEnv(t)
	require.Equal(t, http.StatusNotFound, e.get("/admin/audit", asAdmin).StatusCode)
	require.Zero(t, document(t, e.get("/admin/buckets", asAdmin)).Find(`nav a[href="/admin/audit"]`).Length())
}
