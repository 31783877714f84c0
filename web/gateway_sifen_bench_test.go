package web_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// BenchmarkSifenGateway measures the latency the SIFEN gateway adds per
// request, for each kind of service: a lot of one DE (siRecepLoteDE: the
// DE imported, the RUC's gate taken with its hold, the lot claimed, sent,
// the answer recorded on the gate and the document — five durable commits
// on SQLite), a single DE (siRecepDE, the same protocol) and a
// consultation passed through (siConsDE, no commit). Each request is sent
// to the simulator directly and through the gateway, alternating one for
// one in the same loop, so both paths see the same machine. Every request
// carries a new DE of one of 1,000 RUCs in turn (the gate's interval is
// 1 ms, the simulator's frequency rule off), so no request waits for a
// RUC. It reports each path's p50 and p99 and the added latency (gateway
// minus direct, per percentile) in µs.
func BenchmarkSifenGateway(b *testing.B) {
	sim, err := sifensim.NewServer(sifensim.Config{Interval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	w := &sifenGatewayWorld{now: throttle.SystemClock, policy: sifen.PolicyConfig{Interval: time.Millisecond}}
	w.start(b, sim, sqlstore.SQLite, time.Minute)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}
	doc := func(n int) sifentest.Doc {
		return sifentest.Doc{RUC: fmt.Sprint(10_000_000 + n%1000), Number: 1 + n/1000}
	}
	lot := func(n int) []byte {
		z, err := sifen.ZipLote(sifentest.Lote(doc(n)))
		if err != nil {
			b.Fatal(err)
		}
		body, err := sifen.MarshalSOAP(sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(z)})
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	single := func(n int) []byte {
		return soapEnvelope(`<rEnviDe xmlns="` + sifen.Namespace + `"><dId>1</dId><xDE>` + string(doc(n).XML()) + `</xDE></rEnviDe>`)
	}
	cons := func(n int) []byte { return consultaDE(doc(n).CDC()) }
	for _, svc := range []struct {
		name, path string
		body       func(n int) []byte
		want       string
	}{
		{sifen.ServiceRecepcionLote, sifen.RecepcionPath, lot, "<ns2:dCodRes>0300</ns2:dCodRes>"},
		{sifen.ServiceRecepcionDE, sifen.RecepcionDEPath, single, "<ns2:dEstRes>Aprobado</ns2:dEstRes>"},
		{sifen.ServiceConsultaDE, sifen.ConsultaPath, cons, "<ns2:dCodRes>04"},
	} {
		b.Run(svc.name, func(b *testing.B) {
			send := func(base string, body []byte) time.Duration {
				req, _ := http.NewRequest(http.MethodPost, base+svc.path, bytes.NewReader(body))
				req.Header.Set("Content-Type", sifen.SOAPContentType)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				elapsed := time.Since(start)
				if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(svc.want)) {
					b.Fatalf("%s%s: status %d: %s", base, svc.path, resp.StatusCode, data)
				}
				return elapsed
			}
			// Each sub-benchmark's DEs are new: numbers apart per service
			// and per run of the function (b.N grows).
			base := map[string]int{sifen.ServiceRecepcionLote: 0, sifen.ServiceRecepcionDE: 1 << 22, sifen.ServiceConsultaDE: 0}[svc.name]
			base += benchRound(svc.name) << 18
			send(w.simURL+"/test", svc.body(base))
			send(w.URL, svc.body(base+1))
			direct := make([]time.Duration, 0, b.N)
			gateway := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				direct = append(direct, send(w.simURL+"/test", svc.body(base+2+2*i)))
				gateway = append(gateway, send(w.URL, svc.body(base+3+2*i)))
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
		})
	}
}

// benchRounds counts the runs of each sub-benchmark's function (the
// testing package runs it again with a larger b.N), so that each run
// sends DEs not sent before.
var benchRounds = map[string]int{}

func benchRound(name string) int {
	benchRounds[name]++
	return benchRounds[name]
}
