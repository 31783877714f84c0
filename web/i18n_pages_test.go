package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/web"
)

// The SIFEN documents pages, the DICT lookup page and the summary panels
// speak the reader's Accept-Language: what an operator in Brazil or
// Paraguay reads there, with SIFEN's and the DICT's own terms (RUC, CDC,
// dProtAut, EndToEndId) as they are.
func TestDocumentsAndDictPagesAreTranslated(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}), withDict(), withPanels(func(e *env) []web.PanelFunc {
		return []web.PanelFunc{web.SifenDocumentsPanel(e.sender), web.AntiScanPanel(e.records.Monitors, e.clock.Now)}
	}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), sifen.EnvTest)
	require.Equal(t, http.StatusSeeOther, e.send(ids[0]).StatusCode)
	require.Equal(t, http.StatusSeeOther, e.send(ids[1]).StatusCode) // blocked: the RUC's interval
	require.Equal(t, http.StatusNotFound, e.lookup(keyMissing, payerPF).StatusCode)

	for _, tc := range []struct {
		accept                          string
		list, upload, doc, banner, dict string
		lookup404, panelRow, panelValue string
	}{
		{"pt-BR,pt;q=0.9", "Documentos SIFEN", "Carregar um DE ou um lote", "Número do lote", "Bloqueado para o RUC 88888801-5 no ambiente test",
			"Chave Pix (CPF, CNPJ, +telefone, e-mail ou EVP)", "Nenhum vínculo para esta chave no DICT (404).", "Consultas por ordem de pagamento", "nenhuma ordem de pagamento ainda"},
		{"es-PY,es;q=0.9", "Documentos SIFEN", "Subir un DE o un lote", "Número de lote", "Bloqueado para el RUC 88888801-5 en el ambiente test",
			"Chave Pix (CPF, CNPJ, +teléfono, correo o EVP)", "Ningún vínculo para esta clave en el DICT (404).", "Consultas por orden de pago", "ninguna orden de pago todavía"},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			lang := withHeader("Accept-Language", tc.accept)
			list := document(t, e.get("/documents", asAdmin, lang))
			require.Equal(t, tc.list, strings.TrimSpace(list.Find("h1").Text()))
			require.Equal(t, tc.upload, list.Find("section.upload h2").Text())
			require.NotContains(t, list.Find("main").Text(), "Send to SIFEN")

			doc := document(t, e.get(docPath(ids[1]), asAdmin, lang))
			require.Contains(t, doc.Find(".state dl").Text(), tc.doc)
			require.Contains(t, doc.Find(".state dl").Text(), "dProtAut")
			require.Contains(t, doc.Find(".banner-text").Text(), tc.banner)

			dict := document(t, e.lookup(keyMissing, payerPF, lang))
			require.Contains(t, dict.Find("form label").First().Text(), tc.dict)
			require.Equal(t, tc.lookup404, dict.Find(".banner-text").Text())

			summary := document(t, e.get("/admin/buckets", asAdmin, lang))
			require.Contains(t, summary.Find(".panel").Text(), tc.panelRow)
			require.Contains(t, summary.Find(".panel").Text(), tc.panelValue)
		})
	}
}

// What was seen: the reset confirmation, the error page and parts of a
// bucket's page (the policy's text, ledger reasons, the reset message,
// the ledger's pager) were English whatever the reader's language.
func TestResetErrorAndBucketPagesAreTranslated(t *testing.T) {
	e := newEnv(t)
	k := key("P", "alice")
	e.take(k, 3)
	bucket := "/admin/buckets/P/prod/alice"
	for _, tc := range []struct {
		accept                             string
		resetH1, cancel, policy, reason    string
		flash, notFound, back, emptyLedger string
	}{
		{"pt-BR", "Reiniciar este balde?", "Cancelar", "P: 10/min (capacidade 10, contínua)", "consumo",
			"O balde foi reiniciado", "404 Não encontrado", "Voltar à lista de baldes", "Nenhum lançamento para este balde."},
		{"es-PY", "¿Reiniciar este balde?", "Cancelar", "P: 10/min (capacidad 10, continua)", "consumo",
			"El balde fue reiniciado", "404 No encontrado", "Volver a la lista de baldes", "Ningún asiento para este balde."},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			lang := withHeader("Accept-Language", tc.accept)
			reset := document(t, e.get(bucket+"/reset", asAdmin, lang))
			require.Equal(t, tc.resetH1, reset.Find("h1").Text())
			require.Equal(t, tc.cancel, reset.Find("form a").Text())

			// The chart's hover text names the take in the reader's language.
			chart := document(t, e.get(bucket, asAdmin, lang))
			require.Contains(t, chart.Find("circle.chart-dot title").Text(), ": "+tc.reason+" -3")

			page := document(t, e.get(bucket+"?reset=1", asAdmin, lang))
			require.Contains(t, page.Find("section.state dl").Text(), tc.policy)
			require.Equal(t, tc.reason, page.Find("table.ledger tbody tr td").Eq(1).Text())
			require.Contains(t, page.Find(".flash").Text(), tc.flash)

			missing := document(t, e.get("/admin/buckets/P/prod/nobody-here/nope", asAdmin, lang))
			require.Equal(t, tc.notFound, missing.Find("h1").Text())
			require.Equal(t, tc.back, missing.Find("main p a").Last().Text())

			empty := document(t, e.get("/admin/buckets/P/prod/never-used", asAdmin, lang))
			require.Equal(t, tc.emptyLedger, empty.Find("p.empty").Last().Text())
		})
	}
}

// The bucket list's auto-refresh toggle in words people use: "Actualizar
// solo" read oddly in Spanish (and "Atualizar sozinho" in Portuguese).
func TestAutoRefreshToggleIsNaturalInEachLanguage(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ accept, start, stop string }{
		{"en", "Auto-refresh", "Stop auto-refresh"},
		{"pt-BR", "Atualização automática", "Parar a atualização automática"},
		{"es-PY", "Actualización automática", "Detener la actualización automática"},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			lang := withHeader("Accept-Language", tc.accept)
			off := document(t, e.get("/admin/buckets", asAdmin, lang))
			require.Equal(t, tc.start, off.Find(`form.filter a[href*="refresh=1"]`).Text())
			on := document(t, e.get("/admin/buckets?refresh=1", asAdmin, lang))
			require.Equal(t, tc.stop, on.Find(`form.filter a`).Last().Text())
		})
	}
}
