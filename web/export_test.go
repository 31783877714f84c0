package web

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// PolicyInboundClient is the inbound policy of a gateway's clients.
const PolicyInboundClient = policyInboundClient

// SetSummaryWait sets how long a page waits for the recount of a summary
// past its time-to-live (defaultSummaryWait when not set).
func (s *Server) SetSummaryWait(d time.Duration) { s.summary.wait = d }

// MetricNames lists the fully-qualified names of balde's own metrics.
func MetricNames(m *Metrics) []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range []prometheus.Collector{m.decisions, m.refusals, m.latency, m.failOpen, m.severity,
			m.buckets, m.blocked, m.negative, m.worstFill, m.worstTokens, m.remoteRefusals, m.buildInfo, m.httpRequests, m.httpDuration, m.gatewayRequests} {
			c.Describe(ch)
		}
		close(ch)
	}()
	var out []string
	for d := range ch {
		out = append(out, descName(d))
	}
	return out
}

// descName digs the fqName out of a Desc's String ("Desc{fqName: \"x\", ...").
func descName(d *prometheus.Desc) string {
	s := d.String()
	const p = `fqName: "`
	i := indexOf(s, p)
	if i < 0 {
		return ""
	}
	s = s[i+len(p):]
	return s[:indexOf(s, `"`)]
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

const AntiScanWindow = antiScanWindow
const DefaultInboundAdminLimit = defaultInboundAdminLimit
const DictGatewayPaymentsPath = dictGatewayPaymentsPath

// FormatBucketWait renders a bucket's block and cooldown in English.
func FormatBucketWait(st throttle.BucketState) string {
	return view.FormatBucketWaitIn(i18n.New(i18n.English, nil), st)
}

// Watch is the reload loop of GatewayHandler, with its period and signals.
func (c *GatewayClients) Watch(ctx context.Context, every time.Duration, signals <-chan os.Signal) {
	c.watch(ctx, every, signals)
}

// SifenSender is the send path of the documents pages (Server.Sifen).
type SifenSender = sifenSender

// SetBuckets sets the bucket gauges from a count of every bucket.
func (m *Metrics) SetBuckets(c inspect.SeverityCounts) { m.setBuckets(c) }

const (
	PolicyInboundToken = policyInboundToken
	PolicyInboundAdmin = policyInboundAdmin
	TokenHeader        = defaultTokenHeader
)

// Port is the port Open listens on.
func (s *Server) Port() int {
	if s.ln == nil {
		return 0
	}
	return s.ln.Addr().(*net.TCPAddr).Port
}
