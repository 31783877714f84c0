package web

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricLabels maps each metric m serves to its variable labels, read from
// the collectors' descriptions ("variableLabels: {policy,result}").
func MetricLabels(m *Metrics) map[string][]string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range []prometheus.Collector{m.decisions, m.refusals, m.latency, m.failOpen, m.severity,
			m.buckets, m.blocked, m.negative, m.worstFill, m.worstTokens, m.remoteRefusals, m.buildInfo, m.httpRequests, m.httpDuration} {
			c.Describe(ch)
		}
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		const p = "variableLabels: {"
		var labels []string
		if i := strings.Index(s, p); i >= 0 {
			rest := s[i+len(p):]
			if list := rest[:strings.IndexByte(rest, '}')]; list != "" {
				labels = strings.Split(list, ",")
			}
		}
		out[descName(d)] = labels
	}
	return out
}
