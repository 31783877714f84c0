package web_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/audit/auditsql"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// tokenDigest is a clients file's sha256: credential of token.
func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// clientsFile writes a clients file and returns its path.
func clientsFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clients")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

// rewrite replaces the file at path, with a modification time that
// differs from the one before even on a coarse clock.
func rewrite(t *testing.T, path string, lines ...string) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)))
}

func TestLoadGatewayClients(t *testing.T) {
	for _, tc := range []struct {
		name, file, wantErr string
	}{
		{"NoClient", "# nobody yet\n", "no client"},
		{"NoCredential", "erp\n", "want NAME"},
		{"BadName", "erp/1 token:x\n", "client name"},
		{"BadDigest", "erp sha256:abc\n", "64 hex digits"},
		{"UnknownKind", "erp password:x\n", "not a credential"},
		{"TwiceTheSame", "erp token:x\nbatch token:x\n", "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := web.LoadGatewayClients(clientsFile(t, tc.file), nil)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	_, err := web.LoadGatewayClients(filepath.Join(t.TempDir(), "none"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)

	c, err := web.LoadGatewayClients(clientsFile(t, "# a comment", "erp "+tokenDigest("t1"), "erp token:t2", "batch cn:batch.example"), nil)
	require.NoError(t, err)
	require.True(t, c.Certificates())
	for token, want := range map[string]string{"t1": "erp", "t2": "erp", "t3": "", "": ""} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		name, ok := c.Authenticate(r)
		require.Equal(t, want, name, token)
		require.Equal(t, want != "", ok, token)
	}
}

// pki is a CA, the server certificate of 127.0.0.1 it issued, and client
// certificates by subject CN.
type pki struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	caFile string
	server tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "balde test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &pki{ca: ca, caKey: key, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	p.server = p.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	return p
}

// issue returns a certificate for cn signed by the CA.
func (p *pki) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveTLS serves h over TLS with the PKI's server certificate, asking
// clients for a certificate of its CA (a token still does without one).
func (p *pki) serveTLS(h http.Handler) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.VerifyClientCertIfGiven}
	s.StartTLS()
	return s
}

// client is an HTTP client that trusts the PKI's CA and shows cert, if any.
func (p *pki) client(cert *tls.Certificate) *http.Client {
	config := &tls.Config{RootCAs: p.pool}
	if cert != nil {
		config.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: config}}
}

// lotBody is a siRecepLoteDE request of docs.
func lotBody(t *testing.T, docs ...sifentest.Doc) []byte {
	t.Helper()
	z, err := sifen.ZipLote(sifentest.Lote(docs...))
	require.NoError(t, err)
	body, err := sifen.MarshalSOAP(sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(z)})
	require.NoError(t, err)
	return body
}

// do sends a request with the headers and returns its status and body.
func do(t *testing.T, c *http.Client, method, url string, body []byte, header map[string]string) (int, []byte, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data, resp.Header
}

// A request to either gateway without a client's credential is refused
// with 401 in the gateway's own format and reaches nothing; a client's
// bearer token, or its certificate issued by the client CA, gets through.
// A certificate of a client not listed (or of another CA) is not one.
func TestGatewaysServeOnlyTheirClients(t *testing.T) {
	p := newPKI(t)
	clients, err := web.LoadGatewayClients(clientsFile(t, "erp "+tokenDigest("erp-token"), "setapi cn:setapi.example"), nil)
	require.NoError(t, err)
	listed, unlisted := p.issue(t, "setapi.example", x509.ExtKeyUsageClientAuth), p.issue(t, "other.example", x509.ExtKeyUsageClientAuth)
	stranger := newPKI(t).issue(t, "setapi.example", x509.ExtKeyUsageClientAuth)

	t.Run("sifen", func(t *testing.T) {
		w := newSifenGatewayWorld(t, sqlstore.SQLite, -1)
		w.configure = func(c *web.SifenGatewayConfig) { c.Authenticate = clients.Authenticate }
		w.serve = p.serveTLS
		base := w.newGateway(t, -1)
		send := func(c *http.Client, n int, header map[string]string) (int, []byte, http.Header) {
			return do(t, c, http.MethodPost, base+sifen.RecepcionPath, lotBody(t, sifentest.Doc{RUC: "8000000" + string(rune('0'+n)), Number: n}),
				map[string]string{"Content-Type": sifen.SOAPContentType, "Authorization": header["Authorization"]})
		}
		for name, c := range map[string]*http.Client{"none": p.client(nil), "unlisted": p.client(&unlisted)} {
			status, body, h := send(c, 1, map[string]string{"Authorization": "Bearer wrong"})
			require.Equal(t, http.StatusUnauthorized, status, "%s: %s", name, body)
			require.Contains(t, string(body), "env:Fault", name)
			require.Contains(t, h.Get("WWW-Authenticate"), "Bearer", name)
		}
		_, err := p.client(&stranger).Get(base + sifen.RecepcionPath)
		require.Error(t, err, "a certificate of another CA fails the handshake")
		require.Zero(t, w.sim.Stats().Count("", "", "", ""), "nothing reached SIFEN")

		status, body, _ := send(p.client(nil), 2, map[string]string{"Authorization": "Bearer erp-token"})
		require.Equal(t, http.StatusOK, status, "%s", body)
		status, body, _ = send(p.client(&listed), 3, nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		require.Equal(t, int64(2), w.sim.Stats().Count(sifen.ServiceRecepcionLote, "", "", "0300"))
	})

	t.Run("dict", func(t *testing.T) {
		w := newGatewayWorld(t, sqlstore.SQLite)
		w.configure = func(c *web.DictGatewayConfig) { c.Authenticate = clients.Authenticate }
		g := w.newGateway(t)
		lookup := func(token string, n int) (int, []byte) {
			status, body, _ := do(t, http.DefaultClient, http.MethodGet, g.URL+"/api/v2/entries/+5561988880000", nil, map[string]string{
				"Authorization": "Bearer " + token, "PI-PayerId": "11144477735", "PI-EndToEndId": e2eID(n)})
			return status, body
		}
		status, body := lookup("wrong", 1)
		require.Equal(t, http.StatusUnauthorized, status, "%s", body)
		require.Contains(t, string(body), "urn:ietf:rfc:7807")
		require.Empty(t, w.stats(t), "nothing reached the DICT")
		state, err := g.limiter.State(context.Background(), w.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, gatewayISPB))
		require.NoError(t, err)
		require.False(t, state.Stored, "nothing was charged")
		status, body = lookup("erp-token", 2)
		require.Equal(t, http.StatusOK, status, "%s", body)
	})
}

// Rotation needs no restart: a client's new token works and its old one
// stops once the file is rewritten, whether the gateway is told (a
// signal, as balde gateway's SIGHUP) or sees the file change; a file
// caught half written keeps the clients as they were.
func TestGatewayClientsRotate(t *testing.T) {
	path := clientsFile(t, "erp "+tokenDigest("old"))
	var logs bytes.Buffer
	var mu sync.Mutex
	clients, err := web.LoadGatewayClients(path, slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { defer close(done); clients.Watch(ctx, 20*time.Millisecond, signals) }()
	defer func() { cancel(); <-done }()
	who := func(token string) string {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		name, _ := clients.Authenticate(r)
		return name
	}
	require.Equal(t, "erp", who("old"))

	// Both tokens while the client moves, then the new one alone.
	rewrite(t, path, "erp "+tokenDigest("old"), "erp "+tokenDigest("new"))
	waitfor.Until(t, 5*time.Second, func() bool { return who("new") == "erp" }, "the new token after the file changed")
	require.Equal(t, "erp", who("old"))
	rewrite(t, path, "erp "+tokenDigest("new"))
	waitfor.Until(t, 5*time.Second, func() bool { return who("old") == "" }, "the old token removed")

	// A broken file is refused and the clients stay.
	rewrite(t, path, "erp sha256:nothex")
	waitfor.Until(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(logs.String(), "not reloaded") }, "the refusal logged")
	require.Equal(t, "erp", who("new"))

	// Told by a signal: the file's stamp is put back, so only the signal can say.
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("erp "+tokenDigest("newer")+"\n"), 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	signals <- syscall.SIGHUP
	waitfor.Until(t, 5*time.Second, func() bool { return who("newer") == "erp" }, "reloaded on the signal")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Each client is named in the audit trail (what changed state at SIFEN or
// the DICT, accepted or refused), in /metrics and in the logs.
func TestGatewayClientsInAuditMetricsAndLogs(t *testing.T) {
	clients, err := web.LoadGatewayClients(clientsFile(t, "erp "+tokenDigest("erp-token"), "batch token:batch-token"), nil)
	require.NoError(t, err)
	metrics := web.NewMetrics()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))

	w := newSifenGatewayWorld(t, sqlstore.SQLite, -1)
	store := sqlstoretest.MustOpenDSN(t, w.dsn, w.now)
	trail := auditsql.New(store)
	w.configure = func(c *web.SifenGatewayConfig) {
		c.Authenticate, c.Audit, c.Metrics, c.Logger = clients.Authenticate, trail, metrics, logger
	}
	base := w.newGateway(t, -1)
	post := func(token string, body []byte) int {
		status, _, _ := do(t, http.DefaultClient, http.MethodPost, base+sifen.RecepcionPath, body,
			map[string]string{"Content-Type": sifen.SOAPContentType, "Authorization": "Bearer " + token})
		return status
	}
	require.Equal(t, http.StatusOK, post("erp-token", lotBody(t, sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2})))
	require.Equal(t, http.StatusBadRequest, post("batch-token", lotBody(t, sifentest.Doc{RUC: "80069563", Number: 3}, sifentest.Doc{RUC: "80012345", Number: 4})))
	require.Equal(t, http.StatusUnauthorized, post("nobody", lotBody(t, sifentest.Doc{Number: 5})))

	entries, err := trail.List(context.Background(), audit.Query{Action: audit.ActionGateway})
	require.NoError(t, err)
	require.Len(t, entries, 2, "the two clients' lots; nobody's request changed nothing")
	refused, sent := entries[0], entries[1]
	require.Equal(t, "gateway:erp", sent.User)
	target, err := url.ParseQuery(sent.Target)
	require.NoError(t, err)
	require.Equal(t, url.Values{"service": {"siRecepLoteDE"}, "env": {"test"}, "ruc": {"80069563"}, "des": {"2"}, "cdc": {sifentest.Doc{Number: 1}.CDC()}}, target)
	outcome, err := url.ParseQuery(sent.Outcome)
	require.NoError(t, err)
	require.Equal(t, "200", outcome.Get("status"))
	require.Equal(t, "0300", outcome.Get("code"))
	require.NotEmpty(t, outcome.Get("lot"))
	require.Equal(t, "gateway:batch", refused.User)
	require.Contains(t, refused.Outcome, "status=400")
	require.Contains(t, refused.Outcome, "RUC")

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{
		`balde_gateway_requests_total{client="erp",code="200",gateway="sifen"} 1`,
		`balde_gateway_requests_total{client="batch",code="400",gateway="sifen"} 1`,
		`balde_gateway_requests_total{client="",code="401",gateway="sifen"} 1`,
	} {
		require.Contains(t, rec.Body.String(), line)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logs.String(), "client=erp")
	require.Contains(t, logs.String(), "client=batch")
}

// The inbound limiter charges a gateway's client to its own bucket, sized
// for a backend and never blocked past its window: a backend behind one
// address sending 2 requests a second for two minutes is never refused,
// where the per-IP limit (120 a minute, 5 minutes' block) blocks anyone
// else after 120.
func TestInboundChargesAClientItsOwnBucket(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	clients, err := web.LoadGatewayClients(clientsFile(t, "erp token:erp-token"), nil)
	require.NoError(t, err)
	in, err := web.NewInbound(web.InboundConfig{IPLimit: web.DefaultInboundIPLimit, Block: web.DefaultInboundBlock, Client: clients.Authenticate})
	require.NoError(t, err)
	require.NoError(t, in.UseStore(throttletest.NewMemStore(clock.Now), throttle.Config{Clock: clock.Now}))
	h := in.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	send := func(token string) int {
		r := httptest.NewRequest(http.MethodPost, "/de/ws/async/recibe-lote.wsdl", nil)
		r.RemoteAddr = "10.0.0.7:40000"
		r.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for i := range 240 {
		require.Equal(t, http.StatusNoContent, send("erp-token"), "request %d of the backend", i)
		clock.Advance(500 * time.Millisecond)
	}
	refused := 0
	for range 130 {
		if send("guess") == http.StatusTooManyRequests {
			refused++
		}
	}
	require.Equal(t, 10, refused, "anyone else: 120 a minute by IP")
	require.Equal(t, http.StatusNoContent, send("erp-token"), "the client's bucket is its own")
}

// The Audit page of balde serve shows a gateway client's request: who
// ("gateway:NAME"), the service, RUC and documents (linked to the RUC's
// documents), and SIFEN's answer; the action filter offers it.
func TestAuditPageShowsGatewayRequests(t *testing.T) {
	var a *auditsql.Store
	e := newEnv(t, withAudit(t, &a), withSifen(sifenConfig{}))
	_, err := a.Record(context.Background(), audit.Entry{User: "gateway:erp", Action: audit.ActionGateway,
		Target: "service=siRecepLoteDE&env=test&ruc=80069563&des=2", Outcome: "status=200&code=0300&lot=12345678901234567"})
	require.NoError(t, err)
	page := document(t, e.get("/admin/audit?action=gateway", asAdmin))
	row := page.Find("tbody tr").First().Text()
	for _, want := range []string{"gateway:erp", "Gateway request", "siRecepLoteDE · RUC 80069563 (test) · 2 document(s)", "200", "code 0300", "lot 12345678901234567"} {
		require.Contains(t, row, want)
	}
	href, _ := page.Find("tbody tr a").First().Attr("href")
	require.Contains(t, href, "ruc=80069563")
}

// An application that mounts a gateway keeps what SIGHUP means to its
// process: GatewayHandler registers for no signal (balde gateway passes
// its own SIGHUP as the reload channel). The child process mounts a
// gateway with clients and sends itself SIGHUP: it must die of it, as any
// Go program that asked for no signal does.
func TestGatewayHandlerLeavesSIGHUPToTheApplication(t *testing.T) {
	if os.Getenv("BALDE_TEST_SIGHUP_CHILD") == "1" {
		clients, err := web.LoadGatewayClients(clientsFile(t, "erp sha256:"+strings.Repeat("ab", 32)+"\n"), nil)
		require.NoError(t, err)
		web.GatewayHandler(context.Background(), http.NotFoundHandler(), http.NotFoundHandler(), nil, clients, nil)
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
		time.Sleep(10 * time.Second) // only reached when SIGHUP was caught
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGatewayHandlerLeavesSIGHUPToTheApplication$")
	cmd.Env = append(os.Environ(), "BALDE_TEST_SIGHUP_CHILD=1")
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the process that mounted a gateway survived SIGHUP")
	status, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, status.Signaled(), "the child exited with %v instead of dying of SIGHUP", err)
	require.Equal(t, syscall.SIGHUP, status.Signal())
}
