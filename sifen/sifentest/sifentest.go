// Package sifentest builds SIFEN documents for tests: DEs (rDE) with a
// correct, or deliberately wrong, RUC check digit and CDC, and lots of them.
// The documents follow the layout of SIFEN's v150 schema closely enough for
// balde, which reads only the issuer, the type and the CDC; the signature is
// a placeholder.
package sifentest

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/sifen"
)

// Doc describes one DE to build. The zero value is a valid invoice of RUC
// 80069563-1, number 1.
type Doc struct {
	RUC    string    // dRucEm; default "80069563"
	BadDV  bool      // writes a wrong check digit (the right one plus 1, mod 10)
	NoRUC  bool      // leaves dRucEm and dDVEmi out
	Type   int       // iTiDE; default 1 (invoice)
	Number int       // dNumDoc, 1..9999999, which makes the CDC unique; default 1
	Filler int       // bytes of incompressible text in the QR field, to make a lot too big once compressed
	Date   time.Time // the emission date; default 2026-01-02 10:00 (Asunción)
	// Prod writes a production issuer name (dNomEmi); by default the DE
	// carries the name SIFEN requires in its test environment, and balde
	// refuses to send it to prod.
	Prod     bool
	Unsigned bool // leaves the ds:Signature out
}

func (d Doc) withDefaults() Doc {
	d.RUC, d.Type, d.Number = cmp.Or(d.RUC, "80069563"), cmp.Or(d.Type, 1), cmp.Or(d.Number, 1)
	if d.Date.IsZero() {
		d.Date = time.Date(2026, 1, 2, 10, 0, 0, 0, time.FixedZone("PYT", -3*3600))
	}
	return d
}

// DV returns the check digit written in dDVEmi.
func (d Doc) DV() int {
	d = d.withDefaults()
	dv := sifen.CheckDigit(d.RUC)
	if d.BadDV {
		dv = (dv + 1) % 10
	}
	return dv
}

// SecurityCode is the DE's dCodSeg, derived from its number.
func (d Doc) SecurityCode() string {
	d = d.withDefaults()
	return fmt.Sprintf("%09d", (d.Number*7919+12345)%1_000_000_000)
}

// CDC returns the DE's 44-digit control code (valid for the written RUC and
// check digit, with its own module-11 digit).
func (d Doc) CDC() string {
	d = d.withDefaults()
	ruc := d.RUC
	if strings.Trim(ruc, "0123456789") != "" {
		ruc = "0"
	}
	base := fmt.Sprintf("%02d%08s%d%s%s%07d%d%s%d%s",
		d.Type, ruc, d.DV(), "001", "001", d.Number, 2, d.Date.Format("20060102"), 1, d.SecurityCode())
	base = strings.ReplaceAll(base, " ", "0")
	return base + strconv.Itoa(sifen.CheckDigit(base))
}

// typeNames are dDesTiDE by DE type; any other type is "Documento electrónico".
var typeNames = map[int]string{1: "Factura electrónica", 4: "Autofactura electrónica",
	5: "Nota de crédito electrónica", 6: "Nota de débito electrónica", 7: "Nota de remisión electrónica"}

// XML returns the DE as a standalone rDE element (no XML declaration).
func (d Doc) XML() []byte {
	d = d.withDefaults()
	cdc := d.CDC()
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<rDE xmlns="%s" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="%s siRecepDE_v150.xsd">`, sifen.Namespace, sifen.Namespace)
	w("\n<dVerFor>150</dVerFor>\n")
	w(`<DE Id="%s">`, cdc)
	w(`<dDVId>%c</dDVId><dFecFirma>%s</dFecFirma><dSisFact>1</dSisFact>`, cdc[43], d.Date.Format("2006-01-02T15:04:05"))
	w(`<gOpeDE><iTipEmi>1</iTipEmi><dDesTipEmi>Normal</dDesTipEmi><dCodSeg>%s</dCodSeg></gOpeDE>`, d.SecurityCode())
	w(`<gTimb><iTiDE>%d</iTiDE><dDesTiDE>%s</dDesTiDE><dNumTim>12560693</dNumTim><dEst>001</dEst><dPunExp>001</dPunExp><dNumDoc>%07d</dNumDoc><dFeIniT>2025-01-01</dFeIniT></gTimb>`,
		d.Type, cmp.Or(typeNames[d.Type], "Documento electrónico"), d.Number)
	w(`<gDatGralOpe><dFeEmiDE>%s</dFeEmiDE>`, d.Date.Format("2006-01-02T15:04:05"))
	w(`<gOpeCom><iTipTra>1</iTipTra><dDesTipTra>Venta de mercadería</dDesTipTra><iTImp>1</iTImp><dDesTImp>IVA</dDesTImp><cMoneOpe>PYG</cMoneOpe><dDesMoneOpe>Guarani</dDesMoneOpe></gOpeCom>`)
	w(`<gEmis>`)
	if !d.NoRUC {
		w(`<dRucEm>%s</dRucEm><dDVEmi>%d</dDVEmi>`, d.RUC, d.DV())
	}
	issuer := "DE generado en ambiente de prueba - sin valor comercial ni fiscal"
	if d.Prod {
		issuer = "Empresa de Ejemplo S.A."
	}
	w(`<iTipCont>2</iTipCont><dNomEmi>%s</dNomEmi>`, issuer)
	w(`<dDirEmi>Avda. Mariscal López 1234</dDirEmi><dNumCas>1234</dNumCas><cDepEmi>1</cDepEmi><dDesDepEmi>CAPITAL</dDesDepEmi><cCiuEmi>1</cCiuEmi><dDesCiuEmi>ASUNCION (DISTRITO)</dDesCiuEmi><dTelEmi>021000000</dTelEmi><dEmailE>facturacion@example.com.py</dEmailE>`)
	w(`<gActEco><cActEco>62010</cActEco><dDesActEco>Actividades de programación informática</dDesActEco></gActEco></gEmis>`)
	w(`<gDatRec><iNatRec>1</iNatRec><iTiOpe>1</iTiOpe><cPaisRec>PRY</cPaisRec><dDesPaisRe>Paraguay</dDesPaisRe><iTiContRec>1</iTiContRec><dRucRec>88888801</dRucRec><dDVRec>5</dDVRec><dNomRec>Cliente de prueba</dNomRec></gDatRec>`)
	w(`</gDatGralOpe>`)
	w(`<gDtipDE><gCamFE><iIndPres>1</iIndPres><dDesIndPres>Operación presencial</dDesIndPres></gCamFE><gCamCond><iCondOpe>1</iCondOpe><dDCondOpe>Contado</dDCondOpe></gCamCond>`)
	w(`<gCamItem><dCodInt>001</dCodInt><dDesProSer>Servicio de desarrollo</dDesProSer><cUniMed>77</cUniMed><dDesUniMed>UNI</dDesUniMed><dCantProSer>1</dCantProSer><gValorItem><dPUniProSer>110000</dPUniProSer><dTotBruOpeItem>110000</dTotBruOpeItem></gValorItem></gCamItem></gDtipDE>`)
	w(`<gTotSub><dTotOpe>110000</dTotOpe><dTotGralOpe>110000</dTotGralOpe><dIVA10>10000</dIVA10><dTotIVA>10000</dTotIVA></gTotSub>`)
	w("</DE>\n")
	if !d.Unsigned {
		w(`<Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo><CanonicalizationMethod Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/><SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/><Reference URI="#%s"><DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><DigestValue>AAAA</DigestValue></Reference></SignedInfo><SignatureValue>AAAA</SignatureValue></Signature>`, cdc)
	}
	w("\n<gCamFuFD><dCarQR>https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150&amp;Id=%s", cdc)
	if d.Filler > 0 {
		r := rand.New(rand.NewPCG(uint64(d.Number), uint64(d.Filler)))
		raw := make([]byte, d.Filler*3/4+1)
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		w("&amp;f=%s", base64.RawURLEncoding.EncodeToString(raw)[:d.Filler])
	}
	w("</dCarQR></gCamFuFD>\n</rDE>")
	return b.Bytes()
}

// File returns the DE as a document: an XML declaration and the rDE.
func (d Doc) File() []byte {
	return append([]byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"), d.XML()...)
}

// Lote returns an rLoteDE document holding docs, in order.
func Lote(docs ...Doc) []byte {
	b := bytes.NewBufferString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<rLoteDE>\n")
	for _, d := range docs {
		b.Write(d.XML())
		b.WriteString("\n")
	}
	b.WriteString("</rLoteDE>\n")
	return b.Bytes()
}

// Docs returns n invoices of one RUC numbered from first.
func Docs(ruc string, first, n int) []Doc {
	docs := make([]Doc, n)
	for i := range docs {
		docs[i] = Doc{RUC: ruc, Number: first + i}
	}
	return docs
}
