package sifensim

// The simulator's own reading and writing of SIFEN's wire format: SOAP 1.2
// envelopes, the base64 ZIP of a lot, the rLoteDE document and its rDE
// elements, SET's module-11 check digit. None of it is shared with balde's
// client (package sifen): a mistake on either side shows as a disagreement.

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The namespaces of SIFEN's messages and of SOAP 1.2.
const (
	nsSIFEN = "http://ekuatia.set.gov.py/sifen/xsd"
	nsSOAP  = "http://www.w3.org/2003/05/soap-envelope"
)

const maxInflated = 64 << 20 // what a lot's ZIP may inflate to (a ZIP bomb guard)

// reqEnvelope is a SOAP 1.2 request whose body holds a T.
type reqEnvelope[T any] struct {
	XMLName xml.Name `xml:"http://www.w3.org/2003/05/soap-envelope Envelope"`
	Body    struct {
		Content *T
	} `xml:"http://www.w3.org/2003/05/soap-envelope Body"`
}

// The three requests.
type envioLote struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnvioLote"`
	XDE     string   `xml:"xDE"`
}

type consLote struct {
	XMLName   xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsLoteDe"`
	LotNumber string   `xml:"dProtConsLote"`
}

type consDE struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsDeRequest"`
	CDC     string   `xml:"dCDC"`
}

// el is an element of an answer: a name and either text or children.
type el struct {
	name, text string
	children   []el
}

func t(name, text string) el           { return el{name: name, text: text} }
func g(name string, children ...el) el { return el{name: name, children: children} }

func (e el) write(b *bytes.Buffer, attrs string) {
	b.WriteString("<ns2:" + e.name + attrs + ">")
	if e.children == nil {
		_ = xml.EscapeText(b, []byte(e.text))
	}
	for _, c := range e.children {
		c.write(b, "")
	}
	b.WriteString("</ns2:" + e.name + ">")
}

// answer renders a SOAP 1.2 answer as SIFEN writes it: prefix env for the
// envelope, ns2 for SIFEN's elements.
func answer(body el) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="` + nsSOAP + `"><env:Header/><env:Body>`)
	body.write(&b, ` xmlns:ns2="`+nsSIFEN+`"`)
	b.WriteString(`</env:Body></env:Envelope>`)
	return b.Bytes()
}

// fault answers a SOAP 1.2 env:Sender fault with status, counted as "fault".
func (s *Server) fault(w http.ResponseWriter, service, env string, status int, reason string) {
	s.count(service, env, "", "fault")
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>`)
	b.WriteString(`<env:Envelope xmlns:env="` + nsSOAP + `"><env:Body><env:Fault><env:Code><env:Value>env:Sender`)
	b.WriteString(`</env:Value></env:Code><env:Reason><env:Text xml:lang="es">`)
	_ = xml.EscapeText(&b, []byte(reason))
	b.WriteString(`</env:Text></env:Reason></env:Fault></env:Body></env:Envelope>`)
	writeXML(w, status, b.Bytes())
}

// DE is one rDE of a lot as the simulator reads it. Fields are the text
// found, unvalidated: validation is the processing's job.
type DE struct {
	CDC        string // the Id attribute of DE
	Type       string // gTimb/iTiDE
	RUC, DV    string // gDatGralOpe/gEmis/dRucEm and dDVEmi
	IssuerName string // gEmis/dNomEmi (testIssuerName in the test environment)
	Signed     bool   // rDE holds a ds:Signature element
	XML        []byte // the rDE element as it was in the lot
}

// rde is what the simulator decodes of an rDE.
type rde struct {
	DE struct {
		ID   string `xml:"Id,attr"`
		Type string `xml:"http://ekuatia.set.gov.py/sifen/xsd gTimb>iTiDE"`
		Emis struct {
			RUC  string `xml:"http://ekuatia.set.gov.py/sifen/xsd dRucEm"`
			DV   string `xml:"http://ekuatia.set.gov.py/sifen/xsd dDVEmi"`
			Name string `xml:"http://ekuatia.set.gov.py/sifen/xsd dNomEmi"`
		} `xml:"http://ekuatia.set.gov.py/sifen/xsd gDatGralOpe>gEmis"`
	} `xml:"http://ekuatia.set.gov.py/sifen/xsd DE"`
	Signature *struct{} `xml:"http://www.w3.org/2000/09/xmldsig# Signature"`
}

// unpackLot decodes xDE (base64), unzips its one file and reads its rLoteDE
// document (root in no namespace, as DNIT's example writes it, or in SIFEN's;
// rDE elements in SIFEN's; a UTF-8 byte order mark accepted). It returns the
// DEs and the lot's identity, the hex SHA-256 of the inflated document.
func unpackLot(xde string) ([]DE, string, error) {
	z, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(xde), ""))
	if err != nil {
		return nil, "", fmt.Errorf("xDE no es base64: %w", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, "", fmt.Errorf("xDE no es un archivo ZIP: %w", err)
	}
	if len(zr.File) != 1 {
		return nil, "", fmt.Errorf("el ZIP contiene %d archivos (uno esperado)", len(zr.File))
	}
	f, err := zr.File[0].Open()
	if err != nil {
		return nil, "", fmt.Errorf("ZIP: %w", err)
	}
	defer f.Close()
	doc, err := io.ReadAll(io.LimitReader(f, maxInflated+1))
	if err != nil {
		return nil, "", fmt.Errorf("ZIP: %w", err)
	}
	if len(doc) > maxInflated {
		return nil, "", errors.New("el ZIP es demasiado grande descomprimido")
	}
	sum := sha256.Sum256(doc)
	des, err := readLot(bytes.TrimPrefix(doc, []byte("\xef\xbb\xbf")))
	return des, hex.EncodeToString(sum[:]), err
}

// readLot reads an rLoteDE document.
func readLot(doc []byte) ([]DE, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var des []DE
	root, depth := false, 0
	for {
		off := d.InputOffset()
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("XML mal formado: %w", err)
		}
		switch tk := tok.(type) {
		case xml.Directive:
			return nil, errors.New("XML mal formado: DOCTYPE no permitido")
		case xml.StartElement:
			if !root {
				if tk.Name.Local != "rLoteDE" || (tk.Name.Space != "" && tk.Name.Space != nsSIFEN) {
					return nil, fmt.Errorf("XML mal formado: la raíz es %s, no rLoteDE", tk.Name.Local)
				}
				root, depth = true, 1
				continue
			}
			if depth != 1 || tk.Name != (xml.Name{Space: nsSIFEN, Local: "rDE"}) {
				return nil, fmt.Errorf("XML mal formado: rLoteDE contiene %s {%s}", tk.Name.Local, tk.Name.Space)
			}
			var r rde
			if err := d.DecodeElement(&r, &tk); err != nil {
				return nil, fmt.Errorf("XML mal formado: DE %d: %w", len(des)+1, err)
			}
			des = append(des, DE{
				CDC: strings.TrimSpace(r.DE.ID), Type: strings.TrimSpace(r.DE.Type),
				RUC: strings.TrimSpace(r.DE.Emis.RUC), DV: strings.TrimSpace(r.DE.Emis.DV),
				IssuerName: strings.TrimSpace(r.DE.Emis.Name), Signed: r.Signature != nil,
				XML: bytes.Clone(doc[off:d.InputOffset()]),
			})
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 1 && len(bytes.TrimSpace(tk)) > 0 {
				return nil, errors.New("XML mal formado: texto en rLoteDE")
			}
		}
	}
	if !root {
		return nil, errors.New("XML mal formado: sin rLoteDE")
	}
	return des, nil
}

// checkDigit is SET's module-11 check digit (base 11) of s, as SET
// publishes it for the RUC: letters are uppercased, every character that is
// not a digit is replaced by its ASCII code, the digits are weighted 2..11
// from the right (starting again at 2), and with r = sum mod 11 the digit
// is 11 - r when r > 1, else 0.
func checkDigit(s string) int {
	var digits strings.Builder
	for _, c := range strings.ToUpper(s) {
		if c >= '0' && c <= '9' {
			digits.WriteRune(c)
		} else {
			digits.WriteString(strconv.Itoa(int(c)))
		}
	}
	ds, sum := digits.String(), 0
	for i, k := len(ds)-1, 2; i >= 0; i, k = i-1, (k-1)%10+2 { // k: 2..11, then 2 again
		sum += int(ds[i]-'0') * k
	}
	if r := sum % 11; r > 1 {
		return 11 - r
	}
	return 0
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// deProblem is SIFEN's per-DE rejection of a DE that does not hold
// together: the code and message, or "" when it does. The codes are the
// simulator's (docs/guides/sifen.md: which rules are DNIT's).
func deProblem(de DE) (code, msg string) {
	switch {
	case de.RUC == "" || de.DV == "":
		return "1250", "RUC del emisor no informado"
	case len(de.DV) != 1 || !allDigits(de.DV) || strconv.Itoa(checkDigit(de.RUC)) != de.DV:
		return "1251", "DV del RUC del emisor inválido"
	case len(de.CDC) != 44 || !allDigits(de.CDC):
		return "1000", "CDC inválido"
	case strconv.Itoa(checkDigit(de.CDC[:43])) != de.CDC[43:]:
		return "1003", "DV del CDC inválido"
	}
	typ, err := strconv.Atoi(de.Type)
	if err != nil || fmt.Sprintf("%02d", typ) != de.CDC[:2] {
		return "1000", "CDC no corresponde con las informaciones del XML (tipo de DE)"
	}
	if allDigits(de.RUC) && len(de.RUC) <= 8 && strings.Repeat("0", 8-len(de.RUC))+de.RUC+de.DV != de.CDC[2:11] {
		return "1000", "CDC no corresponde con las informaciones del XML (RUC del emisor)"
	}
	return "", ""
}
