package main

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
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// freeLoopbackAddr returns a loopback address nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// startGateway runs "balde gateway ARGS" until the test ends, and
// returns once its /readyz answers 200 over client (base: http:// or
// https:// and the address).
func startGateway(t *testing.T, client *http.Client, base string, args ...string) (stdout, stderr *bytes.Buffer) {
	t.Helper()
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	m := NewMain(nil, stdout, stderr, func(string) string { return "" })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, append([]string{"gateway"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, ExitOK, code, "%s", stderr)
		case <-time.After(20 * time.Second):
			t.Error("the gateway did not stop")
		}
	})
	waitReady(t, client, base, stderr)
	return stdout, stderr
}

// waitReady returns once base's /readyz answers 200 over client, or fails
// the test with log.
func waitReady(t *testing.T, client *http.Client, base string, log fmt.Stringer) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "the gateway never got ready: %s", log)
}

// writeClients writes a gateway clients file in dir.
func writeClients(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, "clients")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// "balde gateway dict" in front of the simulator: ready, a lookup of a
// configured client goes through and is answered by the DICT, one without
// its token is a 401 that reaches nothing, /metrics counts both by client,
// and the command ends cleanly when its context does.
func TestGatewayDictServesLookupsAndProbes(t *testing.T) {
	sim := startDictSim(t, "A", false)
	addr := freeLoopbackAddr(t)
	dir := t.TempDir()
	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	stdout, _ := startGateway(t, client, base, "dict", "--addr", addr, "--db", "sqlite://"+filepath.Join(dir, "balde.db"),
		"--clients", writeClients(t, dir, "erp "+tokenDigest("erp-token")), "--dict-url", sim.URL(), "--dict-participant", "12345678")

	lookup := func(token string, n int) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, base+"/api/v2/entries/maria.souza@example.com", nil)
		require.NoError(t, err)
		req.Header.Set(dict.HeaderPayerID, "52998224725")
		req.Header.Set(dict.HeaderEndToEndID, fmt.Sprintf("E12345678%s%011d", time.Now().UTC().Format("200601021504"), n))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	status, body := lookup("not-a-client", 1)
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)
	require.Empty(t, sim.Stats()["getEntry"], "nothing reached the DICT")
	status, body = lookup("erp-token", 2)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var entry dict.GetEntryResponse
	require.NoError(t, dict.Unmarshal(body, &entry))
	require.Equal(t, "maria.souza@example.com", entry.Entry.Key)

	resp, err := client.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(metrics), "ENTRIES_READ_PARTICIPANT_ANTISCAN")
	require.Contains(t, string(metrics), `balde_gateway_requests_total{client="erp",code="200",gateway="dict"} 1`)
	require.Contains(t, string(metrics), `balde_gateway_requests_total{client="",code="401",gateway="dict"} 1`)
	require.Contains(t, stdout.String(), "DICT gateway on http://"+addr)
}

func TestGatewayUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"NoService", []string{"gateway"}},
		{"UnknownService", []string{"gateway", "ftp"}},
		{"NoDictURL", []string{"gateway", "dict"}},
		{"BadAddr", []string{"gateway", "dict", "--dict-url", "http://127.0.0.1:1", "--addr", "nowhere"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := NewMain(nil, &stdout, &stderr, func(string) string { return "" }).Run(context.Background(), tt.args)
			require.Equal(t, ExitUsage, code, "%s", &stderr)
		})
	}
}

// testPKI writes a CA, a server certificate of 127.0.0.1 and a client
// certificate of CN erp.example (PEM files in dir) and returns the paths
// and the client's certificate and the CA pool.
func testPKI(t *testing.T, dir string) (caFile, certFile, keyFile string, client tls.Certificate, pool *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "balde test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	issue := func(n int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip := net.ParseIP(cn); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	caFile = write("ca.pem", "CERTIFICATE", caDER)
	serverDER, serverKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	certFile = write("server.pem", "CERTIFICATE", serverDER)
	keyDER, err := x509.MarshalECPrivateKey(serverKey)
	require.NoError(t, err)
	keyFile = write("server.key", "EC PRIVATE KEY", keyDER)
	clientDER, clientKey := issue(3, "erp.example", x509.ExtKeyUsageClientAuth)
	return caFile, certFile, keyFile, tls.Certificate{Certificate: [][]byte{clientDER}, PrivateKey: clientKey}, pool
}

// "balde gateway sifen" in front of the simulator, over TLS with client
// certificates: a lot posted by a client with its certificate is queued
// (0300), the same lot again is a 409 fault; a client with its token and
// no certificate is served too; a request with neither is a 401 that
// reaches nothing.
func TestGatewaySifenSendsALot(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{})
	addr := freeLoopbackAddr(t)
	dir := t.TempDir()
	caFile, certFile, keyFile, cert, pool := testPKI(t, dir)
	base := "https://" + addr
	tlsClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	stdout, _ := startGateway(t, tlsClient(), base, "sifen", "--addr", addr, "--db", "sqlite://"+filepath.Join(dir, "balde.db"),
		"--sifen-url", sim.URL, "--env", "test", "--tls-cert", certFile, "--tls-key", keyFile, "--client-ca", caFile,
		"--clients", writeClients(t, dir, "erp cn:erp.example", "batch "+tokenDigest("batch-token")))
	require.Contains(t, stdout.String(), "SIFEN gateway (test) on https://"+addr)

	post := func(c *http.Client, token string, n int) (int, []byte) {
		// A RUC per lot but the repeated one: none waits for its RUC's interval.
		z, err := sifen.ZipLote(sifentest.Lote(sifentest.Doc{RUC: fmt.Sprint(80000000 + n), Number: n}))
		require.NoError(t, err)
		soap, err := sifen.MarshalSOAP(sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(z)})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, base+sifen.RecepcionPath, bytes.NewReader(soap))
		require.NoError(t, err)
		req.Header.Set("Content-Type", sifen.SOAPContentType)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	status, body := post(tlsClient(), "", 6)
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)
	require.Zero(t, sim.Stats().Count("", "", "", ""), "nothing reached SIFEN")

	status, body = post(tlsClient(cert), "", 7)
	require.Equal(t, http.StatusOK, status, "%s", body)
	answer, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](body)
	require.NoError(t, err)
	require.Nil(t, fault)
	require.Equal(t, sifensim.CodeLotQueued, answer.Code)
	status, body = post(tlsClient(cert), "", 7)
	require.Equal(t, http.StatusConflict, status, "%s", body)
	status, body = post(tlsClient(), "batch-token", 8)
	require.Equal(t, http.StatusOK, status, "%s", body)
}

// A gateway with no client configured does not start: exit 2 and one line
// saying what to set. --no-client-auth serves without clients, on a
// loopback address only.
func TestGatewayRefusesToStartWithoutClients(t *testing.T) {
	dir := t.TempDir()
	dictArgs := []string{"gateway", "dict", "--dict-url", "http://127.0.0.1:1", "--db", "sqlite://" + filepath.Join(dir, "d.db")}
	sifenArgs := []string{"gateway", "sifen", "--sifen-url", "http://127.0.0.1:1/{env}", "--db", "sqlite://" + filepath.Join(dir, "s.db")}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"DictNoClients", dictArgs, "no client configured: set --clients FILE (BALDE_GATEWAY_CLIENTS_FILE)"},
		{"SifenNoClients", sifenArgs, "no client configured: set --clients FILE (BALDE_GATEWAY_CLIENTS_FILE)"},
		{"NoAuthOnAllAddresses", append(slices.Clone(dictArgs), "--no-client-auth", "--addr", "0.0.0.0:0"), "--no-client-auth serves anyone"},
		{"EmptyClientsFile", append(slices.Clone(sifenArgs), "--clients", writeClients(t, dir, "# nobody")), "no client"},
		{"CertificateWithoutCA", append(slices.Clone(sifenArgs), "--clients", writeClients(t, t.TempDir(), "erp cn:erp.example")), "--client-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := NewMain(nil, &stdout, &stderr, func(string) string { return "" }).Run(context.Background(), tc.args)
			require.Equal(t, ExitUsage, code, "%s", &stderr)
			require.Contains(t, stderr.String(), tc.want)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr.String()), "\n")+1, "one line: %s", &stderr)
		})
	}
}

// A client's token is rotated without a restart: the gateway reloads its
// clients file on SIGHUP (and when the file changes).
func TestGatewayReloadsClientsOnSIGHUP(t *testing.T) {
	sim := startDictSim(t, "A", false)
	addr := freeLoopbackAddr(t)
	dir := t.TempDir()
	clients := writeClients(t, dir, "erp "+tokenDigest("token-1"))
	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	startGateway(t, client, base, "dict", "--addr", addr, "--db", "sqlite://"+filepath.Join(dir, "balde.db"),
		"--clients", clients, "--dict-url", sim.URL(), "--dict-participant", "12345678")
	status := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, base+"/api/v2/policies/", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, status("token-1"))
	require.Equal(t, http.StatusUnauthorized, status("token-2"))

	// The same size and time as before: only the signal tells.
	fi, err := os.Stat(clients)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(clients, []byte("erp "+tokenDigest("token-2")+"\n"), 0o600))
	require.NoError(t, os.Chtimes(clients, fi.ModTime(), fi.ModTime()))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Eventually(t, func() bool { return status("token-2") == http.StatusOK }, 10*time.Second, 20*time.Millisecond, "the new token")
	require.Equal(t, http.StatusUnauthorized, status("token-1"), "the old token")
}
