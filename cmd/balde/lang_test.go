package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen/sifensim"
)

// sifen-send and dict-lookup speak LANG: the refusal lines, the summary
// and the error line are Portuguese (Brazil) or Spanish (Paraguay); the
// JSON lines keep their English field names and values.
func TestBatchCommandsSpeakLANG(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: 5 * time.Second})
	dir, _ := threeLotsOfOneRUC(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"SIFEN_THROTTLE_SECONDS": "7", "BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db, "LANG": "pt_BR.UTF-8"}

	code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--no-wait", dir)
	require.Equal(t, ExitFailed, code)
	oneStderrLine(t, stderr, "sifen-send: 2 de 3 não concluídos: 2 bloqueados")
	require.Contains(t, stdout, `"bloqueado: em espera em SIFEN_RECEPCION_LOTE/test/80069563, tente de novo em 7s"`)
	require.Contains(t, stdout, "1 enviados, 2 bloqueados, 0 ignorados, 0 com falha de 3 em")

	clock.Advance(time.Minute)
	code, stdout, _ = runIn(context.Background(), clock, "", env, "sifen-send", "--no-wait", "--json", dir)
	require.Equal(t, ExitFailed, code)
	items, _ := jsonLines[report.SifenRecord](t, stdout)
	require.Contains(t, items[2].Message, "blocked: cooldown on SIFEN_RECEPCION_LOTE/test/80069563, retry in 7s", "JSON stays English")

	es := map[string]string{"BALDE_DB": db, "LC_ALL": "es_PY.UTF-8"}
	code, _, stderr = runIn(context.Background(), clock, "", es, "sifen-send", dir)
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, stderr, "sifen-send: ninguna URL de SIFEN configurada")

	dsim := startDictSim(t, "A", true)
	keys := "+5561988880000\n+5561900000000\n"
	code, stdout, stderr = runIn(context.Background(), clock, keys, map[string]string{"LANG": "es_PY.UTF-8"}, "dict-lookup",
		"--db", "sqlite://"+filepath.Join(t.TempDir(), "d.db"), "--dict-url", dsim.URL(), "--payer", "11222333000181", "-")
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stdout, `"ningún vínculo para esta clave"`)
	require.Contains(t, stdout, "2 enviados, 0 bloqueados, 0 omitidos, 0 fallidos de 2 en")
}

// passThrough are the UsageError formats with no words of their own: they
// wrap a message written elsewhere (a flag parser's, a package's error).
var passThrough = map[string]bool{
	"%v": true, "%s%v": true, "buckets list: --after: %v": true, "buckets %s: %s: %v": true,
	"dict-lookup: --dict-participant: %v": true, "dict-lookup: --payer: %v": true, "dict-lookup: --out: %v": true,
	"dict-lookup: %v": true, "dict-lookup: %s: %v": true, "dict-reconcile: --dict-participant: %v": true,
	"--dict-participant: %v": true, "DICT TLS: %v": true, "DICT client: %v": true, "--sifen-url: %v": true,
	"BALDE_INBOUND_TOKENS_FILE: %v": true, "BALDE_INBOUND_TOKENS_FILE %s: %v": true, "BALDE_ADMIN_PASSWORD_FILE: %v": true,
	"sifen-send: %v": true, "serve: %s %q: %v": true,
}

// Every usage error line a command writes in words of its own is in the
// catalog, so LANG translates it (read from the source: a new UsageError
// without its translation fails here).
func TestEveryUsageErrorIsTranslated(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(af, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "UsageError" || len(call.Args) == 0 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			require.True(t, ok, "%s: UsageError's format is not a literal", fset.Position(call.Pos()))
			format, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			n++
			if !passThrough[format] {
				require.True(t, i18n.Has(format), "%s: %q is not in internal/i18n/messages.go", fset.Position(call.Pos()), format)
			}
			return true
		})
	}
	require.Greater(t, n, 40, "the UsageError calls were found")
}
