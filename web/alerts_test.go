package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
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

// alertingRules are the groups of docs/alerts/balde.rules.yml.
type alertingRules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Expr, For string
			Labels           map[string]string
			Annotations      map[string]string
		}
	}
}

func readAlertingRules(t *testing.T) alertingRules {
	t.Helper()
	raw, err := os.ReadFile("../docs/alerts/balde.rules.yml")
	require.NoError(t, err)
	var rules alertingRules
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	require.NotEmpty(t, rules.Groups)
	return rules
}

func TestAlertingRulesParseAndUseServedMetrics(t *testing.T) {
	known := web.MetricNames(web.NewMetrics())
	rules := readAlertingRules(t)
	rawReadme, err := os.ReadFile("../docs/alerts/README.md")
	require.NoError(t, err)
	readme := string(rawReadme)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			require.NotEmpty(t, r.Expr, r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Annotations["runbook"], r.Alert)
			anchor := "https://github.com/balde-throttle/balde/blob/main/docs/alerts/README.md#" + strings.ToLower(r.Alert)
			require.Equal(t, anchor, r.Annotations["runbook_url"], r.Alert)
			require.Contains(t, readme, "\n### "+r.Alert+"\n", "%s: its runbook_url names a section of docs/alerts/README.md", r.Alert)
			require.Contains(t, []string{"page", "ticket"}, r.Labels["severity"], r.Alert)
			requireKnownMetrics(t, r.Alert, r.Expr, known)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 5)
}

// increaseOver finds increase(COUNTER[WINDOW]) in a rule's expression.
var increaseOver = regexp.MustCompile(`increase\((balde_[a-z_]+_total)\[([0-9]+[smh])\]\)`)

// A counter's series is born with its first increment, and increase() needs
// two samples of it: a rule that fires on any increase of a counter also
// fires on a series that did not exist a window ago ("X unless X offset
// WINDOW"), or it misses a first burst that stays (see the promtool cases
// "a remote 429" and "a first burst of fail-open").
func TestAlertingRulesFireOnACounterFirstSeen(t *testing.T) {
	n := 0
	for _, g := range readAlertingRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range increaseOver.FindAllStringSubmatch(r.Expr, -1) {
				counter, window := m[1], m[2]
				require.Contains(t, r.Expr, counter+" unless "+counter+" offset "+window,
					"%s fires on an increase of %s: it must fire on its first sample too", r.Alert, counter)
				n++
			}
		}
	}
	require.GreaterOrEqual(t, n, 2, "BaldeRemoteRefusals and BaldeFailingOpen")
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

// selector matches a balde_ metric and its label matchers in PromQL.
var selector = regexp.MustCompile(`\b(balde_[a-z_]+)(\{[^}]*\})?`)

// Every panel of the dashboard follows its instance and policy variables:
// each metric is selected with instance=~"$instance", and each metric that
// has a policy label with policy=~"$policy" too. Only the database-wide
// bucket gauges by severity and scope, and the HTTP and build metrics,
// have no policy to filter on.
func TestGrafanaDashboardFollowsInstanceAndPolicy(t *testing.T) {
	labels := web.MetricLabels(web.NewMetrics())
	raw, err := os.ReadFile("../docs/alerts/grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Templating struct {
			List []struct {
				Name, Type string
				Multi      bool
				IncludeAll bool
				AllValue   string
			}
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			require.True(t, v.Multi && v.IncludeAll && v.AllValue == ".*", "variable %s: multi-value with All matching everything", v.Name)
		}
		vars[v.Name] = true
	}
	require.True(t, vars["instance"] && vars["policy"], "the dashboard has instance and policy variables")

	byPolicy := 0
	for _, p := range dash.Panels {
		panelHasPolicy := false
		for _, tg := range p.Targets {
			for _, m := range selector.FindAllStringSubmatch(tg.Expr, -1) {
				name, sel := m[1], m[2]
				base := strings.TrimSuffix(name, "_bucket")
				l, ok := labels[base]
				require.True(t, ok, "%s: %s is not served", p.Title, name)
				require.Contains(t, sel, `instance=~"$instance"`, "%s: %s is not filtered by $instance", p.Title, name)
				if slices.Contains(l, "policy") {
					panelHasPolicy = true
					require.Contains(t, sel, `policy=~"$policy"`, "%s: %s has a policy label not filtered by $policy", p.Title, name)
				}
			}
		}
		if panelHasPolicy {
			byPolicy++
		}
	}
	require.GreaterOrEqual(t, byPolicy, 10, "most panels follow $policy")
	titles := make([]string, len(dash.Panels))
	for i, p := range dash.Panels {
		titles[i] = p.Title
	}
	require.Contains(t, titles, "Refused share of decisions per policy")
	require.Contains(t, titles, "Decisions and refusals per policy (dashboard range)")
}

// promtool runs Prometheus's promtool on docs/alerts, or skips the test
// with a message when it is not installed (Debian: apt-get install
// prometheus; .ci/run installs it).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus): the alerting rules are not checked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = "../docs/alerts"
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestAlertingRulesPassPromtoolCheck(t *testing.T) {
	promtool(t, "check", "rules", "balde.rules.yml")
}

// The situations of the operator on call: five lots waiting and one payer
// drained alert nobody, a remote 429 pages, a first burst of fail-open
// pages, two instances exporting the same gauges fire one alert.
func TestAlertingRulesPassTheirUnitTests(t *testing.T) {
	promtool(t, "test", "rules", "balde.rules.test.yml")
}

// The bucket gauges tell a participant's bucket from an end user's, so
// that the rules page on the first and never on the second.
func TestMetricsBucketGaugesByScope(t *testing.T) {
	m := web.NewMetrics()
	m.SetBuckets(inspect.SeverityCounts{
		BySeverity: map[throttle.Severity]int64{throttle.SeverityHealthy: 7, throttle.SeverityCritical: 4},
		Blocked:    1, Negative: 2,
		ByPolicy: map[string]inspect.PolicyCounts{
			"ENTRIES_READ_PARTICIPANT_ANTISCAN": {Worse: map[throttle.Severity]int64{throttle.SeverityCritical: 1}, Negative: 1},
			"ENTRIES_READ_USER_ANTISCAN_V2":     {Worse: map[throttle.Severity]int64{throttle.SeverityCritical: 2}, Negative: 1},
			"SIFEN_CONSULTA_LOTE":               {Worse: map[throttle.Severity]int64{throttle.SeverityCritical: 1}, Blocked: 1},
		},
	})
	for _, tt := range []struct{ name, series string }{
		{"participant critical", `balde_buckets{scope="participant",severity="Critical"} 1`},
		{"payer critical", `balde_buckets{scope="payer",severity="Critical"} 2`},
		{"other critical", `balde_buckets{scope="other",severity="Critical"} 1`},
		{"healthy without scope", `balde_buckets{scope="",severity="Healthy"} 7`},
		{"participant negative", `balde_buckets_negative{scope="participant"} 1`},
		{"payer negative", `balde_buckets_negative{scope="payer"} 1`},
		{"participant not blocked", `balde_buckets_blocked{scope="participant"} 0`},
		{"lot blocked", `balde_buckets_blocked{scope="other"} 1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, gather(t, m), tt.series)
		})
	}
}

func TestMetricsRemoteRefusalsAndBuildInfo(t *testing.T) {
	m := web.NewMetrics()
	var o throttle.Observer = m
	ro, ok := o.(throttle.RemoteObserver)
	require.True(t, ok, "web.Metrics implements throttle.RemoteObserver")
	ro.RemoteRefused("dict", "ENTRIES_READ_PARTICIPANT_ANTISCAN", "429")
	ro.RemoteRefused("sifen", "SIFEN_RECEPCION_LOTE", "0301")
	ro.RemoteRefused("sifen", "SIFEN_RECEPCION_LOTE", "0301")
	m.SetVersion("v1.2.3")
	text := gather(t, m)
	require.Contains(t, text, `balde_remote_refusals_total{code="429",policy="ENTRIES_READ_PARTICIPANT_ANTISCAN",system="dict"} 1`)
	require.Contains(t, text, `balde_remote_refusals_total{code="0301",policy="SIFEN_RECEPCION_LOTE",system="sifen"} 2`)
	require.Regexp(t, `balde_build_info\{goversion="go[^"]+",version="v1\.2\.3"\} 1`, text)
	require.Equal(t, 1, strings.Count(text, "balde_build_info{"), "one build_info series after SetVersion")
}

// A Limiter passes a remote refusal to its Observer when it implements
// throttle.RemoteObserver (the DICT client and the SIFEN sender call it).
func TestLimiterRemoteRefusedReachesMetrics(t *testing.T) {
	m := web.NewMetrics()
	l, err := throttle.NewLimiter(nil, throttle.Policies{}, throttle.Config{Observer: m})
	require.NoError(t, err)
	l.RemoteRefused("dict", "ENTRIES_READ_PARTICIPANT_ANTISCAN", "429")
	require.Contains(t, gather(t, m), `balde_remote_refusals_total{code="429",policy="ENTRIES_READ_PARTICIPANT_ANTISCAN",system="dict"} 1`)
}

// gather is m's metrics in the text format.
func gather(t *testing.T, m *web.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// A 0301 from SIFEN (the local interval shorter than SIFEN's) is counted
// by balde_remote_refusals_total, which pages (BaldeRemoteRefusals).
func TestSifenNotQueuedCountsARemoteRefusal(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{policy: sifen.PolicyConfig{Interval: time.Second}}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), sifen.EnvTest)
	require.Equal(t, docPath(ids[0])+"?result=sent", e.send(ids[0]).Header.Get("Location"))
	require.NotContains(t, body(t, e.get("/metrics")), "balde_remote_refusals_total{")
	e.clock.Advance(2 * time.Second)
	require.Equal(t, docPath(ids[1])+"?result=not_queued", e.send(ids[1]).Header.Get("Location"))
	require.Contains(t, body(t, e.get("/metrics")), `balde_remote_refusals_total{code="0301",policy="SIFEN_RECEPCION_LOTE",system="sifen"} 1`)
}

// A remote 429 from the DICT (another sender drained the participant) is
// counted by balde_remote_refusals_total under the bucket the client
// blamed, which pages (BaldeRemoteRefusals).
func TestDictRemote429CountsARemoteRefusal(t *testing.T) {
	dictServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(dictServer.Close)
	m := web.NewMetrics()
	catalog := dict.NewCatalog("prod")
	limiter, err := throttle.NewLimiter(throttletest.NewMemStore(throttle.SystemClock), catalog, throttle.Config{Observer: m})
	require.NoError(t, err)
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: dictServer.URL, Participant: "12345678", Limiter: limiter, Catalog: catalog})
	require.NoError(t, err)
	require.NotContains(t, gather(t, m), "balde_remote_refusals_total{")

	_, err = client.GetEntry(context.Background(), dict.LookupRequest{Key: "+5561988880000", PayerID: "52998224725"})
	var remote *dict.RemoteError
	require.ErrorAs(t, err, &remote)
	require.Equal(t, http.StatusTooManyRequests, remote.Status)
	require.Regexp(t, `balde_remote_refusals_total\{code="429",policy="ENTRIES_READ_USER_ANTISCAN(_V2)?",system="dict"\} 1`, gather(t, m))
}
