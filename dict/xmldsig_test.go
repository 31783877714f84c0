package dict_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/xml"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// testCert is a key and a certificate the test makes: self-signed, or
// issued by parent.
type testCert struct {
	key  *rsa.PrivateKey
	cert *x509.Certificate
}

func makeCert(t *testing.T, name string, parent *testCert, isCA bool) *testCert {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"balde test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  isCA,
	}
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCert{key: key, cert: cert}
}

func (c *testCert) signer(t *testing.T) *dict.XMLSigner {
	t.Helper()
	s, err := dict.NewXMLSigner(c.key, c.cert)
	require.NoError(t, err)
	return s
}

func verifierOf(t *testing.T, trusted ...*x509.Certificate) *dict.XMLVerifier {
	t.Helper()
	v, err := dict.NewXMLVerifier(nil, trusted...)
	require.NoError(t, err)
	return v
}

var (
	certsOnce          sync.Once
	psp, dictCA, other *testCert
	dictLeaf           *testCert
)

// testCerts makes the test's certificates once: the participant's, a CA
// and the DICT's certificate it issued, and an unrelated one.
func testCerts(t *testing.T) {
	certsOnce.Do(func() {
		psp = makeCert(t, "PSP 12345678", nil, false)
		dictCA = makeCert(t, "DICT test CA", nil, true)
		dictLeaf = makeCert(t, "dict.pi.rsfn.net.br", dictCA, false)
		other = makeCert(t, "someone else", nil, false)
	})
}

// official reads an example body of the DICT API (testdata/official).
func official(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(officialExamples, name))
	require.NoError(t, err)
	return data
}

// withoutSignature cuts the Signature child of the root out of doc.
func withoutSignature(t *testing.T, doc []byte) []byte {
	t.Helper()
	i := bytes.Index(doc, []byte("<Signature"))
	require.GreaterOrEqual(t, i, 0)
	j := bytes.Index(doc, []byte("</Signature>"))
	require.Greater(t, j, i)
	return append(append([]byte(nil), doc[:i]...), doc[j+len("</Signature>"):]...)
}

// TestXMLSignerProfile: an official request body signed by XMLSigner
// carries the DICT's profile in place of the example's empty Signature
// (its first child), every other byte unchanged, and verifies.
func TestXMLSignerProfile(t *testing.T) {
	testCerts(t)
	for _, name := range []string{"entries/CreateEntryRequest.xml", "entries/DeleteEntryRequest.xml", "claims/CreateClaimRequest.xml"} {
		t.Run(name, func(t *testing.T) {
			body := official(t, name)
			require.Contains(t, string(body), "<Signature></Signature>")
			signed, err := psp.signer(t).Sign(t.Context(), "op", body)
			require.NoError(t, err)
			require.Equal(t, string(withoutSignature(t, body)), string(withoutSignature(t, signed)), "only the Signature changed")
			require.NoError(t, verifierOf(t, psp.cert).Verify(t.Context(), "op", signed))

			var doc struct {
				XMLName xml.Name
				Sig     struct {
					XMLName    xml.Name
					SignedInfo struct {
						C14N      algorithm `xml:"CanonicalizationMethod"`
						Method    algorithm `xml:"SignatureMethod"`
						Reference struct {
							URI        string      `xml:"URI,attr"`
							Transforms []algorithm `xml:"Transforms>Transform"`
							Digest     algorithm   `xml:"DigestMethod"`
						}
					}
					Cert string `xml:"KeyInfo>X509Data>X509Certificate"`
				} `xml:"http://www.w3.org/2000/09/xmldsig# Signature"`
			}
			require.NoError(t, xml.Unmarshal(signed, &doc))
			si := doc.Sig.SignedInfo
			require.Equal(t, dict.SignatureNamespace, doc.Sig.XMLName.Space)
			require.Equal(t, "http://www.w3.org/2001/10/xml-exc-c14n#", si.C14N.Algorithm)
			require.Equal(t, "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256", si.Method.Algorithm)
			require.Equal(t, "", si.Reference.URI, "the whole document")
			require.Equal(t, []algorithm{{"http://www.w3.org/2000/09/xmldsig#enveloped-signature"}, {"http://www.w3.org/2001/10/xml-exc-c14n#"}}, si.Reference.Transforms)
			require.Equal(t, "http://www.w3.org/2001/04/xmlenc#sha256", si.Reference.Digest.Algorithm)
			require.Equal(t, base64.StdEncoding.EncodeToString(psp.cert.Raw), doc.Sig.Cert)
			// The Signature is the root's first child, where the example has it.
			first := bytes.Index(signed, []byte(">\n    <"))
			require.True(t, bytes.HasPrefix(signed[first+len(">\n    "):], []byte(`<Signature xmlns="http://www.w3.org/2000/09/xmldsig#">`)), "%s", signed)
		})
	}
}

type algorithm struct {
	Algorithm string `xml:"Algorithm,attr"`
}

// TestXMLVerifierRefuses: a tampered body, an unsigned one, one signed by
// an untrusted certificate, and one whose signature was moved to another
// document do not verify.
func TestXMLVerifierRefuses(t *testing.T) {
	testCerts(t)
	body := official(t, "entries/CreateEntryRequest.xml")
	signed, err := psp.signer(t).Sign(t.Context(), "createEntry", body)
	require.NoError(t, err)
	v := verifierOf(t, psp.cert)
	require.NoError(t, v.Verify(t.Context(), "createEntry", signed))

	otherSigned, err := other.signer(t).Sign(t.Context(), "createEntry", body)
	require.NoError(t, err)
	deleteSigned, err := psp.signer(t).Sign(t.Context(), "deleteEntry", official(t, "entries/DeleteEntryRequest.xml"))
	require.NoError(t, err)
	sigOf := func(doc []byte) string {
		return string(doc[bytes.Index(doc, []byte("<Signature")) : bytes.Index(doc, []byte("</Signature>"))+len("</Signature>")])
	}
	tests := []struct {
		name string
		body string
	}{
		{"TamperedName", strings.Replace(string(signed), "João Silva", "Joao Silva", 1)},
		{"TamperedAccount", strings.Replace(string(signed), "0007654321", "0007654322", 1)},
		{"AddedElement", strings.Replace(string(signed), "<Reason>", "<Extra/><Reason>", 1)},
		{"Unsigned", string(body)},
		{"UntrustedCertificate", string(otherSigned)},
		{"SignatureOfAnotherDocument", strings.Replace(string(signed), sigOf(signed), sigOf(deleteSigned), 1)},
		{"NotXML", "not xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEqual(t, string(signed), tt.body)
			require.ErrorIs(t, v.Verify(t.Context(), "createEntry", []byte(tt.body)), dict.ErrSignatureInvalid)
		})
	}
}

// TestXMLVerifierTrustsIssuer: the DICT's certificate issued by a trusted
// CA verifies; a verifier that trusts only another certificate refuses it.
func TestXMLVerifierTrustsIssuer(t *testing.T) {
	testCerts(t)
	signed, err := dictLeaf.signer(t).Sign(t.Context(), "getEntry", official(t, "entries/GetEntryResponse.xml"))
	require.NoError(t, err)
	require.NoError(t, verifierOf(t, dictCA.cert).Verify(t.Context(), "getEntry", signed))
	require.NoError(t, verifierOf(t, dictLeaf.cert).Verify(t.Context(), "getEntry", signed))
	require.ErrorIs(t, verifierOf(t, psp.cert).Verify(t.Context(), "getEntry", signed), dict.ErrSignatureInvalid)
}

// TestSignedBodyReencodesUnchanged: a signed request decoded into balde's
// type and encoded again is the same bytes, and still verifies. Before,
// OpeningDate "2010-01-10T03:00:00Z" was written back as
// "2010-01-10T03:00:00.000Z", which broke the signature.
func TestSignedBodyReencodesUnchanged(t *testing.T) {
	testCerts(t)
	// The example lacks the final newline Marshal writes (outside the
	// signed root element).
	body := append(official(t, "entries/CreateEntryRequest.xml"), '\n')
	require.Contains(t, string(body), "<OpeningDate>2010-01-10T03:00:00Z</OpeningDate>")
	signed, err := psp.signer(t).Sign(t.Context(), "createEntry", body)
	require.NoError(t, err)
	var req dict.CreateEntryRequest
	require.NoError(t, dict.Unmarshal(signed, &req))
	again, err := dict.Marshal(&req)
	require.NoError(t, err)
	require.Equal(t, string(signed), string(again))
	require.NoError(t, verifierOf(t, psp.cert).Verify(t.Context(), "createEntry", again))

	// A time that changed is written in the DICT's format.
	req.Entry.Account.OpeningDate.Time = req.Entry.Account.OpeningDate.Add(time.Second)
	again, err = dict.Marshal(&req)
	require.NoError(t, err)
	require.Contains(t, string(again), "<OpeningDate>2010-01-10T03:00:01.000Z</OpeningDate>")
}

// TestClientSignsAndVerifies: a client with a Signer and a Verifier sends
// a createEntry whose body verifies against the participant's certificate,
// byte for byte as signed, and accepts the DICT's signed answer; an answer
// whose signature does not verify is an error wrapping
// dict.ErrSignatureInvalid, and the mirror was settled all the same.
func TestClientSignsAndVerifies(t *testing.T) {
	testCerts(t)
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	dictSigner := dictLeaf.signer(t)
	var tamper bool
	var received [][]byte
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		received = append(received, body)
		if err := verifierOf(t, psp.cert).Verify(r.Context(), "createEntry", body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer, err := dictSigner.Sign(r.Context(), "createEntry", official(t, "entries/CreateEntryResponse.xml"))
		require.NoError(t, err)
		if tamper {
			answer = bytes.Replace(answer, []byte("João Silva"), []byte("Mallory"), 1)
		}
		w.Header().Set("Content-Type", dict.ContentTypeXML)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(hs.Close)
	c, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: e.limiter, Catalog: e.catalog,
		Signer: psp.signer(t), Verifier: verifierOf(t, dictCA.cert), Logger: quiet})
	require.NoError(t, err)
	entry := dict.Entry{Key: "nova.chave@example.com", KeyType: dict.KeyEmail,
		Account: dict.Account{Participant: ispb, Branch: "0001", AccountNumber: "0001112223", AccountType: "CACC", OpeningDate: dict.Timestamp{Time: time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)}},
		Owner:   dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: cpfPF, Name: "Fulana"}}

	res, err := c.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: entry, RequestID: "a946d533-7f22-42a5-9a9b-e87cd55c0f4d"})
	require.NoError(t, err)
	require.NotNil(t, res.Response)
	require.Equal(t, "João Silva", res.Response.Entry.Owner.Name)
	require.Len(t, received, 1)
	want, err := dict.Marshal(&dict.CreateEntryRequest{Entry: entry, Reason: "USER_REQUESTED", RequestID: "a946d533-7f22-42a5-9a9b-e87cd55c0f4d"})
	require.NoError(t, err)
	require.Equal(t, string(withoutSignature(t, want)), string(withoutSignature(t, received[0])), "the body sent is the one signed")
	before := e.tokens(dict.PolicyEntriesWrite, ispb)

	tamper = true
	res, err = c.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: entry})
	require.ErrorIs(t, err, dict.ErrSignatureInvalid)
	require.Nil(t, res.Response)
	require.True(t, res.Decision.Allowed)
	require.Equal(t, before-1, e.tokens(dict.PolicyEntriesWrite, ispb), "settled by the 201: one token")
}
