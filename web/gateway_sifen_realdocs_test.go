package web_test

import (
	"bufio"
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
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// The tests below drive the SIFEN gateway the way issuers not written in
// Go do, with real documents: made by facturacionelectronicapy-xmlgen and
// signed by facturacionelectronicapy-xmlsign (test-tools/gen.js) with a
// certificate the test makes, then sent by facturacionelectronicapy-setapi
// from Node processes or by scripts/sifen_gateway_send.py. The npm tools
// are pinned in test-tools/ (`npm ci --prefix test-tools`, which make test
// and .ci/run do); without Node, openssl or the tools the tests skip,
// saying so.

// gatewayRUCs are three issuers whose documents the tests send.
var gatewayRUCs = []string{"80069563-1", "88888801-5", "800695-4"}

// realDoc is one DE test-tools/gen.js made.
type realDoc struct {
	File string `json:"file"`
	CDC  string `json:"cdc"`
	RUC  string `json:"ruc"`
}

// toolsDir returns test-tools/ with the npm tools installed, or skips.
func toolsDir(t *testing.T) string {
	t.Helper()
	dir, missing := findTools(t)
	if missing != "" {
		t.Skipf("SKIP (real SIFEN documents through the gateway): %s", missing)
	}
	return dir
}

// findTools returns test-tools/, and what is missing to run its npm
// tools ("" when nothing).
func findTools(t *testing.T) (dir, missing string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "test-tools"))
	require.NoError(t, err)
	for _, bin := range []string{"node", "openssl"} {
		if _, err := exec.LookPath(bin); err != nil {
			return dir, bin + " is not installed"
		}
	}
	for _, pkg := range []string{"facturacionelectronicapy-xmlgen", "facturacionelectronicapy-xmlsign", "facturacionelectronicapy-setapi"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			return dir, pkg + " is not installed: run `npm ci --prefix test-tools` (make test does)"
		}
	}
	return dir, ""
}

// makeP12 makes a self-signed certificate and key as a PKCS#12 file; cert
// is the certificate alone (PEM), CN "balde test".
func makeP12(t *testing.T) (file, password, cert string) {
	t.Helper()
	dir := t.TempDir()
	key, crt, p12 := filepath.Join(dir, "k.pem"), filepath.Join(dir, "c.pem"), filepath.Join(dir, "t.p12")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
		"-days", "2", "-subj", "/CN=balde test/serialNumber=RUC80069563-1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.CommandContext(ctx, "openssl", "pkcs12", "-export", "-inkey", key, "-in", crt, "-out", p12, "-passout", "pass:balde").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return p12, "balde", crt
}

// clientsWorld is a SIFEN gateway with its default hold in front of the
// simulator on the real clock, both with the RUC interval interval, served
// over HTTPS to two clients: "setapi", by the certificate of the .p12 (CN
// "balde test", its own CA), and "python", by pythonToken. caFile is the
// CA of the gateway's certificate.
type clientsWorld struct {
	*sifenGatewayWorld
	base, caFile string
}

const pythonToken = "python-client-token"

func newClientsWorld(t *testing.T, p12Cert string, interval time.Duration) clientsWorld {
	t.Helper()
	w := newIntervalSifenGatewayWorld(t, sqlstore.SQLite, -1, interval, interval)
	p := newPKI(t)
	pem, err := os.ReadFile(p12Cert)
	require.NoError(t, err)
	require.True(t, p.pool.AppendCertsFromPEM(pem))
	clients, err := web.LoadGatewayClients(clientsFile(t, "setapi cn:balde test", "python "+tokenDigest(pythonToken)), nil)
	require.NoError(t, err)
	w.configure = func(c *web.SifenGatewayConfig) { c.Authenticate = clients.Authenticate }
	w.serve = p.serveTLS
	return clientsWorld{sifenGatewayWorld: w, base: w.newGateway(t, 0), caFile: p.caFile}
}

// sifenInterval is the RUC interval of the tests of clients that do not
// retry: SIFEN's own 10 s with BALDE_RELIABILITY (a minute or two), a
// short one otherwise.
func sifenInterval(t *testing.T) time.Duration {
	if os.Getenv("BALDE_RELIABILITY") != "" {
		t.Log("BALDE_RELIABILITY: SIFEN's own interval, 10 s")
		return 10 * time.Second
	}
	return 300 * time.Millisecond
}

// generateInvoices makes, per RUC of gatewayRUCs, n signed invoices
// numbered from first (distinct CDCs), with the real generator.
func generateInvoices(t *testing.T, tools, p12, password string, first, n int) [][]realDoc {
	t.Helper()
	type spec struct {
		RUC    string `json:"ruc"`
		Tipo   int    `json:"tipo"`
		Numero int    `json:"numero"`
	}
	var specs []spec
	for i, ruc := range gatewayRUCs {
		for k := range n {
			specs = append(specs, spec{RUC: ruc, Tipo: 1, Numero: first + 100*i + k})
		}
	}
	in, err := json.Marshal(map[string]any{"p12": p12, "password": password, "out": t.TempDir(), "docs": specs})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "gen.js"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	byRUC := make([][]realDoc, len(gatewayRUCs))
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		var d realDoc
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d))
		byRUC[i/n] = append(byRUC[i/n], d)
	}
	require.Len(t, byRUC[len(byRUC)-1], n)
	return byRUC
}

// oneOrMany reads a value xml2js (explicitArray false) wrote as an object
// or as an array of them.
func oneOrMany[T any](t *testing.T, raw json.RawMessage) []T {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var many []T
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	var one T
	require.NoError(t, json.Unmarshal(raw, &one), "%s", raw)
	return []T{one}
}

// setapiLine is one line of test-tools/setapi_gateway.js.
type setapiLine struct {
	Op    string `json:"op"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Body  struct {
		Lot  map[string]any `json:"ns2:rResEnviLoteDe"`
		Prot struct {
			Prot map[string]any `json:"ns2:rProtDe"`
		} `json:"ns2:rRetEnviDe"`
		LotResult struct {
			Code    string          `json:"ns2:dCodResLot"`
			Results json.RawMessage `json:"ns2:gResProcLote"`
		} `json:"ns2:rResEnviConsLoteDe"`
		ConsDE map[string]any `json:"ns2:rEnviConsDeResponse"`
	} `json:"body"`
}

// facturacionelectronicapy-setapi (npm), unchanged but for the host of its
// hardcoded SIFEN URLs, sends real documents — xmlgen output signed by
// xmlsign — of three RUCs from two Node processes at once through the
// gateway, over HTTPS with its own certificate as the gateway client's
// credential (the gateway's CA in its caCert) and its own timeout (90 s):
// per process and RUC a lot of two (recibeLote, siRecepLoteDE) and a
// single DE (recibe, siRecepDE), and a second DE of one RUC, all
// concurrently: 14 requests, five of each of two RUCs. setapi does not retry, and
// reads a 409 or 429 fault as a successful call; with the gateway's
// default hold every request is held until its RUC may send. Every lot is
// answered 0300 and every single DE approved, as SIFEN writes them; the
// simulator sees 0 × 0301 on any service; and the results are read back
// through the gateway with setapi (consultaLote, siResultLoteDE, and
// consulta, siConsDE): each of the 20 DEs approved exactly once. With
// BALDE_RELIABILITY the RUC's interval is SIFEN's 10 s (with a 30 s hold,
// the default before, 10 of 14 requests ended 429 with nothing sent).
func TestSifenGatewayServesSetapi(t *testing.T) {
	tools := toolsDir(t)
	p12, pw, cert := makeP12(t)
	docs := generateInvoices(t, tools, p12, pw, 1, 7) // per RUC: process 0 takes 0-2, process 1 takes 3-5; 6 of the first two RUCs, an extra DE
	w := newClientsWorld(t, cert, sifenInterval(t))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(spec map[string]any) []setapiLine {
		spec["gateway"], spec["p12"], spec["password"], spec["ca"] = w.base, p12, pw, w.caFile
		in, err := json.Marshal(spec)
		require.NoError(t, err)
		cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "setapi_gateway.js"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(tools, "node_modules"))
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s", stderr.String())
		var lines []setapiLine
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var l setapiLine
			require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "%s", sc.Bytes())
			require.True(t, l.OK, "%s", sc.Bytes())
			lines = append(lines, l)
		}
		return lines
	}

	outs := make([][]setapiLine, 2)
	var wg sync.WaitGroup
	for p := range 2 {
		var lots, des []map[string]any
		for i, rd := range docs {
			mine := rd[3*p : 3*p+3]
			lots = append(lots, map[string]any{"id": 10*p + i + 1, "files": []string{mine[0].File, mine[1].File}})
			des = append(des, map[string]any{"id": 10*p + i + 5, "file": mine[2].File})
		}
		// A third request of one RUC per process: five of that RUC in all.
		des = append(des, map[string]any{"id": 10*p + 9, "file": docs[1-p][6].File})
		wg.Go(func() { outs[p] = run(map[string]any{"lots": lots, "des": des}) })
	}
	wg.Wait()

	var lotNumbers []string
	approved := map[string]int{}
	for _, out := range outs {
		require.Len(t, out, 7)
		for _, l := range out {
			switch l.Op {
			case "recibeLote":
				require.Equal(t, sifensim.CodeLotQueued, l.Body.Lot["ns2:dCodRes"], "%+v", l.Body.Lot)
				lotNumbers = append(lotNumbers, fmt.Sprint(l.Body.Lot["ns2:dProtConsLote"]))
			case "recibe":
				require.Equal(t, sifensim.ResultApproved, l.Body.Prot.Prot["ns2:dEstRes"], "%+v", l.Body.Prot.Prot)
				approved[fmt.Sprint(l.Body.Prot.Prot["ns2:id"])]++
			}
		}
	}
	require.Len(t, lotNumbers, 6)
	st := w.sim.Stats()
	require.Zero(t, st.Count("", "", "", sifen.CodeLotNotQueued), "0301s: %+v", st.Counts)
	require.Equal(t, int64(6), st.Count(sifen.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued))
	require.Equal(t, int64(8), st.Count(sifensim.ServiceRecepcionDE, "", "", ""))

	// The results, read through the gateway once the lots are processed
	// (100 ms at the simulator) and due (200 ms after their send).
	var results []setapiLine
	require.Eventually(t, func() bool {
		results = run(map[string]any{"lotResults": lotNumbers})
		for _, l := range results {
			if l.Body.LotResult.Code != sifensim.CodeLotDone {
				return false
			}
		}
		return true
	}, time.Minute, 300*time.Millisecond, "every lot processed")
	for _, l := range results {
		for _, r := range oneOrMany[map[string]any](t, l.Body.LotResult.Results) {
			require.Equal(t, sifensim.ResultApproved, r["ns2:dEstRes"], "%+v", r)
			approved[fmt.Sprint(r["ns2:id"])]++
		}
	}
	require.Len(t, approved, 20, "every DE has a result")
	for cdc, n := range approved {
		require.Equal(t, 1, n, "%s approved %d times", cdc, n)
	}
	var all []string
	for cdc := range approved {
		all = append(all, cdc)
	}
	for _, l := range run(map[string]any{"cdcs": all}) {
		require.Equal(t, sifensim.CodeDEFound, l.Body.ConsDE["ns2:dCodRes"], "%+v", l.Body.ConsDE)
	}
	require.Zero(t, w.sim.Stats().Count("", "", "", sifen.CodeLotNotQueued), "0301s")
}
