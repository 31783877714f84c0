package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// Metrics holds balde's Prometheus metrics. It is the engine's
// throttle.Observer: give it to every throttle.Limiter as Config.Observer,
// and to the Server, which serves it at /metrics.
//
// Metrics is a prometheus.Collector of balde's own metrics (balde_*) and
// nothing else, so it registers in an application's registry beside the
// application's metrics and its Go and process collectors with no
// duplicate:
//
//	appRegistry.MustRegister(m)
//
// Registry is a registry of its own holding m alone (no global registry:
// two servers in one test process do not collide); the Server's /metrics
// serves it, with the Go and process collectors added when
// Server.RuntimeMetrics is set (balde serve).
//
// The bucket gauges (balde_buckets, balde_buckets_blocked,
// balde_buckets_negative, balde_bucket_worst_*) are the severity now:
// every collection counts the buckets of the reader given to CountFrom
// first (the Server does it for its Reader, balde.Open for the engine's).
//
// Labels are bounded: policy names, results, reasons, severities, scopes
// (participant, payer, other), route templates, status codes and remote
// answer codes; never an identifier or a raw path.
type Metrics struct {
	// Registry holds m, and only m.
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

	// scopeOf is the metric scope of a key (participant, payer, other).
	scopeOf func(throttle.Key) string

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	// gatewayRequests counts a gateway's requests by client.
	gatewayRequests *prometheus.CounterVec

	// collectMu serializes collections: each counts the buckets and sets
	// the gauges before reading them.
	collectMu sync.Mutex
	sourceMu  sync.Mutex
	source    *inspect.Reader // counted at each collection; nil: gauges as last set
	logger    *slog.Logger    // a failed count, when source is set
}

var (
	_ throttle.Observer       = (*Metrics)(nil)
	_ throttle.RemoteObserver = (*Metrics)(nil)
	_ throttle.StoreObserver  = (*Metrics)(nil)
	_ prometheus.Collector    = (*Metrics)(nil)
)

// Metric scopes: whom a bucket belongs to, for the alerting rules. A
// participant's bucket running dry stops every user of the participant and
// pages; an end user's (payer's) bucket running dry is the DICT's anti-scan
// doing its job and never pages.
const (
	scopeParticipant = "participant" // DICT PSP-scope policies
	scopePayer       = "payer"       // DICT USER-scope policies
	scopeOther       = "other"       // SIFEN, the inbound limiter, any other policy
)

// metricScopes returns the metric scope of a key from scope (a Server.Scope
// such as Scopes(catalog)): PSP is participant, USER is payer, anything
// else other.
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
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_decisions_total",
			Help: "Buckets charged by throttle decisions, by policy and result (allowed, refused, fail_open).",
		}, []string{"policy", "result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_refusals_total",
			Help: "Buckets that refused a request, by policy and reason (empty, cooldown, blocked).",
		}, []string{"policy", "reason"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_shadow_refusals_total",
			Help: "Buckets of policies in shadow mode that would have refused a request, which was admitted, by policy and reason (empty, cooldown, blocked).",
		}, []string{"policy", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "balde_throttle_decision_seconds",
			Help:    "Time to decide a Take (one store transaction), by the deciding bucket's policy.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"policy"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_fail_open_total",
			Help: "Requests admitted without a bucket because the store was unavailable and the policy fails open.",
		}, []string{"policy"}),
		storeFail: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_store_failures_total",
			Help: "Takes the store could not decide, by policy and cause (timeout: a statement or lock wait passed its bound, the database is overloaded or a lock is held; unavailable: anything else), before the fail mode applied.",
		}, []string{"policy", "cause"}),
		severity: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_severity_changes_total",
			Help: "Buckets that changed severity level, by policy and levels.",
		}, []string{"policy", "from", "to"}),
		buckets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_buckets",
			Help: "Stored buckets by their severity now (computed at scrape time, not the level stored at the last write), by scope (participant, payer, other); Healthy buckets carry no scope. Database-wide: every instance exports the same value.",
		}, []string{"severity", "scope"}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_buckets_blocked",
			Help: "Keys blocked now (refusing everything after a refusal or a remote 429), by scope. Database-wide.",
		}, []string{"scope"}),
		negative: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_buckets_negative",
			Help: "Buckets with a negative balance now (after a penalty), by scope. Database-wide.",
		}, []string{"scope"}),
		worstFill: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_bucket_worst_fill_ratio",
			Help: "Per policy, the fill ratio (tokens/capacity, negative below 0) of its emptiest bucket now; absent when every bucket of the policy was stored Healthy. Database-wide.",
		}, []string{"policy", "scope"}),
		worstTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_bucket_worst_tokens",
			Help: "Per policy, the tokens of its emptiest bucket now (see balde_bucket_worst_fill_ratio).",
		}, []string{"policy", "scope"}),
		remoteRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_remote_refusals_total",
			Help: "Requests the remote side refused although the local mirror admitted them (DICT 429, SIFEN 0301): the mirror has drifted. By system (dict, sifen), policy and code.",
		}, []string{"system", "policy", "code"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_build_info",
			Help: "Always 1; the labels are balde's version and the Go version it was built with.",
		}, []string{"version", "goversion"}),
		dictUnverified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "balde_dict_answers_unverified",
			Help: "1 while this process takes the answers of a DICT that is not a simulator without verifying their signature (no BALDE_DICT_VERIFY_CERT, acknowledged with --dict-unverified); 0 otherwise.",
		}),
		scopeOf: metricScopes(Scopes(dict.NewCatalog(""))),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_http_requests_total",
			Help: "HTTP requests served, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "balde_http_request_seconds",
			Help:    "Time to serve an HTTP request, by route template.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		gatewayRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_gateway_requests_total",
			Help: "Requests a gateway answered, by gateway (dict, sifen), client (a configured name; empty: no valid credential) and status code.",
		}, []string{"gateway", "client", "code"}),
	}
	m.SetVersion(moduleVersion())
	m.Registry.MustRegister(m)
	return m
}

// collectors are balde's metrics, in the order they are described.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.refusals, m.shadow, m.latency, m.failOpen, m.storeFail, m.severity,
		m.buckets, m.blocked, m.negative, m.worstFill, m.worstTokens,
		m.remoteRefusals, m.buildInfo, m.dictUnverified,
		m.httpRequests, m.httpDuration, m.gatewayRequests}
}

// Describe implements prometheus.Collector: balde's metrics, no runtime
// collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector. With a limiter given to
// CountFrom it first counts the buckets (Reader.CountNow, at most 5 s);
// when that fails the gauges keep the last good count and the failure is
// logged.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectMu.Lock()
	defer m.collectMu.Unlock()
	m.sourceMu.Lock()
	source, logger := m.source, m.logger
	m.sourceMu.Unlock()
	if source != nil {
		ctx, cancel := context.WithTimeout(context.Background(), metricsCountTimeout)
		c, err := source.CountNow(ctx, inspect.Filter{})
		cancel()
		if err != nil {
			logger.Warn("metrics: count buckets", slog.Any("error", err))
		} else {
			m.setBuckets(c)
		}
	}
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// CountFrom makes every collection set the bucket gauges from r's buckets,
// counted then (the severity now); a failed count is logged to logger (nil
// discards). The first call wins: a Metrics shared by several servers of
// one engine counts once per scrape.
func (m *Metrics) CountFrom(r *inspect.Reader, logger *slog.Logger) {
	if r == nil {
		return
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m.sourceMu.Lock()
	defer m.sourceMu.Unlock()
	if m.source == nil {
		m.source, m.logger = r, logger
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

// moduleVersion is the main module's version from the build information
// ("dev" when the build has none, as in tests).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// SetVersion sets balde_build_info's version label (the binary's version,
// e.g. main.Version set with -ldflags) and returns m, for
// NewMetrics().SetVersion(Version); NewMetrics sets the main module's
// version from the build information.
func (m *Metrics) SetVersion(version string) *Metrics {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	return m
}

// SetDictUnverified sets balde_dict_answers_unverified: 1 while the
// answers of a DICT that is not a simulator are taken unverified.
func (m *Metrics) SetDictUnverified(unverified bool) {
	v := 0.0
	if unverified {
		v = 1
	}
	m.dictUnverified.Set(v)
}

// RemoteRefused implements throttle.RemoteObserver: the remote side refused
// a request the mirror admitted (a DICT 429, a SIFEN 0301).
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
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // a client may send any token as a method
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(elapsed.Seconds())
}

// observeGateway records one request a gateway answered.
func (m *Metrics) observeGateway(gateway, client string, status int) {
	m.gatewayRequests.WithLabelValues(gateway, client, strconv.Itoa(status)).Inc()
}

// metricScopeNames are the scopes every bucket gauge always exports (0
// when none), so that a rule sees a series drop to 0 instead of vanish.
var metricScopeNames = []string{scopeParticipant, scopePayer, scopeOther}

// setBuckets sets the bucket gauges from counts of the severity now. The
// levels worse than Healthy, the blocked and the negative buckets are
// split by scope (c.ByPolicy); Healthy buckets carry no scope, and so do
// worse ones a partial count could not attribute (c.Partial).
func (m *Metrics) setBuckets(c inspect.SeverityCounts) {
	m.buckets.Reset()
	m.blocked.Reset()
	m.negative.Reset()
	worse := make(map[string]map[throttle.Severity]int64)
	blocked := make(map[string]int64)
	negative := make(map[string]int64)
	for _, scope := range metricScopeNames {
		worse[scope] = make(map[throttle.Severity]int64)
	}
	var attributed struct{ blocked, negative int64 }
	attributedBy := make(map[throttle.Severity]int64)
	for policy, pc := range c.ByPolicy {
		scope := m.scopeOf(throttle.Key{Policy: policy})
		for sev, n := range pc.Worse {
			worse[scope][sev] += n
			attributedBy[sev] += n
		}
		blocked[scope] += pc.Blocked
		negative[scope] += pc.Negative
		attributed.blocked += pc.Blocked
		attributed.negative += pc.Negative
	}
	for _, sev := range throttle.Severities {
		if sev == throttle.SeverityHealthy {
			m.buckets.WithLabelValues(sev.String(), "").Set(float64(c.BySeverity[sev]))
			continue
		}
		for _, scope := range metricScopeNames {
			m.buckets.WithLabelValues(sev.String(), scope).Set(float64(worse[scope][sev]))
		}
		if rest := c.BySeverity[sev] - attributedBy[sev]; rest > 0 {
			m.buckets.WithLabelValues(sev.String(), "").Set(float64(rest))
		}
	}
	for _, scope := range metricScopeNames {
		m.blocked.WithLabelValues(scope).Set(float64(blocked[scope]))
		m.negative.WithLabelValues(scope).Set(float64(negative[scope]))
	}
	if rest := c.Blocked - attributed.blocked; rest > 0 {
		m.blocked.WithLabelValues("").Set(float64(rest))
	}
	if rest := c.Negative - attributed.negative; rest > 0 {
		m.negative.WithLabelValues("").Set(float64(rest))
	}
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

// metricsCountTimeout bounds the count of buckets a collection runs.
const metricsCountTimeout = 5 * time.Second

// serveMetrics is GET /metrics in the Prometheus text format: the Metrics'
// registry (and the Go and process collectors with RuntimeMetrics). The
// bucket gauges are computed at scrape time (Metrics.Collect counts the
// Limiter's buckets); when that fails the scrape still answers, with the
// gauges of the last good count.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metricsHandler.ServeHTTP(w, r)
	return nil
}
