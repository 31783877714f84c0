package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/settings"
)

// writeCertPair writes a self-signed RSA certificate and its key as PEM
// files in dir and returns their paths.
func writeCertPair(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	return certFile, keyFile
}

// TestDictSigningConfig: the DICT client signs with BALDE_DICT_SIGN_CERT
// and _KEY, else, only with BALDE_DICT_SIGN_WITH_TLS_KEY, with the TLS
// pair BALDE_DICT_CERT and _KEY (decision 0181), and checks
// answers against BALDE_DICT_VERIFY_CERT; a half or a bad setting is a
// usage error naming the variables.
func TestDictSigningConfig(t *testing.T) {
	dir := t.TempDir()
	tlsCert, tlsKey := writeCertPair(t, dir, "tls")
	signCert, signKey := writeCertPair(t, dir, "sign")
	body := []byte(dict.XMLHeader + "<DeleteEntryRequest>\n    <Signature></Signature>\n    <Key>+5561988880000</Key>\n</DeleteEntryRequest>\n")

	parse := func(t *testing.T, env map[string]string) settings.Settings {
		cfg := settings.Default()
		require.NoError(t, cfg.ParseEnv(func(k string) string { return env[k] }))
		return cfg
	}
	t.Run("None", func(t *testing.T) {
		s, v, err := dictSigning(parse(t, nil))
		require.NoError(t, err)
		require.Nil(t, s)
		require.Nil(t, v)
	})
	t.Run("TLSPairNotAskedFor", func(t *testing.T) {
		s, _, err := dictSigning(parse(t, map[string]string{"BALDE_DICT_CERT": tlsCert, "BALDE_DICT_KEY": tlsKey}))
		require.NoError(t, err)
		require.Nil(t, s, "the TLS pair signs only when asked to")
	})
	for _, tt := range []struct {
		name       string
		env        map[string]string
		signedWith string // the certificate a verifier must trust
	}{
		{"TLSPair", map[string]string{"BALDE_DICT_CERT": tlsCert, "BALDE_DICT_KEY": tlsKey, "BALDE_DICT_VERIFY_CERT": tlsCert, "BALDE_DICT_SIGN_WITH_TLS_KEY": "on"}, tlsCert},
		{"OwnPair", map[string]string{"BALDE_DICT_CERT": tlsCert, "BALDE_DICT_KEY": tlsKey,
			"BALDE_DICT_SIGN_CERT": signCert, "BALDE_DICT_SIGN_KEY": signKey, "BALDE_DICT_VERIFY_CERT": signCert}, signCert},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, v, err := dictSigning(parse(t, tt.env))
			require.NoError(t, err)
			require.NotNil(t, s)
			require.NotNil(t, v)
			signed, err := s.Sign(t.Context(), "deleteEntry", body)
			require.NoError(t, err)
			require.NoError(t, v.Verify(t.Context(), "deleteEntry", signed))
			other, err := dict.LoadXMLVerifier(map[string]string{tlsCert: signCert, signCert: tlsCert}[tt.signedWith])
			require.NoError(t, err)
			require.ErrorIs(t, other.Verify(t.Context(), "deleteEntry", signed), dict.ErrSignatureInvalid)
		})
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"HalfSignPair", map[string]string{"BALDE_DICT_SIGN_CERT": signCert}, "BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY): give both"},
		{"MismatchedPair", map[string]string{"BALDE_DICT_SIGN_CERT": signCert, "BALDE_DICT_SIGN_KEY": tlsKey}, "BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY"},
		{"MissingVerifyCert", map[string]string{"BALDE_DICT_VERIFY_CERT": filepath.Join(dir, "nope.pem")}, "BALDE_DICT_VERIFY_CERT"},
		{"VerifyCertNotPEM", map[string]string{"BALDE_DICT_VERIFY_CERT": tlsKey}, "no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := dictSigning(parse(t, tt.env))
			var ee *ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, ExitUsage, ee.Code)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestDictLookupVerifiesAnswers: with BALDE_DICT_VERIFY_CERT, dict-lookup
// checks the DICT's answers; the simulator does not sign its answers, so
// every lookup fails on the signature (and the mirror was settled by the
// 200 all the same: nothing is left held).
func TestDictLookupVerifiesAnswers(t *testing.T) {
	sim := startDictSim(t, "A", true)
	dictCert, _ := writeCertPair(t, t.TempDir(), "dict")
	env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "BALDE_DICT_URL": sim.URL(),
		"BALDE_DICT_CATEGORY": "A", "BALDE_DICT_VERIFY_CERT": dictCert}
	code, stdout, _ := runIn(t.Context(), newFakeTime(testEpoch), "", env, "dict-lookup", "--json", keysFile(t, 2))
	require.Equal(t, ExitFailed, code)
	items, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
	require.Equal(t, 2, sum.Failed)
	for _, it := range items {
		require.Equal(t, dictlookup.LookupFailed, it.Result)
		require.Contains(t, it.Message, "invalid XML signature")
	}
	require.Equal(t, int64(2), sim.Stats().Count(dict.OpGetEntry, http.StatusOK), "sent and answered")
}

// dictSigning is settings.Settings.DictSigning with its error as the
// commands report it (a usage error).
func dictSigning(cfg settings.Settings) (dict.Signer, dict.Verifier, error) {
	s, v, err := cfg.DictSigning()
	return s, v, settingUsage(err)
}
