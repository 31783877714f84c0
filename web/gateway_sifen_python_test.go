package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// pythonDocs returns, per RUC, six DE files: real documents (xmlgen and
// xmlsign) when the npm tools are installed, otherwise balde's test
// documents (sifentest), saying so; and the PEM certificate of the .p12
// they were signed with ("" without the tools).
func pythonDocs(t *testing.T) ([][]realDoc, string) {
	t.Helper()
	tools, missing := findTools(t)
	if missing == "" {
		p12, pw, cert := makeP12(t)
		return generateInvoices(t, tools, p12, pw, 201, 6), cert
	}
	t.Logf("%s: the script sends balde's test documents (sifentest) instead of xmlgen's", missing)
	dir := t.TempDir()
	out := make([][]realDoc, 3)
	for i, ruc := range []string{"80069563", "80012345", "80000005"} {
		for k := range 6 {
			d := sifentest.Doc{RUC: ruc, Number: 100*i + k + 1}
			name := filepath.Join(dir, fmt.Sprintf("de-%s-%d.xml", ruc, k))
			require.NoError(t, os.WriteFile(name, d.File(), 0o644))
			out[i] = append(out[i], realDoc{File: name, CDC: d.CDC(), RUC: ruc})
		}
	}
	return out, ""
}

// scripts/sifen_gateway_send.py (the standard library only, written like
// a recepcion_lote() tool) sends DEs of three RUCs through one gateway
// from four processes at once, over HTTPS with its bearer token and
// --once: it sends each request once and never retries, as a client
// written for SIFEN alone; the gateway's default hold takes its requests
// in turn. Two processes send lots (siRecepLoteDE, a lot of two per RUC
// each), two single DEs (siRecepDE, one per RUC each): every lot queued
// and every DE approved, 0 × 0301 at the simulator, and the results read
// back through the gateway by the same script (siResultLoteDE, siConsDE):
// each of the 18 DEs approved once. With BALDE_RELIABILITY the RUC's
// interval is SIFEN's 10 s.
func TestSifenGatewayServesPythonProcesses(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP (the Python script through the gateway): python3 is not installed")
	}
	docs, cert := pythonDocs(t)
	if cert == "" {
		_, _, cert = makeP12(t)
	}
	w := newClientsWorld(t, cert, sifenInterval(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script := filepath.Join("..", "scripts", "sifen_gateway_send.py")
	run := func(mode string, items ...string) []map[string]any {
		args := []string{script, "--url", w.base, "--token", pythonToken, "--ca", w.caFile, "--once", "--timeout", "90", mode}
		cmd := exec.CommandContext(ctx, python, append(args, items...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s\n%s", out, stderr.String())
		var lines []map[string]any
		for _, raw := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var l map[string]any
			require.NoError(t, json.Unmarshal(raw, &l), "%s", raw)
			lines = append(lines, l)
		}
		return lines
	}

	var mu sync.Mutex
	var lots []string
	approved := map[string]int{}
	var wg sync.WaitGroup
	for p := range 2 {
		var lotFiles, deFiles []string
		for _, rd := range docs {
			lotFiles = append(lotFiles, rd[3*p].File, rd[3*p+1].File)
			deFiles = append(deFiles, rd[3*p+2].File)
		}
		wg.Go(func() {
			out := run("lot", lotFiles...)
			require.Len(t, out, 3)
			mu.Lock()
			defer mu.Unlock()
			for _, l := range out {
				require.Equal(t, sifensim.CodeLotQueued, l["code"], "%v", l)
				lots = append(lots, l["lot_number"].(string))
			}
		})
		wg.Go(func() {
			out := run("de", deFiles...)
			require.Len(t, out, 3)
			mu.Lock()
			defer mu.Unlock()
			for _, l := range out {
				require.Equal(t, sifensim.ResultApproved, l["result"], "%v", l)
				approved[l["cdc"].(string)]++
			}
		})
	}
	wg.Wait()
	st := w.sim.Stats()
	require.Zero(t, st.Count("", "", "", sifen.CodeLotNotQueued), "0301s: %+v", st.Counts)
	require.Equal(t, int64(6), st.Count(sifen.ServiceRecepcionLote, "", "", ""), "lots that reached SIFEN")
	require.Equal(t, int64(6), st.Count(sifensim.ServiceRecepcionDE, "", "", ""), "single DEs that reached SIFEN")

	var results []map[string]any
	require.Eventually(t, func() bool {
		results = run("results", lots...)
		for _, r := range results {
			if r["code"] != sifensim.CodeLotDone {
				return false
			}
		}
		return true
	}, time.Minute, 300*time.Millisecond, "every lot processed")
	for _, r := range results {
		for _, res := range r["results"].([]any) {
			res := res.(map[string]any)
			require.Equal(t, sifensim.ResultApproved, res["result"], "%v", res)
			approved[res["cdc"].(string)]++
		}
	}
	require.Len(t, approved, 18)
	var cdcs []string
	for cdc, n := range approved {
		require.Equal(t, 1, n, "%s approved %d times", cdc, n)
		cdcs = append(cdcs, cdc)
	}
	for _, l := range run("cdc", cdcs...) {
		require.Equal(t, sifensim.CodeDEFound, l["code"], "%v", l)
	}
}
