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
