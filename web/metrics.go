package web

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// Metrics holds balde's Prometheus metrics: the throttle.Observer of every
// throttle.Limiter, served by the Server at /metrics. It is a
// prometheus.Collector of balde_* alone, so an application may register it
// in its own registry (appRegistry.MustRegister(m)) with no duplicate.
// Registry holds m alone (no global registry).
//
// The bucket gauges are the severity now: every collection first counts
// the buckets of the reader given to CountFrom. Labels are bounded (policy
// names, results, reasons, severities, scopes, route templates, codes),
// never an identifier or a raw path.
type Metrics struct {
	Registry *prometheus.Registry

	decisions *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	shadow    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	failOpen  *prometheus.CounterVec
	storeFail *prometheus.CounterVec
	severity  *prometheus.CounterVec

	buckets     *prometheus.GaugeVec
	blocked     *prometheus.GaugeVec
	negative    *prometheus.GaugeVec
	worstFill   *prometheus.GaugeVec
	worstTokens *prometheus.GaugeVec

	remoteRefusals *prometheus.CounterVec
	buildInfo      *prometheus.GaugeVec
	dictUnverified prometheus.Gauge

	scopeOf func(throttle.Key) string

	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	gatewayRequests *prometheus.CounterVec

	// collectMu serializes collections: each counts the buckets and sets
	// the gauges before reading them.
	collectMu sync.Mutex
	source    atomic.Pointer[countSource] // nil: gauges as last set
}

// countSource is the reader counted at each collection and the logger of
// a failed count.
type countSource struct {
	reader *inspect.Reader
	logger *slog.Logger
}

var (
	_ throttle.Observer       = (*Metrics)(nil)
	_ throttle.RemoteObserver = (*Metrics)(nil)
	_ throttle.StoreObserver  = (*Metrics)(nil)
	_ prometheus.Collector    = (*Metrics)(nil)
)

// Metric scopes, for the alerting rules: a participant's bucket running
// dry pages; a payer's is the DICT's anti-scan and never pages.
const (
	scopeParticipant = "participant" // DICT PSP-scope policies
	scopePayer       = "payer"       // DICT USER-scope policies
	scopeOther       = "other"       // SIFEN, the inbound limiter, any other policy
)

// metricScopes maps scope (a Server.Scope) to metric scopes: PSP is
// participant, USER is payer, anything else other.
func metricScopes(scope func(throttle.Key) string) func(throttle.Key) string {
	return func(k throttle.Key) string {
		switch dict.Scope(scope(k)) {
		case dict.ScopePSP:
			return scopeParticipant
		case dict.ScopeUser:
			return scopePayer
		}
		return scopeOther
	}
}

// NewMetrics returns the metrics in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		decisions: counterVec("balde_throttle_decisions_total",
			"Buckets charged by throttle decisions, by policy and result (allowed, refused, fail_open).", "policy", "result"),
		refusals: counterVec("balde_throttle_refusals_total",
			"Buckets that refused a request, by policy and reason (empty, cooldown, blocked).", "policy", "reason"),
		shadow: counterVec("balde_throttle_shadow_refusals_total",
			"Buckets of policies in shadow mode that would have refused a request, which was admitted, by policy and reason (empty, cooldown, blocked).", "policy", "reason"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "balde_throttle_decision_seconds",
			Help: "Time to decide a Take (one store transaction), by the deciding bucket's policy.", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"policy"}),
		failOpen: counterVec("balde_throttle_fail_open_total",
			"Requests admitted without a bucket because the store was unavailable and the policy fails open.", "policy"),
		storeFail: counterVec("balde_throttle_store_failures_total",
			"Takes the store could not decide, by policy and cause (timeout: a statement or lock wait passed its bound, the database is overloaded or a lock is held; unavailable: anything else), before the fail mode applied.", "policy", "cause"),
		severity: counterVec("balde_throttle_severity_changes_total",
			"Buckets that changed severity level, by policy and levels.", "policy", "from", "to"),
		buckets: gaugeVec("balde_buckets",
			"Stored buckets by their severity now (computed at scrape time, not the level stored at the last write), by scope (participant, payer, other); Healthy buckets carry no scope. Database-wide: every instance exports the same value.", "severity", "scope"),
		blocked: gaugeVec("balde_buckets_blocked",
			"Keys blocked now (refusing everything after a refusal or a remote 429), by scope. Database-wide.", "scope"),
		negative: gaugeVec("balde_buckets_negative",
			"Buckets with a negative balance now (after a penalty), by scope. Database-wide.", "scope"),
		worstFill: gaugeVec("balde_bucket_worst_fill_ratio",
			"Per policy, the fill ratio (tokens/capacity, negative below 0) of its emptiest bucket now; absent when every bucket of the policy was stored Healthy. Database-wide.", "policy", "scope"),
		worstTokens: gaugeVec("balde_bucket_worst_tokens",
			"Per policy, the tokens of its emptiest bucket now (see balde_bucket_worst_fill_ratio).", "policy", "scope"),
		remoteRefusals: counterVec("balde_remote_refusals_total",
			"Requests the remote side refused although the local mirror admitted them (DICT 429, SIFEN 0301): the mirror has drifted. By system (dict, sifen), policy and code.", "system", "policy", "code"),
		buildInfo: gaugeVec("balde_build_info",
			"Always 1; the labels are balde's version and the Go version it was built with.", "version", "goversion"),
		dictUnverified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "balde_dict_answers_unverified",
			Help: "1 while this process takes the answers of a DICT that is not a simulator without verifying their signature (no BALDE_DICT_VERIFY_CERT, acknowledged with --dict-unverified); 0 otherwise.",
		}),
		scopeOf: metricScopes(Scopes(dict.NewCatalog(""))),
		httpRequests: counterVec("balde_http_requests_total",
			"HTTP requests served, by route template, method and status code.", "route", "method", "code"),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "balde_http_request_seconds",
			Help: "Time to serve an HTTP request, by route template.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		gatewayRequests: counterVec("balde_gateway_requests_total",
			"Requests a gateway answered, by gateway (dict, sifen), client (a configured name; empty: no valid credential) and status code.", "gateway", "client", "code"),
	}
	m.SetVersion(moduleVersion())
	m.Registry.MustRegister(m)
	return m
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// collectors are balde's metrics, in the order they are described.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.refusals, m.shadow, m.latency, m.failOpen, m.storeFail, m.severity,
		m.buckets, m.blocked, m.negative, m.worstFill, m.worstTokens,
		m.remoteRefusals, m.buildInfo, m.dictUnverified,
		m.httpRequests, m.httpDuration, m.gatewayRequests}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector, counting the buckets of
// CountFrom's reader first (at most 5 s); a failed count is logged and the
// gauges keep the last good one.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectMu.Lock()
	defer m.collectMu.Unlock()
	if src := m.source.Load(); src != nil {
		ctx, cancel := context.WithTimeout(context.Background(), metricsCountTimeout)
		c, err := src.reader.CountNow(ctx, inspect.Filter{})
		cancel()
		if err != nil {
			src.logger.Warn("metrics: count buckets", slog.Any("error", err))
		} else {
			m.setBuckets(c)
		}
	}
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// CountFrom makes every collection count r's buckets for the gauges,
// logging a failed count to logger (nil discards). The first call wins.
func (m *Metrics) CountFrom(r *inspect.Reader, logger *slog.Logger) {
	if r != nil {
		m.source.CompareAndSwap(nil, &countSource{reader: r, logger: cmp.Or(logger, nowhere)})
	}
}

// handler serves m's registry in the Prometheus text format, with the Go
// and process collectors when runtime is set.
func (m *Metrics) handler(runtime bool) http.Handler {
	if !runtime {
		return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	}
	rt := prometheus.NewRegistry()
	rt.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(prometheus.Gatherers{m.Registry, rt}, promhttp.HandlerOpts{})
}

// moduleVersion is the main module's version, "dev" when unknown.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// SetVersion sets balde_build_info's version label and returns m;
// NewMetrics sets the main module's version.
func (m *Metrics) SetVersion(version string) *Metrics {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	return m
}

// SetDictUnverified sets balde_dict_answers_unverified: 1 while the
// answers of a DICT that is not a simulator are taken unverified.
func (m *Metrics) SetDictUnverified(unverified bool) {
	m.dictUnverified.Set(map[bool]float64{true: 1}[unverified])
}

// RemoteRefused implements throttle.RemoteObserver.
func (m *Metrics) RemoteRefused(system, policy, code string) {
	m.remoteRefusals.WithLabelValues(system, policy, code).Inc()
}

// Decided implements throttle.Observer: one decision per bucket charged.
func (m *Metrics) Decided(d throttle.Decision, latency time.Duration) {
	result := "allowed"
	switch {
	case d.FailOpen:
		result = "fail_open"
	case !d.Allowed:
		result = "refused"
	}
	for _, b := range d.Buckets {
		m.decisions.WithLabelValues(b.Key.Policy, result).Inc()
		switch {
		case b.Reason == throttle.ReasonNone:
		case d.Shadow:
			m.shadow.WithLabelValues(b.Key.Policy, b.Reason.String()).Inc()
		default:
			m.refusals.WithLabelValues(b.Key.Policy, b.Reason.String()).Inc()
		}
	}
	if !d.FailOpen {
		m.latency.WithLabelValues(d.Key.Policy).Observe(latency.Seconds())
	}
}

// FailedOpen implements throttle.Observer.
func (m *Metrics) FailedOpen(key throttle.Key, _ error) {
	m.failOpen.WithLabelValues(key.Policy).Inc()
}

// StoreFailed implements throttle.StoreObserver.
func (m *Metrics) StoreFailed(key throttle.Key, err error) {
	cause := "unavailable"
	if errors.Is(err, throttle.ErrStoreTimeout) {
		cause = "timeout"
	}
	m.storeFail.WithLabelValues(key.Policy, cause).Inc()
}

// SeverityChanged implements throttle.Observer.
func (m *Metrics) SeverityChanged(c throttle.SeverityChange) {
	m.severity.WithLabelValues(c.Key.Policy, c.From.String(), c.To.String()).Inc()
}

// observeHTTP records one served request.
func (m *Metrics) observeHTTP(route, method string, status int, elapsed time.Duration) {
	if !slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions}, method) {
		method = "other" // a client may send any token as a method
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(elapsed.Seconds())
}

// metricScopeNames are the scopes every bucket gauge always exports (0
// when none), so that a rule sees a series drop to 0 instead of vanish.
var metricScopeNames = []string{scopeParticipant, scopePayer, scopeOther}

// setBuckets sets the bucket gauges from c, split by scope (c.ByPolicy);
// Healthy buckets, and those a partial count could not attribute, carry no
// scope.
func (m *Metrics) setBuckets(c inspect.SeverityCounts) {
	m.buckets.Reset()
	m.blocked.Reset()
	m.negative.Reset()
	blocked, negative := map[string]int64{}, map[string]int64{}
	worse := map[throttle.Severity]map[string]int64{}
	for policy, pc := range c.ByPolicy {
		scope := m.scopeOf(throttle.Key{Policy: policy})
		for sev, n := range pc.Worse {
			if worse[sev] == nil {
				worse[sev] = map[string]int64{}
			}
			worse[sev][scope] += n
		}
		blocked[scope] += pc.Blocked
		negative[scope] += pc.Negative
	}
	for _, sev := range throttle.Severities {
		if sev == throttle.SeverityHealthy {
			m.buckets.WithLabelValues(sev.String(), "").Set(float64(c.BySeverity[sev]))
			continue
		}
		setScoped(m.buckets.MustCurryWith(prometheus.Labels{"severity": sev.String()}), worse[sev], c.BySeverity[sev])
	}
	setScoped(m.blocked, blocked, c.Blocked)
	setScoped(m.negative, negative, c.Negative)
	m.worstFill.Reset()
	m.worstTokens.Reset()
	for policy, st := range c.Worst {
		scope := m.scopeOf(st.Key)
		if st.Policy.Capacity > 0 {
			m.worstFill.WithLabelValues(policy, scope).Set(float64(st.Tokens) / float64(st.Policy.Capacity))
		}
		m.worstTokens.WithLabelValues(policy, scope).Set(float64(st.Tokens))
	}
}

// setScoped sets g for every scope from by, and without a scope the part
// of total no scope holds.
func setScoped(g *prometheus.GaugeVec, by map[string]int64, total int64) {
	var sum int64
	for _, scope := range metricScopeNames {
		g.WithLabelValues(scope).Set(float64(by[scope]))
		sum += by[scope]
	}
	if rest := total - sum; rest > 0 {
		g.WithLabelValues("").Set(float64(rest))
	}
}

// metricsCountTimeout bounds the count of buckets a collection runs.
const metricsCountTimeout = 5 * time.Second

// serveMetrics is GET /metrics (Metrics.handler).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metricsHandler.ServeHTTP(w, r)
	return nil
}
