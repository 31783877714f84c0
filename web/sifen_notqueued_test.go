package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// What was seen (issue 20): a 0301 turned the document into "error" and
// it dropped out of the drafts filter; a later press overwrote SIFEN's
// answer with "blocked: blocked, wait 561 s"; the "not queued" banner was
// green. A document SIFEN did not queue stays among the drafts, keeps
// SIFEN's answer with the local refusal shown apart (as a wait, never
// hundreds of seconds), and every banner about it is a warning or an
// error. On SQLite and PostgreSQL (the documents' store keeps the answer).
func TestNotQueuedDocumentStaysADraftWithSIFENsAnswer(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			e := newEnv(t, withStore(engine), withSifen(sifenConfig{policy: sifen.PolicyConfig{Interval: time.Second}}))
			ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 3)...), sifen.EnvTest)
			require.Equal(t, docPath(ids[0])+"?result=sent", e.send(ids[0]).Header.Get("Location"))
			e.clock.Advance(2 * time.Second)
			// The local interval (1 s) is shorter than SIFEN's (10 s): 0301.
			require.Equal(t, docPath(ids[1])+"?result=not_queued", e.send(ids[1]).Header.Get("Location"))
			id := strconv.FormatInt(ids[1], 10)

			// The landing page: SIFEN's 0301 in an error-coloured banner.
			page := document(t, e.get(docPath(ids[1])+"?result=not_queued", asAdmin))
			require.Equal(t, 1, page.Find(".banner").Length())
			require.False(t, page.Find(".banner").HasClass("banner-ok"), "never green")
			require.True(t, page.Find(".banner").HasClass("banner-warning") || page.Find(".banner").HasClass("banner-error"))
			require.Contains(t, page.Find(".banner-detail").Text(), "SIFEN did not queue the lot: 0301")

			// The RUC's gate says why it waits (SIFEN's 0301, the level) and
			// links to the RUC's documents; the bucket's page never says
			// "full again: now" during the block.
			list := document(t, e.get("/admin/buckets?policy="+sifen.PolicyRecepcionLote, asAdmin))
			gate := row(t, list, "88888801")
			require.Equal(t, "blocked 10m0s after SIFEN's 0301 (block 1 in a row)", strings.TrimSpace(gate["Cooldown / block"].Text()))
			require.Equal(t, "/documents?env=test&ruc=88888801", gate["Sends"].Find("a").AttrOr("href", ""))
			detail := document(t, e.get("/admin/buckets/"+sifen.PolicyRecepcionLote+"/test/88888801", asAdmin))
			require.Contains(t, detail.Find("section.state").Text(), "Full againin 10m0s")

			// The drafts filter keeps it: never accepted, to be sent again.
			drafts := documentRows(t, document(t, e.get("/documents?status=draft", asAdmin)))
			require.Contains(t, drafts, id, "a document SIFEN did not queue is still a draft")
			require.Contains(t, drafts, strconv.FormatInt(ids[2], 10))
			require.NotContains(t, drafts, strconv.FormatInt(ids[0], 10), "the queued one is sent, not a draft")
			require.Equal(t, "not queued (0301)", strings.TrimSpace(drafts[id]["Status"].Find(".badge").Text()))

			// Pressed again during the block: refused locally, nothing sent.
			e.clock.Advance(39 * time.Second)
			require.Equal(t, docPath(ids[1])+"?result=blocked&wait=561", e.send(ids[1]).Header.Get("Location"))
			d := e.doc(ids[1])
			require.Contains(t, d.Message, "SIFEN did not queue the lot: 0301", "the remote answer is kept")
			require.NotContains(t, d.Message, "blocked: blocked")
			require.Equal(t, sifen.CodeLotNotQueued, d.ResponseCode)

			page = document(t, e.get(docPath(ids[1])+"?result=blocked&wait=561", asAdmin))
			require.Equal(t, "Blocked for RUC 88888801-5 in env test, retry in 9m21s.", strings.TrimSpace(page.Find(".banner-text").Text()),
				"the local refusal, as a wait")
			require.Contains(t, page.Find(".banner-detail").Text(), "SIFEN did not queue the lot: 0301", "SIFEN's answer apart")
			require.True(t, page.Find(".banner").HasClass("banner-warning"))

			rows := documentRows(t, document(t, e.get("/documents?status=draft", asAdmin)))
			require.Contains(t, rows[id]["Message"].Text(), "SIFEN did not queue the lot: 0301")
			require.NotContains(t, rows[id]["Message"].Text(), "wait 561 s")
			require.Contains(t, rows[id]["Status"].Find(".wait").Text(), "retry in 9m21s", "the local refusal in its own place")
			require.True(t, rows[id]["Send"].Find("button").Is("[disabled]"), "Send is off during the block")

			// The "Send all drafts" result for a lot not queued for another
			// reason is an error flash, never the green one.
			flash := document(t, e.get("/documents?"+url.Values{"result": {"not_queued"}, "n": {"1"}}.Encode(), asAdmin)).Find("p.flash")
			require.True(t, flash.HasClass("flash-error"), flash.AttrOr("class", ""))

			// Once the block is over it may be sent again, from the drafts;
			// its page says "not queued (0301)" in the colour of its badge,
			// no longer the red of a failure.
			e.clock.Advance(10 * time.Minute)
			rows = documentRows(t, document(t, e.get("/documents?status=draft", asAdmin)))
			require.False(t, rows[id]["Send"].Find("button").Is("[disabled]"))
			page = document(t, e.get(docPath(ids[1]), asAdmin))
			require.Equal(t, "Not queued (0301): the RUC's block is over, it may be sent again.", strings.TrimSpace(page.Find(".banner-text").Text()))
			require.True(t, page.Find(".banner").HasClass("banner-warning"), page.Find(".banner").AttrOr("class", ""))
			require.True(t, page.Find("h1 .badge").HasClass("sev-high"))
		})
	}
}

// A 0301 lot has one name and one colour wherever it is shown (decision
// 0142). What was seen: "error" (orange) on the summary's card while the
// documents list said "not queued (0301)" and let it be sent again; its
// page turned red once the block was over, the RUC's block banner and a
// "Send all drafts" that drew the 0301 were red too. Now: "not queued
// (0301)" in the High colour on the summary, the list, the page, the
// RUC's banner and the flash, in the three languages.
func TestNotQueuedHasOneNameAndOneColour(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{policy: sifen.PolicyConfig{Interval: time.Second}}), withPanels(func(e *env) []web.PanelFunc {
		return []web.PanelFunc{web.SifenDocumentsPanel(e.sender)}
	}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 3)...), sifen.EnvTest)
	require.Equal(t, docPath(ids[0])+"?result=sent", e.send(ids[0]).Header.Get("Location"))
	e.clock.Advance(2 * time.Second)
	// "Send all drafts": SIFEN's interval (10 s) is not over, 0301.
	resp := e.post("/documents/send-ruc", url.Values{"ruc": {"88888801"}, "env": {"test"}}, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "not_queued", loc.Query().Get("result"))
	require.Equal(t, sifen.CodeLotNotQueued, loc.Query().Get("code"))

	for _, tc := range []struct{ accept, name, flash string }{
		{"en", "not queued (0301)", "The lot of 2 document(s) was not queued (0301): they stay drafts, sent again when the RUC's block ends."},
		{"pt-BR", "não enfileirado (0301)", "O lote de 2 documento(s) não foi enfileirado (0301): continuam rascunhos, enviados de novo quando o bloqueio do RUC terminar."},
		{"es-PY", "no encolado (0301)", "El lote de 2 documento(s) no fue encolado (0301): siguen siendo borradores, se envían de nuevo cuando termine el bloqueo del RUC."},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			lang := withHeader("Accept-Language", tc.accept)
			// The flash of that "Send all drafts", and the list under it.
			list := document(t, e.get(loc.RequestURI(), asAdmin, lang))
			flash := list.Find("p.flash")
			require.Equal(t, tc.flash, flash.Text())
			require.True(t, flash.HasClass("flash-warning"), flash.AttrOr("class", ""))
			require.True(t, list.Find(".ruc-hold").HasClass("banner-warning"), "the RUC's block after the 0301")
			badges := list.Find("table.documents tbody td.status .badge")
			require.Equal(t, 3, badges.Length())
			for i, id := range []int64{ids[2], ids[1]} { // newest first
				badge := badges.Eq(i)
				require.Equal(t, tc.name, badge.Text(), "document %d", id)
				require.True(t, badge.HasClass("sev-high"))
			}
			// The summary counts them under that name, in that colour, and
			// not as "error".
			tr := i18n.FromAcceptLanguage(tc.accept, nil)
			panel := panelRows(t, document(t, e.get("/admin/buckets", asAdmin, lang)), tr.Sprintf("SIFEN documents"))
			require.Equal(t, [2]string{"2", "sev-high"}, panel[tc.name])
			require.Equal(t, [2]string{"0", ""}, panel[tr.Text("error")])
		})
	}
}
