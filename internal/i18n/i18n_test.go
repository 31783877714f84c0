package i18n_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
)

func TestLanguageChoiceAndPlurals(t *testing.T) {
	for _, tc := range []struct{ accept, want, title string }{
		{"", "en", "Bucket states"},
		{"pt-BR,pt;q=0.9,en;q=0.5", "pt-BR", "Estado dos baldes"},
		{"es-PY,es;q=0.9", "es-PY", "Estado de los baldes"},
		{"es", "es-PY", "Estado de los baldes"},
		{"fr-FR", "en", "Bucket states"},
	} {
		p := i18n.FromAcceptLanguage(tc.accept, time.UTC)
		require.Equal(t, tc.want, p.Lang(), tc.accept)
		require.Equal(t, tc.title, p.Sprintf("Bucket states"), tc.accept)
	}
	require.Equal(t, "pt-BR", i18n.FromLocale("pt_BR.UTF-8", nil).Lang())
	require.Equal(t, "en", i18n.FromLocale("C", nil).Lang())
	pt := i18n.New(i18n.Portuguese, nil)
	require.Equal(t, "1 balde de consulta de lote está na sua própria aba", pt.Sprintf("%d lot-polling buckets are on their own tab", 1))
	require.Equal(t, "3 baldes de consulta de lote estão na sua própria aba", pt.Sprintf("%d lot-polling buckets are on their own tab", 3))
	require.Equal(t, "1 lot-polling bucket is on its own tab", i18n.New(i18n.English, nil).Sprintf("%d lot-polling buckets are on their own tab", 1))
}

func TestTimeShowsTheZoneNextToUTC(t *testing.T) {
	asu, err := time.LoadLocation("America/Asuncion")
	require.NoError(t, err)
	at := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	require.Equal(t, "2026-03-02 12:00:00 UTC (09:00:00 -03)", i18n.New(i18n.Spanish, asu).Time(at))
	require.Equal(t, "2026-03-02 12:00:00 UTC", i18n.New(i18n.Spanish, time.UTC).Time(at))
}

func TestNumbersAndZonedTimesPerLanguage(t *testing.T) {
	asu, err := time.LoadLocation("America/Asuncion")
	require.NoError(t, err)
	at := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		tag                  string
		int, perMille        string
		zoned, zonedUTC, zne string
	}{
		{"en", "25,000", "39.3 %", "2026-03-02 09:00:00 -03", "2026-03-02 12:00:00 UTC", "America/Asuncion (-03)"},
		{"pt-BR", "25.000", "39,3 %", "2026-03-02 09:00:00 -03", "2026-03-02 12:00:00 UTC", "America/Asuncion (-03)"},
		{"es-PY", "25.000", "39,3 %", "2026-03-02 09:00:00 -03", "2026-03-02 12:00:00 UTC", "America/Asuncion (-03)"},
	} {
		p := i18n.FromAcceptLanguage(tc.tag, asu)
		require.Equal(t, tc.int, p.Int(25000), tc.tag)
		require.Equal(t, tc.perMille, p.PerMille(393), tc.tag)
		require.Equal(t, tc.zoned, p.Zoned(at), tc.tag)
		require.Equal(t, tc.zne, p.ZoneName(at), tc.tag)
		utc := i18n.FromAcceptLanguage(tc.tag, time.UTC)
		require.Equal(t, tc.zonedUTC, utc.Zoned(at), "UTC only when configured")
		require.Equal(t, "UTC", utc.ZoneName(at))
	}
}
