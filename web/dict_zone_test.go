package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/web"
)

// What was seen: the DICT lookup page showed the entry's instants in UTC
// ("2020-01-01 12:00:00 UTC") while every other page shows them in the
// configured zone (decision 0106). They are in BALDE_TIME_ZONE now, the
// same instants.
func TestDictLookupShowsTheEntrysTimesInTheConfiguredZone(t *testing.T) {
	asu, err := time.LoadLocation("America/Asuncion")
	require.NoError(t, err)
	fields := []string{"Account opened", "Key created", "Key owned since", "Response time"}
	created := map[string]time.Time{}
	for _, tc := range []struct {
		zone *time.Location
		abbr string // the zone's abbreviation that ends every instant
	}{
		{asu, `-0[34]`},
		{time.UTC, `UTC`},
	} {
		t.Run(tc.zone.String(), func(t *testing.T) {
			e := newEnv(t, withDict(), withServer(func(s *web.Server) { s.TimeZone = tc.zone }))
			resp := e.lookup(keyFound, payerPF, withHeader("Accept-Language", "en"))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			page := document(t, resp)
			dd := map[string]string{}
			page.Find("section.state dl dt").Each(func(_ int, dt *goquery.Selection) {
				dd[strings.TrimSpace(dt.Text())] = strings.TrimSpace(dt.Next().Text())
			})
			for _, f := range fields {
				require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d `+tc.abbr+`$`, dd[f], f)
			}
			at, err := time.ParseInLocation(i18n.ZonedLayout, dd["Key created"], tc.zone)
			require.NoError(t, err)
			created[tc.zone.String()] = at
		})
	}
	require.True(t, created["UTC"].Equal(created[asu.String()]), "one instant in either zone: %s, %s", created["UTC"], created[asu.String()])
}
