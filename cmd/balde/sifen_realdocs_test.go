package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
)

// The tests below feed balde documents made by third-party tools (issue 11):
// the DE generator facturacionelectronicapy-xmlgen, signed with
// facturacionelectronicapy-xmlsign and a certificate the test makes, and
// the public SOAP client facturacionelectronicapy-setapi. They live in
// test-tools/ (package-lock.json pinned; `npm ci --prefix test-tools`, which
// make test and .ci/run do). Without Node, openssl or the installed tools the
// tests skip, saying so.

// testTools returns the test-tools directory, or skips the test.
func testTools(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "test-tools"))
	require.NoError(t, err)
	for _, bin := range []string{"node", "openssl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIP (real SIFEN documents): %s is not installed", bin)
		}
	}
	for _, pkg := range []string{"facturacionelectronicapy-xmlgen", "facturacionelectronicapy-xmlsign", "facturacionelectronicapy-setapi"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			t.Skipf("SKIP (real SIFEN documents): %s is not installed: run `npm ci --prefix test-tools` (make test does)", pkg)
		}
	}
	return dir
}

// testP12 makes a self-signed certificate and key as a PKCS#12 file.
func testP12(t *testing.T) (file, password string) {
	t.Helper()
	dir := t.TempDir()
	key, crt, p12 := filepath.Join(dir, "k.pem"), filepath.Join(dir, "c.pem"), filepath.Join(dir, "t.p12")
	out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
		"-days", "2", "-subj", "/CN=balde test/serialNumber=RUC80069563-1").CombinedOutput()
	require.NoError(t, err, string(out))
	out, err = exec.Command("openssl", "pkcs12", "-export", "-inkey", key, "-in", crt, "-out", p12, "-passout", "pass:balde").CombinedOutput()
	require.NoError(t, err, string(out))
	return p12, "balde"
}

// genDoc is one DE the generator made.
type genDoc struct {
	File string `json:"file"`
	CDC  string `json:"cdc"`
	RUC  string `json:"ruc"`
	Tipo int    `json:"tipo"`
}

type genSpec struct {
	RUC      string `json:"ruc"`
	Tipo     int    `json:"tipo"`
	Numero   int    `json:"numero"`
	Asociado string `json:"asociado,omitempty"`
}

// generate runs test-tools/gen.js.
// generateSet makes the suite's seven documents, numbered from first:
// facturas of three RUCs (two of 80069563-1), a nota de remisión, then a
// nota de crédito and a nota de débito on the first two facturas.
func generateSet(t *testing.T, first int) []genDoc {
	t.Helper()
	tools := testTools(t)
	p12, pw := testP12(t)
	docs := generate(t, tools, p12, pw,
		genSpec{RUC: "80069563-1", Tipo: 1, Numero: first},
		genSpec{RUC: "80069563-1", Tipo: 1, Numero: first + 1},
		genSpec{RUC: "88888801-5", Tipo: 1, Numero: first + 2},
		genSpec{RUC: "800695-4", Tipo: 1, Numero: first + 3},
		genSpec{RUC: "80069563-1", Tipo: 7, Numero: first + 4},
	)
	notes := generate(t, tools, p12, pw,
		genSpec{RUC: "80069563-1", Tipo: 5, Numero: first + 5, Asociado: docs[0].CDC},
		genSpec{RUC: "80069563-1", Tipo: 6, Numero: first + 6, Asociado: docs[1].CDC},
	)
	return append(docs, notes...)
}

func generate(t *testing.T, tools, p12, password string, specs ...genSpec) []genDoc {
	t.Helper()
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
	var docs []genDoc
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var d genDoc
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d))
		docs = append(docs, d)
	}
	require.Len(t, docs, len(specs))
	return docs
}

// xdeRecorder keeps the xDE of every lot a handler receives.
type xdeRecorder struct {
	next http.Handler
	mu   sync.Mutex
	xdes []string
}

var xdeRE = regexp.MustCompile(`<(?:\w+:)?xDE>([^<]*)</`)

func (r *xdeRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if strings.HasSuffix(req.URL.Path, sifensim.RecepcionPath) {
		body, _ := io.ReadAll(req.Body)
		if m := xdeRE.FindSubmatch(body); m != nil {
			r.mu.Lock()
			r.xdes = append(r.xdes, string(m[1]))
			r.mu.Unlock()
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.next.ServeHTTP(w, req)
}

// verifySignatures runs test-tools/verify.js over lots (base64 ZIPs) and
// returns its lines.
func verifySignatures(t *testing.T, tools string, xdes []string) (lines []string, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "verify.js"))
	cmd.Stdin = strings.NewReader(strings.Join(xdes, "\n") + "\n")
	out, err := cmd.Output()
	return strings.Split(strings.TrimSpace(string(out)), "\n"), err == nil
}

// TestRealDocumentsThroughSifenSend: facturas of three RUCs, a nota de
// crédito, a nota de débito and a nota de remisión made by the real
// generator and signed go through sifen-send to the simulator (which reads
// them with its own code), are approved, and the signatures inside the
// zips as sent still verify.
func TestRealDocumentsThroughSifenSend(t *testing.T) {
	tools := testTools(t)
	docs := generateSet(t, 1)
	dir := t.TempDir()
	for _, d := range docs {
		b, err := os.ReadFile(d.File)
		require.NoError(t, err)
		writeFile(t, dir, filepath.Base(d.File), b)
	}

	clock := newFakeTime(testEpoch)
	sim, err := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Interval: time.Second, Processing: time.Minute, Logger: discardLogger})
	require.NoError(t, err)
	rec := &xdeRecorder{next: sim}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"BALDE_SIFEN_URL": hs.URL + "/{env}", "BALDE_DB": db, "SIFEN_THROTTLE_SECONDS": "1"}

	code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--follow", dir)
	require.Equal(t, ExitOK, code, stderr+stdout)
	st := sim.Stats()
	require.Equal(t, int64(0), st.ByCode[sifensim.CodeLotNotQueued], "remote refusals")
	require.Equal(t, int64(6), st.Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued), "lots: 3 RUCs of facturas, and one per type of 80069563")
	require.Equal(t, map[string]int{"approved": len(docs)}, documentStatuses(t, db), stdout)
	for _, d := range docs {
		require.Contains(t, stdout, "cdc="+d.CDC)
	}

	lines, ok := verifySignatures(t, tools, rec.xdes)
	require.True(t, ok, strings.Join(lines, "\n"))
	require.Len(t, lines, len(docs))

	// The check can fail: one changed byte in a signed DE breaks it.
	z, err := base64.StdEncoding.DecodeString(rec.xdes[0])
	require.NoError(t, err)
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	require.NoError(t, err)
	f, err := zr.File[0].Open()
	require.NoError(t, err)
	lot, err := io.ReadAll(f)
	require.NoError(t, err)
	tampered, err := sifen.ZipLote(bytes.Replace(lot, []byte("Servicio de desarrollo"), []byte("Servicio de desarrollX"), 1))
	require.NoError(t, err)
	_, ok = verifySignatures(t, tools, []string{base64.StdEncoding.EncodeToString(tampered)})
	require.False(t, ok, "a tampered DE must not verify")
}

// TestRealDocumentsThroughTheWebUpload: facturas of three RUCs, a nota de
// remisión, a nota de crédito and a nota de débito made by the real
// generator and signed are uploaded to serve's documents page and sent
// through the web: the RUC with every type by "Send all drafts of RUC …"
// (one lot per press, one type per lot), the other two with each
// document's Send button. The simulator (behind a recorder) queues every
// lot without a refusal, and the signatures inside the zips it received
// still verify.
func TestRealDocumentsThroughTheWebUpload(t *testing.T) {
	tools := testTools(t)
	docs := generateSet(t, 11)

	sim, err := sifensim.NewServer(sifensim.Config{Interval: 50 * time.Millisecond, Processing: time.Minute, Logger: discardLogger})
	require.NoError(t, err)
	rec := &xdeRecorder{next: sim}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw",
		"BALDE_SIFEN_URL": hs.URL + "/{env}", "SIFEN_THROTTLE_SECONDS": "0.1", "BALDE_INBOUND_IP_LIMIT": "0"})
	c := newAdminClient(t, sm.url, "admin", "pw")
	for _, d := range docs {
		b, err := os.ReadFile(d.File)
		require.NoError(t, err)
		resp, page := c.upload(b, "test")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, page)
	}
	require.Len(t, c.documentIDs(), len(docs))

	// Each document's Send button, for the RUCs of one factura each.
	for _, ruc := range []string{"88888801", "800695"} {
		resp, page := c.get("/documents?env=test&ruc=" + ruc)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		ids := regexp.MustCompile(`/documents/(\d+)/send`).FindAllStringSubmatch(page, -1)
		require.Len(t, ids, 1, page)
		resp, _ = c.postForm("/documents/"+ids[0][1]+"/send", nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/documents/"+ids[0][1]+"?result=sent", resp.Header.Get("Location"))
	}

	// "Send all drafts of RUC 80069563": a lot per press (facturas, then
	// remisión, crédito, débito), pressed again while the interval holds
	// it back, until no draft is left.
	form := url.Values{"ruc": {"80069563-1"}, "env": {"test"}}
	lots, deadline := 0, time.Now().Add(30*time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "the drafts of 80069563 were not all sent in 30 s (%d lots)", lots)
		resp, page := c.postForm("/documents/send-ruc", form)
		if resp.StatusCode == http.StatusBadRequest {
			require.Contains(t, page, "no draft of RUC 80069563")
			break
		}
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, page)
		switch loc := resp.Header.Get("Location"); {
		case strings.Contains(loc, "result=sent"):
			lots++
		case strings.Contains(loc, "result=blocked"):
			time.Sleep(20 * time.Millisecond)
		default:
			t.Fatalf("send all drafts: %s", loc)
		}
	}
	require.Equal(t, 4, lots, "one lot per DE type")
	require.Equal(t, map[string]int{"sent": len(docs)}, documentStatuses(t, db))
	st := sim.Stats()
	require.Equal(t, int64(0), st.ByCode[sifensim.CodeLotNotQueued], "remote refusals")
	require.Equal(t, int64(6), st.Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued))

	// What the simulator received: every DE, its signature intact.
	rec.mu.Lock()
	xdes := slices.Clone(rec.xdes)
	rec.mu.Unlock()
	require.Len(t, xdes, 6)
	lines, ok := verifySignatures(t, tools, xdes)
	require.True(t, ok, strings.Join(lines, "\n"))
	require.Len(t, lines, len(docs))
	for _, d := range docs {
		require.Contains(t, strings.Join(lines, "\n"), d.CDC)
	}
}

// TestSetapiAgainstSifensim: the public SOAP client, which no one here
// wrote, sends a lot (siRecepLoteDE, Content-Type application/xml, its own
// rLoteDE) to the simulator and queries it (siConsLoteDE).
func TestSetapiAgainstSifensim(t *testing.T) {
	tools := testTools(t)
	p12, pw := testP12(t)
	docs := generate(t, tools, p12, pw,
		genSpec{RUC: "80069563-1", Tipo: 1, Numero: 21},
		genSpec{RUC: "80069563-1", Tipo: 1, Numero: 22},
	)
	clock := newFakeTime(testEpoch)
	sim, err := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Processing: time.Minute, Logger: discardLogger})
	require.NoError(t, err)
	hs := httptest.NewServer(sim)
	t.Cleanup(hs.Close)

	run := func(args ...string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(tools, "setapi.js"), hs.URL + "/test"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		var v map[string]any
		require.NoError(t, json.Unmarshal(out, &v), string(out))
		return v
	}
	sent := run("recibeLote", p12, pw, docs[0].File, docs[1].File)
	res, ok := sent["ns2:rResEnviLoteDe"].(map[string]any)
	require.True(t, ok, "%v", sent)
	require.Equal(t, sifensim.CodeLotQueued, res["ns2:dCodRes"], "%v", res)
	lot, _ := res["ns2:dProtConsLote"].(string)
	require.Len(t, lot, 17)

	clock.Advance(2 * time.Minute)
	got := run("consultaLote", p12, pw, lot)
	cons, ok := got["ns2:rResEnviConsLoteDe"].(map[string]any)
	require.True(t, ok, "%v", got)
	require.Equal(t, sifensim.CodeLotDone, cons["ns2:dCodResLot"], "%v", cons)
	results, _ := cons["ns2:gResProcLote"].([]any)
	require.Len(t, results, 2, "%v", cons)
	for i, r := range results {
		m := r.(map[string]any)
		require.Equal(t, docs[i].CDC, m["ns2:id"])
		require.Equal(t, sifensim.ResultApproved, m["ns2:dEstRes"])
	}
	require.Equal(t, int64(1), sim.Stats().Count(sifensim.ServiceRecepcionLote, "test", "80069563", sifensim.CodeLotQueued))
}
