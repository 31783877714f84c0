package web_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// benchCPF returns the n-th valid CPF of a series (payers of the benchmark).
func benchCPF(n int) string {
	s := fmt.Sprintf("%09d", 300000000+n)
	for _, length := range []int{9, 10} {
		sum := 0
		for i := range length {
			sum += int(s[i]-'0') * (length + 1 - i)
		}
		s += fmt.Sprint(sum * 10 % 11 % 10)
	}
	return s
}

// BenchmarkDictGateway measures the latency the DICT gateway adds to a
// getEntry (a found key, 200): the same lookup is sent directly to the
// simulator and through the gateway (SQLite mirror: reserve, forward,
// settle, lookup recorded), alternating one for one in the same loop so
// that both see the same machine. It reports each path's p50 and p99 and
// the added latency (gateway minus direct, per percentile) in µs.
func BenchmarkDictGateway(b *testing.B) {
	w := newGatewayWorld(b, sqlstore.SQLite)
	g := w.newGateway(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}
	send := func(base string, n int) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v2/entries/maria.souza@example.com", nil)
		req.Header.Set("PI-RequestingParticipant", gatewayISPB)
		req.Header.Set("PI-PayerId", benchCPF(n%1000))
		req.Header.Set("PI-EndToEndId", e2eID(n))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		elapsed := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: status %d", base, resp.StatusCode)
		}
		return elapsed
	}
	// Warm both connections.
	send(w.simURL, 1<<30)
	send(g.URL, 1<<30+1)
	direct := make([]time.Duration, 0, b.N)
	gateway := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		direct = append(direct, send(w.simURL, 2*i))
		gateway = append(gateway, send(g.URL, 2*i+1))
	}
	b.StopTimer()
	slices.Sort(direct)
	slices.Sort(gateway)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds())
	}
	b.ReportMetric(pct(direct, 0.50), "direct-p50-µs")
	b.ReportMetric(pct(direct, 0.99), "direct-p99-µs")
	b.ReportMetric(pct(gateway, 0.50), "gateway-p50-µs")
	b.ReportMetric(pct(gateway, 0.99), "gateway-p99-µs")
	b.ReportMetric(pct(gateway, 0.50)-pct(direct, 0.50), "added-p50-µs")
	b.ReportMetric(pct(gateway, 0.99)-pct(direct, 0.99), "added-p99-µs")
}
