package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	items, _ := jsonLines[sifenRecord](t, stdout)
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
