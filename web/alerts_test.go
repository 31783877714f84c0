package web_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/balde-throttle/balde/web"
)

var metricName = regexp.MustCompile(`\bbalde_[a-z_]+`)

// requireKnownMetrics checks that every balde_ metric expr names exists
// (histogram series by their base name).
func requireKnownMetrics(t *testing.T, where, expr string, known []string) {
	t.Helper()
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(known, b) {
				base = b
			}
		}
		require.Contains(t, known, base, "%s: %q uses %s, which /metrics does not serve", where, expr, name)
	}
}

func TestAlertingRulesParseAndUseServedMetrics(t *testing.T) {
	known := web.MetricNames(web.NewMetrics())
	raw, err := os.ReadFile("../docs/alerts/balde.rules.yml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	require.NotEmpty(t, rules.Groups)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			require.NotEmpty(t, r.Expr, r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			requireKnownMetrics(t, r.Alert, r.Expr, known)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 5)
}

func TestGrafanaDashboardParsesAndUsesServedMetrics(t *testing.T) {
	known := web.MetricNames(web.NewMetrics())
	raw, err := os.ReadFile("../docs/alerts/grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Title  string
		UID    string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.Equal(t, "balde", dash.Title)
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, p.Title)
			requireKnownMetrics(t, p.Title, tg.Expr, known)
		}
	}
}
