package dict_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// fakeDICT is a DICT that answers every request with one canned response,
// and records the last request.
type fakeDICT struct {
	status int
	header map[string]string
	body   string
	// hangUp closes the connection without answering: the request
	// arrived, its answer is lost.
	hangUp bool
	last   *http.Request
}

func (f *fakeDICT) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.last = r.Clone(context.Background())
	if f.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range f.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(f.status)
	_, _ = w.Write([]byte(f.body))
}

type clientEnv struct {
	clock   *throttle.ManualClock
	limiter *throttle.Limiter
	catalog *dict.Catalog
	client  *dict.Client
}

func newClientEnv(t *testing.T, url string, httpClient *http.Client) *clientEnv {
	t.Helper()
	e := &clientEnv{clock: throttle.NewManualClock(throttletest.Epoch), catalog: dict.NewCatalog("prod")}
	require.NoError(t, e.catalog.SetCategory("A"))
	store := sqlstoretest.MustOpen(t, sqlstore.SQLite, e.clock.Now)
	var err error
	e.limiter, err = throttle.NewLimiter(store, e.catalog, throttle.Config{Clock: e.clock.Now})
	require.NoError(t, err)
	e.client, err = dict.NewClient(dict.ClientConfig{BaseURL: url, Participant: ispb, Limiter: e.limiter, Catalog: e.catalog,
		Records: dictsql.NewRecords(store.DB(), store.ReadDB()), HTTPClient: httpClient, Logger: quiet})
	require.NoError(t, err)
	return e
}

func (e *clientEnv) state(t *testing.T, policy, id string) throttle.BucketState {
	t.Helper()
	st, err := e.limiter.State(context.Background(), e.catalog.Key(policy, id))
	require.NoError(t, err)
	return st
}

// TestSettleByStatus checks what one getEntry costs the payer (PF, EMAIL
// key) and the participant for each answer of the DICT.
func TestSettleByStatus(t *testing.T) {
	tests := []struct {
		name            string
		dict            *fakeDICT
		closed          bool
		wantUser        int64
		wantParticipant int64
		// wantBlock is the payer's block, wantPBlock the participant's.
		wantBlock, wantPBlock time.Duration
		wantErr               func(t *testing.T, err error)
	}{
		// The hold (20 and 3) comes back whole: the DICT did not serve it.
		{"InternalError500IsRefunded", &fakeDICT{status: 500}, false, 100, 50000, 0, 0, remoteStatus(500)},
		// A 429 that names no bucket, with no reading of the participant's
		// bucket after it (this DICT answers 429 to that too), lowers
		// nobody: the payer and the participant wait out its Retry-After
		// (decision 0180; before, the payer went to 0).
		{"RateLimited429WithoutAReadingLowersNobody", &fakeDICT{status: 429}, false, 100, 50000, 0, 0, remoteStatus(429)},
		{"RateLimited429RetryAfterSeconds", &fakeDICT{status: 429, header: map[string]string{"Retry-After": "17"}}, false, 100, 50000, 17 * time.Second, 17 * time.Second, remoteStatus(429)},
		{"RateLimited429RetryAfterDate", &fakeDICT{status: 429, header: map[string]string{"Retry-After": throttletest.Epoch.Add(90 * time.Second).Format(http.TimeFormat)}}, false, 100, 50000, 90 * time.Second, 90 * time.Second, remoteStatus(429)},
		// Absurd Retry-After values are clamped, not lost (the year 9999
		// overflowed blocked_until to a negative number before).
		{"RateLimited429RetryAfterYear9999IsClamped", &fakeDICT{status: 429, header: map[string]string{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}}, false, 100, 50000, dict.MaxRetryAfter, dict.MaxRetryAfter, remoteStatus(429)},
		{"RateLimited429RetryAfterHugeSecondsIsClamped", &fakeDICT{status: 429, header: map[string]string{"Retry-After": "99999999999999999999"}}, false, 100, 50000, dict.MaxRetryAfter, dict.MaxRetryAfter, remoteStatus(429)},
		// A problem that names the payer's bucket syncs that one only.
		{"RateLimited429NamingThePayer", &fakeDICT{status: 429, header: map[string]string{"Retry-After": "17"}, body: problemXML(429, "RateLimited", dict.PolicyEntriesReadUserAntiscan+" is empty")},
			false, 0, 50000, 17 * time.Second, 0, remoteStatus(429)},
		// A problem that names the participant's bucket syncs that one only.
		{"RateLimited429NamingTheParticipant", &fakeDICT{status: 429, header: map[string]string{"Retry-After": "17"},
			body: `<problem xmlns="urn:ietf:rfc:7807"><type>https://dict.pi.rsfn.net.br/api/v2/error/RateLimited</type><title>Rate limited</title><status>429</status>` +
				`<violations><violation><reason>empty</reason><value>ENTRIES_READ_PARTICIPANT_ANTISCAN</value><property>policy</property></violation></violations></problem>`},
			false, 100, 0, 0, 17 * time.Second, remoteStatus(429)},
		{"BadRequest400CostsOne", &fakeDICT{status: 400}, false, 99, 49999, 0, 0, remoteStatus(400)},
		{"Unavailable503CostsOne", &fakeDICT{status: 503, header: map[string]string{"Retry-After": "5"}}, false, 99, 49999, 0, 0, remoteStatus(503)},
		{"MalformedBodyCostsOne", &fakeDICT{status: 200, body: "<GetEntryResponse><Entry>"}, false, 99, 49999, 0, 0, func(t *testing.T, err error) {
			require.ErrorIs(t, err, dict.ErrMalformedResponse)
		}},
		// The answer was lost: the DICT may have counted a 404, so the hold
		// stays.
		{"LostAnswerKeepsTheHold", &fakeDICT{hangUp: true}, false, 80, 49997, 0, 0, func(t *testing.T, err error) {
			require.Error(t, err)
			var re *dict.RemoteError
			require.False(t, errors.As(err, &re))
		}},
		// The connection was refused: the request never left, so the hold
		// comes back (it was kept before: 80 and 49997).
		{"ConnectionRefusedRefundsTheHold", &fakeDICT{}, true, 100, 50000, 0, 0, func(t *testing.T, err error) {
			require.ErrorContains(t, err, "not sent, the hold is refunded")
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(tt.dict)
			defer hs.Close()
			if tt.closed {
				hs.Close()
			}
			e := newClientEnv(t, hs.URL, nil)
			_, err := e.client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
			tt.wantErr(t, err)
			user := e.state(t, dict.PolicyEntriesReadUserAntiscan, cpfPF)
			participant := e.state(t, dict.PolicyEntriesReadParticipantAntiscan, ispb)
			require.Equal(t, tt.wantUser, user.Tokens)
			require.Equal(t, tt.wantParticipant, participant.Tokens)
			require.Equal(t, tt.wantBlock, user.BlockLeft)
			require.Equal(t, tt.wantPBlock, participant.BlockLeft)
		})
	}
}

func remoteStatus(status int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var re *dict.RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, status, re.Status)
	}
}

// TestGetEntryWire checks the request a getEntry sends.
func TestGetEntryWire(t *testing.T) {
	f := &fakeDICT{status: 404, header: map[string]string{"Content-Type": dict.ContentTypeProblemXML},
		body: `<problem xmlns="urn:ietf:rfc:7807"><type>https://dict.pi.rsfn.net.br/api/v2/error/EntryNotFound</type><title>Entry not found</title><status>404</status></problem>`}
	hs := httptest.NewServer(f)
	defer hs.Close()
	e := newClientEnv(t, hs.URL+"/api/v2/", nil)
	e2e := "E12345678202601020304ab3Cd5Ef7Gh"
	res, err := e.client.GetEntry(context.Background(), dict.LookupRequest{Key: knownPhone, PayerID: cnpjPJ, EndToEndID: e2e})
	requireNotFound(t, err)
	require.Equal(t, e2e, res.EndToEndID)
	require.Equal(t, http.MethodGet, f.last.Method)
	require.Equal(t, "/api/v2/entries/"+knownPhone, f.last.URL.Path)
	require.Equal(t, ispb, f.last.Header.Get(dict.HeaderRequestingParticipant))
	require.Equal(t, cnpjPJ, f.last.Header.Get(dict.HeaderPayerID))
	require.Equal(t, e2e, f.last.Header.Get(dict.HeaderEndToEndID))
	require.Equal(t, int64(1000-20), e.state(t, dict.PolicyEntriesReadUserAntiscan, cnpjPJ).Tokens)
	require.Equal(t, int64(50000-3), e.state(t, dict.PolicyEntriesReadParticipantAntiscan, ispb).Tokens)
}

// TestMutualTLS runs a lookup over TLS with a client certificate, the way
// the real DICT is reached.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "test CA", true)
	srvCert, srvKey := newCert(t, ca, caKey, "127.0.0.1", false)
	cliCert, cliKey := newCert(t, ca, caKey, "participant 12345678", false)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cliCert.Raw)
	writeKey(t, filepath.Join(dir, "client.key"), cliKey)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f := &fakeDICT{status: 200, body: mustReadFile(t, "testdata/get_entry_response.golden.xml")}
	hs := httptest.NewUnstartedServer(f)
	hs.TLS = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	hs.StartTLS()
	defer hs.Close()

	httpClient, err := dict.NewTLSClient(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	e := newClientEnv(t, hs.URL, httpClient)
	res, err := e.client.GetEntry(context.Background(), dict.LookupRequest{Key: knownPhone, PayerID: cpfPF})
	require.NoError(t, err)
	require.Equal(t, "João Silva", res.Response.Entry.Owner.Name)
	require.Equal(t, "participant 12345678", f.last.TLS.PeerCertificates[0].Subject.CommonName)

	// Without a client certificate the handshake fails: the request costs
	// the reserve (the DICT may have seen it).
	noCert, err := dict.NewTLSClient("", "", filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	e = newClientEnv(t, hs.URL, noCert)
	_, err = e.client.GetEntry(context.Background(), dict.LookupRequest{Key: knownPhone, PayerID: cpfPF})
	require.Error(t, err)

	_, err = dict.NewTLSClient(filepath.Join(dir, "client.pem"), "", "")
	require.ErrorContains(t, err, "both the certificate and the key")
	_, err = dict.NewTLSClient("", "", filepath.Join(dir, "client.key"))
	require.ErrorContains(t, err, "no PEM certificate")
	_, err = dict.NewTLSClient(filepath.Join(dir, "missing.pem"), filepath.Join(dir, "client.key"), "")
	require.Error(t, err)
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:                  isCA,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

func writeKey(t *testing.T, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	writePEM(t, path, "EC PRIVATE KEY", der)
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestRunReconcile reconciles in the background until cancelled. The
// report of the first pass holds RunReconcile until the cancellation, so
// exactly one pass runs however slow the machine.
func TestRunReconcile(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{SimCategory: "F", LocalCategory: "A"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan error, 1)
	done := make(chan error, 1)
	var passes atomic.Int64
	go func() {
		done <- e.client.RunReconcile(ctx, 50*time.Millisecond, func(_ dict.ReconcileResult, err error) {
			passes.Add(1)
			reports <- err
			select { // no second pass before the cancellation
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		})
	}()
	// The first pass runs one interval after the start (the client learned
	// the category when it was built).
	select {
	case err := <-reports:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("no reconciliation within 10 s")
	}
	require.Equal(t, "F", e.catalog.Category())
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("RunReconcile did not return within 10 s of its cancellation")
	}
	// One pass, which asked the DICT once, and nothing else did.
	require.Equal(t, int64(1), passes.Load())
	require.Equal(t, int64(1), e.sent(dict.OpListBucketStates))
	require.Error(t, e.client.RunReconcile(context.Background(), 0, nil))
}
