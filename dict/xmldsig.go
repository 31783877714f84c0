package dict

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

// The DICT's signature profile (OpenAPI 1.8.0, "Assinatura digital";
// docs/decisions/0060): the participant signs its writes, the DICT signs
// every answer, and clients validate them. The signature is an enveloped
// XMLDSig Signature, a child of the root, with one Reference to URI "" (the
// enveloped-signature and exclusive C14N transforms, SHA-256), SignedInfo in
// exclusive C14N signed RSA-SHA256, and the signer's certificate in KeyInfo.

// Algorithms of the DICT's signature profile.
const (
	signatureMethodRSASHA256 = dsig.RSASHA256SignatureMethod
	canonicalizationExcC14N  = string(dsig.CanonicalXML10ExclusiveAlgorithmId)
)

// ErrSignatureInvalid means a DICT document's signature is missing, does
// not verify, does not follow the DICT's profile, or was made with a
// certificate that is not trusted.
var ErrSignatureInvalid = errors.New("dict: invalid XML signature")

// Verifier checks the signature of a DICT answer (see XMLVerifier).
type Verifier interface {
	// Verify returns nil when body carries a valid signature of a trusted
	// signer, else an error wrapping ErrSignatureInvalid.
	Verify(ctx context.Context, op string, body []byte) error
}

var (
	_ Signer   = (*XMLSigner)(nil)
	_ Verifier = (*XMLVerifier)(nil)
)

// XMLSigner signs the bodies of DICT write requests with the participant's
// RSA key, in the DICT's profile (see above). Safe for concurrent use.
type XMLSigner struct {
	key  crypto.Signer
	cert *x509.Certificate
}

// newXMLSigner returns a signer with key, whose public half must be cert's
// (an RSA key: the profile signs RSA-SHA256). cert goes into KeyInfo.
func newXMLSigner(key crypto.Signer, cert *x509.Certificate) (*XMLSigner, error) {
	if key == nil || cert == nil {
		return nil, errors.New("dict: signer needs a key and its certificate")
	}
	pub, ok := key.Public().(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("dict: signing key is a %T: the DICT's profile signs RSA-SHA256", key.Public())
	}
	if !pub.Equal(cert.PublicKey) {
		return nil, errors.New("dict: the signing key does not match the certificate")
	}
	return &XMLSigner{key: key, cert: cert}, nil
}

// LoadXMLSigner reads a PEM certificate and its PEM private key (PKCS #1,
// PKCS #8 or the like, as tls.LoadX509KeyPair reads them) and returns
// newXMLSigner of them.
func LoadXMLSigner(certFile, keyFile string) (*XMLSigner, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("dict: signing certificate: %w", err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("dict: signing key is a %T, not a signer", pair.PrivateKey)
	}
	return newXMLSigner(key, pair.Leaf) // parsed by LoadX509KeyPair
}

// Sign returns body with its Signature child of the root (an empty
// placeholder, as Marshal writes it, or an earlier signature) replaced by the
// signature, or one inserted as the root's first child; every other byte is kept.
func (s *XMLSigner) Sign(_ context.Context, op string, body []byte) ([]byte, error) {
	start, end, err := signatureSpan(body)
	if err != nil {
		return nil, fmt.Errorf("dict: sign %s: %w", op, err)
	}
	unsigned := append(body[:start:start], body[end:]...) // a copy: the capacity is clipped
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(unsigned); err != nil {
		return nil, fmt.Errorf("dict: sign %s: %w", op, err)
	}
	sc, err := dsig.NewSigningContext(s.key, [][]byte{s.cert.Raw})
	if err != nil {
		return nil, fmt.Errorf("dict: sign %s: %w", op, err)
	}
	sc.Hash = crypto.SHA256
	sc.Prefix = "" // <Signature xmlns="http://www.w3.org/2000/09/xmldsig#">, as in the examples
	sc.Canonicalizer = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	sig, err := sc.ConstructSignature(doc.Root(), true)
	if err != nil {
		return nil, fmt.Errorf("dict: sign %s: %w", op, err)
	}
	sigDoc := etree.NewDocument()
	sigDoc.SetRoot(sig)
	sigXML, err := sigDoc.WriteToBytes()
	if err != nil {
		return nil, fmt.Errorf("dict: sign %s: %w", op, err)
	}
	return append(append(body[:start:start], sigXML...), body[end:]...), nil
}

// signatureSpan finds the byte span of the Signature child of the root
// element of doc (start == end: none, the position right after the root's
// start tag).
func signatureSpan(doc []byte) (start, end int, err error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	depth, rootEnd, inSig := 0, -1, false
	for {
		before := int(dec.InputOffset())
		tok, err := dec.RawToken()
		if errors.Is(err, io.EOF) {
			return 0, 0, errors.New("no root element")
		}
		if err != nil {
			return 0, 0, err
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if depth++; rootEnd < 0 {
				rootEnd = int(dec.InputOffset())
			}
			if depth == 2 && tk.Name.Local == "Signature" && !inSig {
				inSig, start = true, before
			}
		case xml.EndElement:
			if depth == 2 && inSig {
				return start, int(dec.InputOffset()), nil
			}
			depth--
			if depth == 0 { // no Signature child: sign right after the root's start tag
				if bytes.HasSuffix(doc[:rootEnd], []byte("/>")) {
					return 0, 0, errors.New("the root element is empty")
				}
				return rootEnd, rootEnd, nil
			}
		}
	}
}

// XMLVerifier validates the signature of DICT answers: it must follow the
// DICT's profile, cover the whole document, and be made with its KeyInfo's
// certificate, one of the trusted certificates or issued by one of them and
// valid at the verifier's clock. Safe for concurrent use.
type XMLVerifier struct {
	trusted []*x509.Certificate
	pool    *x509.CertPool
	now     func() time.Time
}

// newXMLVerifier returns a verifier that trusts the given certificates
// (the DICT's signing certificate, or the CA that issues it). now is the
// clock certificates are checked at (nil: the system clock).
func newXMLVerifier(now func() time.Time, trusted ...*x509.Certificate) (*XMLVerifier, error) {
	if len(trusted) == 0 {
		return nil, errors.New("dict: verifier needs at least one trusted certificate")
	}
	if now == nil {
		now = time.Now
	}
	pool := x509.NewCertPool()
	for _, c := range trusted {
		pool.AddCert(c)
	}
	return &XMLVerifier{trusted: trusted, pool: pool, now: now}, nil
}

// LoadXMLVerifier reads the trusted certificates from a PEM file and
// returns newXMLVerifier of them on the system clock.
func LoadXMLVerifier(pemFile string) (*XMLVerifier, error) {
	data, err := os.ReadFile(pemFile)
	if err != nil {
		return nil, fmt.Errorf("dict: verification certificate: %w", err)
	}
	var certs []*x509.Certificate
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("dict: verification certificate %s: %w", pemFile, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("dict: verification certificate %s: no PEM certificate in it", pemFile)
	}
	return newXMLVerifier(nil, certs...)
}

// Verify implements Verifier. The error wraps ErrSignatureInvalid.
func (v *XMLVerifier) Verify(_ context.Context, op string, body []byte) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSignatureInvalid, op, fmt.Sprintf(format, args...))
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(body); err != nil {
		return bad("%v", err)
	}
	root := doc.Root()
	if root == nil {
		return bad("no root element")
	}
	sigEl := root.FindElement("./Signature[namespace-uri()='" + signatureNamespace + "']")
	if sigEl == nil || len(sigEl.ChildElements()) == 0 {
		return bad("not signed")
	}
	// The profile: what goxmldsig would also accept (RSA-SHA1, C14N 1.1)
	// is refused here.
	if m := algorithm(sigEl, "./SignedInfo/SignatureMethod"); m != signatureMethodRSASHA256 {
		return bad("signature method %q, want %s", m, signatureMethodRSASHA256)
	}
	if m := algorithm(sigEl, "./SignedInfo/CanonicalizationMethod"); m != canonicalizationExcC14N {
		return bad("canonicalization %q, want %s", m, canonicalizationExcC14N)
	}
	cert, err := keyInfoCertificate(sigEl)
	if err != nil {
		return bad("%v", err)
	}
	now := v.now()
	if !v.trusts(cert, now) {
		return bad("certificate %q is not trusted", cert.Subject.String())
	}
	vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{cert}})
	vc.Clock = dsig.NewFakeClockAt(now)
	if _, err := vc.Validate(root); err != nil {
		return bad("%v", err)
	}
	return nil
}

// trusts reports whether cert is a trusted certificate, or issued by one
// and valid at now.
func (v *XMLVerifier) trusts(cert *x509.Certificate, now time.Time) bool {
	if slices.ContainsFunc(v.trusted, cert.Equal) {
		return true
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: v.pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// algorithm returns the Algorithm attribute of the element at path under
// el, or "".
func algorithm(el *etree.Element, path string) string {
	if el = el.FindElement(path); el == nil {
		return ""
	}
	return el.SelectAttrValue("Algorithm", "")
}

// keyInfoCertificate reads the first certificate of sig's KeyInfo.
func keyInfoCertificate(sig *etree.Element) (*x509.Certificate, error) {
	el := sig.FindElement("./KeyInfo/X509Data/X509Certificate")
	if el == nil {
		return nil, errors.New("no X509Certificate in KeyInfo")
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(el.Text()), ""))
	if err != nil {
		return nil, fmt.Errorf("KeyInfo certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}
