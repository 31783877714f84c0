package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// Issue 20: "SIFEN did not queue the lot:" and the DICT's key validation
// errors were English on pt-BR and es-PY pages, and error lines kept the
// package prefixes ("dict: invalid payer id: dict: invalid CPF"). Now they
// go through the catalog; SIFEN's code and the values typed stay as they
// are.
func TestErrorLinesAreTranslated(t *testing.T) {
	e := newEnv(t, withDict(), withSifen(sifenConfig{policy: sifen.PolicyConfig{Interval: time.Second}}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), sifen.EnvTest)
	require.Equal(t, docPath(ids[0])+"?result=sent", e.send(ids[0]).Header.Get("Location"))
	e.clock.Advance(2 * time.Second)
	require.Equal(t, docPath(ids[1])+"?result=not_queued", e.send(ids[1]).Header.Get("Location")) // 0301

	for _, tc := range []struct {
		accept, notQueued, badCPFKey, badPayer string
	}{
		{"en", "SIFEN did not queue the lot: 0301",
			`invalid key: invalid CPF: "11144477736" has wrong check digits`, `invalid payer id: invalid CPF: "12345678901" has wrong check digits`},
		{"pt-BR,pt;q=0.9", "o SIFEN não enfileirou o lote: 0301",
			`chave inválida: CPF inválido: "11144477736" tem dígitos verificadores errados`, `id do pagador inválido: CPF inválido: "12345678901" tem dígitos verificadores errados`},
		{"es-PY,es;q=0.9", "SIFEN no encoló el lote: 0301",
			`clave inválida: CPF inválido: "11144477736" tiene dígitos verificadores incorrectos`, `id del pagador inválido: CPF inválido: "12345678901" tiene dígitos verificadores incorrectos`},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			lang := withHeader("Accept-Language", tc.accept)
			list := document(t, e.get("/documents", asAdmin, lang))
			require.Contains(t, list.Find("table.documents td.message").Text(), tc.notQueued)
			page := document(t, e.get(docPath(ids[1]), asAdmin, lang))
			require.Contains(t, page.Find(".banner-detail").Text(), tc.notQueued)

			for _, bad := range []struct{ key, payer, want string }{
				{"11144477736", payerPF, tc.badCPFKey},
				{keyFound, "12345678901", tc.badPayer},
			} {
				resp := e.lookup(bad.key, bad.payer, lang)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
				text := document(t, resp).Find(".banner-text").Text()
				require.Contains(t, text, bad.want)
				require.False(t, strings.Contains(text, "dict: ") || strings.Contains(text, "sifen: "), text)
			}
		})
	}
}
