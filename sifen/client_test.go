package sifen_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// pki is a throwaway CA with a server and a client certificate, as PEM files.
type pki struct {
	dir                       string
	caFile, certFile, keyFile string
	caPool                    *x509.CertPool
	server                    tls.Certificate
	otherCAFile               string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	serial := int64(1)
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey, key *ecdsa.PrivateKey) *x509.Certificate {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		require.NoError(t, err)
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		return c
	}
	writePEM := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	caKey := newKey()
	ca := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "balde test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil, caKey)
	serverKey := newKey()
	server := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "sifen-test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey, serverKey)
	clientKey := newKey()
	client := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "80069563-1"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, caKey, clientKey)
	otherKey := newKey()
	other := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil, otherKey)

	p := pki{dir: dir, caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	p.caFile = writePEM("ca.pem", "CERTIFICATE", ca.Raw)
	p.otherCAFile = writePEM("other-ca.pem", "CERTIFICATE", other.Raw)
	p.certFile = writePEM("client.pem", "CERTIFICATE", client.Raw)
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	require.NoError(t, err)
	p.keyFile = writePEM("client-key.pem", "EC PRIVATE KEY", keyDER)
	serverKeyDER, err := x509.MarshalECPrivateKey(serverKey)
	require.NoError(t, err)
	p.server, err = tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: serverKeyDER}))
	require.NoError(t, err)
	return p
}

func TestClientMutualTLS(t *testing.T) {
	p := newPKI(t)
	sim, err := sifensim.NewServer(sifensim.Config{Logger: quietLogger()})
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(sim)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.caPool}
	ts.StartTLS()
	defer ts.Close()
	ctx := context.Background()
	cdc := sifentest.Doc{}.CDC()

	t.Run("OK", func(t *testing.T) {
		c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: ts.URL + "/{env}", CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.caFile})
		require.NoError(t, err)
		resp, err := c.ConsultaDE(ctx, sifen.EnvProd, cdc)
		require.NoError(t, err)
		require.Equal(t, sifen.CodeDENotFound, resp.Code)
		z, err := sifen.ZipLote(sifentest.Lote(sifentest.Doc{}))
		require.NoError(t, err)
		r, err := c.RecepcionLote(ctx, sifen.EnvProd, z)
		require.NoError(t, err)
		require.Equal(t, sifen.CodeLotQueued, r.Code)
		require.Equal(t, int64(1), sim.Stats().Count(sifen.ServiceRecepcionLote, "prod", "80069563", sifen.CodeLotQueued))
	})
	t.Run("RefusedWithoutClientCertificate", func(t *testing.T) {
		c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: ts.URL + "/{env}", CAFile: p.caFile})
		require.NoError(t, err)
		_, err = c.ConsultaDE(ctx, sifen.EnvProd, cdc)
		require.Error(t, err)
	})
	t.Run("NotSentToUntrustedServer", func(t *testing.T) {
		c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: ts.URL + "/{env}", CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.otherCAFile})
		require.NoError(t, err)
		_, err = c.ConsultaDE(ctx, sifen.EnvProd, cdc)
		require.Error(t, err)
		require.True(t, sifen.NotSent(err), "%v", err)
	})
	t.Run("BadConfig", func(t *testing.T) {
		_, err := sifen.NewClient(sifen.ClientConfig{CertFile: p.certFile})
		require.ErrorContains(t, err, "set both the certificate and the key file")
		_, err = sifen.NewClient(sifen.ClientConfig{CertFile: p.certFile, KeyFile: p.caFile})
		require.ErrorContains(t, err, "client certificate")
		_, err = sifen.NewClient(sifen.ClientConfig{CAFile: p.keyFile})
		require.ErrorContains(t, err, "holds no PEM certificate")
	})
}

func TestClientURLs(t *testing.T) {
	c, err := sifen.NewClient(sifen.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, "https://sifen-test.set.gov.py/de/ws/async/recibe-lote.wsdl", c.URL(sifen.EnvTest, sifen.RecepcionPath))
	require.Equal(t, "https://sifen.set.gov.py/de/ws/consultas/consulta-lote.wsdl", c.URL(sifen.EnvProd, sifen.ConsultaLotePath))
	require.Equal(t, "https://sifen.set.gov.py/de/ws/consultas/consulta.wsdl", c.URL(sifen.EnvProd, sifen.ConsultaPath))

	c, err = sifen.NewClient(sifen.ClientConfig{BaseURL: "http://127.0.0.1:8282/{env}/", ConsultaPath: "/other.wsdl"})
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:8282/prod/other.wsdl", c.URL(sifen.EnvProd, "/other.wsdl"))

	c, err = sifen.NewClient(sifen.ClientConfig{TestURL: "https://mirror.example", ProdURL: "https://prod.example"})
	require.NoError(t, err)
	require.Equal(t, "https://mirror.example/x", c.URL(sifen.EnvTest, "/x"))
	require.Equal(t, "https://prod.example/x", c.URL(sifen.EnvProd, "/x"))

	_, err = c.ConsultaDE(context.Background(), "homolog", sifentest.Doc{}.CDC())
	require.ErrorIs(t, err, sifen.ErrInvalidEnv)

	for _, cfg := range []sifen.ClientConfig{
		{BaseURL: "ftp://sifen.example/{env}"},
		{BaseURL: "127.0.0.1:8282/{env}"},
		{BaseURL: "http:///{env}"},
		{BaseURL: "http://[::1/{env}"},
		{TestURL: "sifen-test.set.gov.py"},
		{ProdURL: "file:///etc"},
	} {
		_, err := sifen.NewClient(cfg)
		require.ErrorContains(t, err, "is not an http(s) URL", "%+v", cfg)
	}
}
