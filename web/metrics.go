package web

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/balde-throttle/balde/throttle"
)

// Metrics holds balde's Prometheus metrics in a registry of its own (no
// global registry: two servers in one test process do not collide). It is
// the engine's throttle.Observer: give it to every throttle.Limiter as
// Config.Observer, and to the Server, which serves it at /metrics.
//
// Labels are bounded: policy names, results, reasons, severities, route
// templates and status codes; never an identifier or a raw path.
type Metrics struct {
	// Registry holds every metric below plus the Go and process collectors.
	Registry *prometheus.Registry

	decisions *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	failOpen  *prometheus.CounterVec
	severity  *prometheus.CounterVec

	buckets     *prometheus.GaugeVec
	blocked     prometheus.Gauge
	negative    prometheus.Gauge
	worstFill   *prometheus.GaugeVec
	worstTokens *prometheus.GaugeVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	handler http.Handler
}

var _ throttle.Observer = (*Metrics)(nil)

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
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "balde_throttle_decision_seconds",
			Help:    "Time to decide a Take (one store transaction), by the deciding bucket's policy.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"policy"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_fail_open_total",
			Help: "Requests admitted without a bucket because the store was unavailable and the policy fails open.",
		}, []string{"policy"}),
		severity: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_throttle_severity_changes_total",
			Help: "Buckets that changed severity level, by policy and levels.",
		}, []string{"policy", "from", "to"}),
		buckets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_buckets",
			Help: "Stored buckets by their severity now (computed at scrape time, not the level stored at the last write).",
		}, []string{"severity"}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "balde_buckets_blocked",
			Help: "Keys blocked now (refusing everything after a refusal or a remote 429).",
		}),
		negative: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "balde_buckets_negative",
			Help: "Buckets with a negative balance now (after a penalty).",
		}),
		worstFill: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_bucket_worst_fill_ratio",
			Help: "Per policy, the fill ratio (tokens/capacity, negative below 0) of its emptiest bucket now; absent when every bucket of the policy was stored Healthy.",
		}, []string{"policy"}),
		worstTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "balde_bucket_worst_tokens",
			Help: "Per policy, the tokens of its emptiest bucket now (see balde_bucket_worst_fill_ratio).",
		}, []string{"policy"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "balde_http_requests_total",
			Help: "HTTP requests served, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "balde_http_request_seconds",
			Help:    "Time to serve an HTTP request, by route template.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
	m.Registry.MustRegister(m.decisions, m.refusals, m.latency, m.failOpen, m.severity,
		m.buckets, m.blocked, m.negative, m.worstFill, m.worstTokens,
		m.httpRequests, m.httpDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return m
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
		if b.Reason != throttle.ReasonNone {
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

// SetBuckets sets the bucket gauges from counts of the severity now.
func (m *Metrics) SetBuckets(c throttle.SeverityCounts) {
	for _, sev := range throttle.Severities {
		m.buckets.WithLabelValues(sev.String()).Set(float64(c.BySeverity[sev]))
	}
	m.blocked.Set(float64(c.Blocked))
	m.negative.Set(float64(c.Negative))
	m.worstFill.Reset()
	m.worstTokens.Reset()
	for policy, st := range c.Worst {
		if st.Policy.Capacity > 0 {
			m.worstFill.WithLabelValues(policy).Set(float64(st.Tokens) / float64(st.Policy.Capacity))
		}
		m.worstTokens.WithLabelValues(policy).Set(float64(st.Tokens))
	}
}

// metricsCountTimeout bounds the count of buckets a scrape runs.
const metricsCountTimeout = 5 * time.Second

// serveMetrics is GET /metrics in the Prometheus text format. The bucket
// gauges are computed at scrape time (Limiter.CountNow); when that fails
// the scrape still answers, with the gauges of the last good count.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.Limiter != nil {
		ctx, cancel := context.WithTimeout(r.Context(), metricsCountTimeout)
		c, err := s.Limiter.CountNow(ctx, throttle.Filter{})
		cancel()
		if err != nil {
			s.Logger.Warn("metrics: count buckets", slog.Any("error", err))
		} else {
			s.Metrics.SetBuckets(c)
		}
	}
	s.Metrics.handler.ServeHTTP(w, r)
	return nil
}
