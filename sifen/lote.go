package sifen

import (
	"archive/zip"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The lot rules SIFEN enforces (it answers 0301, and may block the RUC, when
// one is broken), and the parser's bounds.
const (
	maxLotDEs = 50
	// maxLotMessageBytes bounds the siRecepLoteDE message as sent (base64 and
	// envelope included; DNIT's best-practice guide, Oct 2024, §4 e): "1000 KB"
	// read as 1,000,000 bytes, the stricter reading (decision 0045).
	maxLotMessageBytes = 1_000_000
	// maxItems is the most gCamItem in a DE (maxOccurs in the v150 schema).
	maxItems = 999
	// maxLotXMLBytes bounds what a lot's ZIP may inflate to, as a lot file
	// (docs/decisions/0167: a ZIP bomb stops there).
	maxLotXMLBytes = maxFileSize
	lotFileName    = "lote.xml"
	// maxDepth is the deepest element nesting accepted, from the root (a DE
	// nests about 8 levels, a signature about 6).
	maxDepth = 64
	// ctxCheckEvery is how many tokens the parser reads between looks at its
	// context.
	ctxCheckEvery = 1024
)

// DE is one electronic document (an rDE element) and what the throttle and
// the lot rules need from it.
type DE struct {
	// RUC is the issuer (gEmis/dRucEm and dDVEmi), validated.
	RUC RUC
	// Type is gTimb/iTiDE (1 invoice, 4 self-invoice, 5 credit note, ...).
	Type int
	// CDC is the 44-digit control code, DE's Id attribute.
	CDC string
	// Signed reports a ds:Signature element in rDE.
	Signed bool
	// TestIssuer reports the dNomEmi SIFEN requires of every test DE
	// (testIssuerName): such a DE never goes to prod.
	TestIssuer bool
	// XML is the rDE element exactly as in the input, made standalone: the
	// namespace declarations it inherited from rLoteDE are added to its start
	// tag, so a signature over DE stays valid.
	XML []byte
}

// Lote is a lot of DEs, parsed. A single rDE parses as a lot of one.
type Lote struct {
	DEs []DE
}

// ParseLote reads a DE (root rDE) or a lot (root rLoteDE holding rDE
// elements) in SIFEN's namespace and returns every DE with its RUC, check
// digit, type and CDC validated. It does not apply the lot rules (see Pack).
//
// Errors wrap ErrMalformedXML, ErrMissingRUC, ErrInvalidRUC, ErrInvalidDV,
// ErrInvalidCDC or ErrInvalidType and name the DE at fault (from 1); an
// empty rLoteDE is ErrLotEmpty.
func ParseLote(data []byte) (Lote, error) {
	return parseLoteContext(context.Background(), data)
}

// parseLoteContext is ParseLote that gives up when ctx ends, in time linear
// in len(data).
func parseLoteContext(ctx context.Context, data []byte) (Lote, error) {
	return parseLoteFrom(ctx, bytes.NewReader(data), int64(len(data)))
}

// ParseLoteZip parses, as ParseLote, the lot of siRecepLoteDE's xDE (a ZIP
// of one file) while it inflates, keeping in memory only the DEs and the one
// being read, and inflating at most maxLotXMLBytes (docs/decisions/0167).
// It gives up when ctx ends. Errors: ParseLote's; ErrMalformedXML for a ZIP
// that is not one file; ErrLotTooBig past the limit.
func ParseLoteZip(ctx context.Context, z []byte) (Lote, error) {
	f, err := openLotZip(z)
	if err != nil {
		return Lote{}, err
	}
	defer f.Close()
	lot, err := parseLoteFrom(ctx, f, maxLotXMLBytes)
	if errors.Is(err, errInflated) {
		// However deep in the document the limit was met.
		return Lote{}, fmt.Errorf("%w: %w", ErrLotTooBig, errInflated)
	}
	return lot, err
}

// parseLoteFrom parses the lot read from r, at most limit bytes of it
// (errInflated beyond); a UTF-8 byte order mark is dropped.
func parseLoteFrom(ctx context.Context, r io.Reader, limit int64) (Lote, error) {
	if err := ctx.Err(); err != nil {
		return Lote{}, fmt.Errorf("sifen: parse lot: %w", err)
	}
	br := bufio.NewReader(r)
	if head, _ := br.Peek(3); bytes.Equal(head, []byte("\xef\xbb\xbf")) {
		_, _ = br.Discard(3) // a UTF-8 byte order mark
	}
	w := &window{r: br, limit: limit}
	d := &decoder{Decoder: xml.NewDecoder(w), ctx: ctx, src: w}
	tok, off, err := d.next("before the root element")
	root, ok := tok.(xml.StartElement)
	if err != nil || !ok {
		return Lote{}, cmp.Or(err, malformed(io.EOF))
	}
	var l Lote
	switch {
	case root.Name == xml.Name{Space: Namespace, Local: "rDE"}:
		de, err := parseRDE(d, root, off, nil)
		if err != nil {
			return Lote{}, err
		}
		l.DEs = append(l.DEs, de)
	case root.Name == xml.Name{Space: Namespace, Local: "rLoteDE"}, root.Name == xml.Name{Local: "rLoteDE"}:
		// DNIT's example writes rLoteDE without a namespace; both forms are read.
		if l.DEs, err = parseLotBody(d, nsDecls(root.Attr)); err != nil {
			return Lote{}, err
		}
		if len(l.DEs) == 0 {
			return Lote{}, fmt.Errorf("%w: rLoteDE is empty", ErrLotEmpty)
		}
	default:
		return Lote{}, fmt.Errorf("%w: root element {%s}%s is neither rDE of %s nor rLoteDE", ErrMalformedXML, root.Name.Space, root.Name.Local, Namespace)
	}
	// Only comments, processing instructions and spaces may follow the root.
	switch tok, _, err := d.next("after the root element"); {
	case err != nil:
		return Lote{}, err
	case tok != nil:
		return Lote{}, fmt.Errorf("%w: more than one root element", ErrMalformedXML)
	}
	return l, nil
}

// errInflated is window's error past its limit.
var errInflated = fmt.Errorf("the ZIP inflates beyond %d bytes (a lot's XML holds at most %d MiB)", maxLotXMLBytes, maxLotXMLBytes>>20)

// window reads r, keeping what it read from the first offset not forgotten
// for the decoder's offsets to cut DEs from, and fails with errInflated past
// limit bytes in all.
type window struct {
	r     io.Reader
	buf   []byte // the bytes read from offset base on
	base  int64
	read  int64
	limit int64
}

func (w *window) Read(p []byte) (int, error) {
	if w.read >= w.limit {
		// One byte more tells exactly limit bytes from more.
		p = p[:min(len(p), 1)]
	}
	n, err := w.r.Read(p)
	if w.read += int64(n); w.read > w.limit {
		return 0, errInflated
	}
	w.buf = append(w.buf, p[:n]...)
	return n, err
}

func (w *window) cut(from, to int64) []byte { return w.buf[from-w.base : to-w.base] }

func (w *window) forget(off int64) {
	if off <= w.base {
		return
	}
	n := copy(w.buf, w.buf[off-w.base:])
	w.buf, w.base = w.buf[:n], off
}

// parseLotBody reads the children of rLoteDE up to its end.
func parseLotBody(d *decoder, inherited []xml.Attr) ([]DE, error) {
	var des []DE
	for {
		tok, off, err := d.next("in rLoteDE") // between two DEs nothing is kept
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name != (xml.Name{Space: Namespace, Local: "rDE"}) {
				return nil, fmt.Errorf("%w: rLoteDE holds %s (only rDE)", ErrMalformedXML, t.Name.Local)
			}
			de, err := parseRDE(d, t, off, inherited)
			if err != nil {
				return nil, fmt.Errorf("DE %d of the lot: %w", len(des)+1, err)
			}
			des = append(des, de)
		case xml.EndElement:
			return des, nil
		default:
			return nil, cmp.Or(err, malformed(io.EOF))
		}
	}
}

// decoder is an xml.Decoder that counts the depth (the root is 1) and looks
// at its context every ctxCheckEvery tokens.
type decoder struct {
	*xml.Decoder
	ctx   context.Context
	src   *window
	depth int
	n     int
}

// errTooDeep is returned by decoder.Token past maxDepth.
var errTooDeep = fmt.Errorf("elements nested deeper than %d", maxDepth)

// Token refuses an element deeper than maxDepth, and stops when ctx ends.
func (d *decoder) Token() (xml.Token, error) {
	d.n++
	if d.n%ctxCheckEvery == 0 {
		if err := d.ctx.Err(); err != nil {
			return nil, err
		}
	}
	tok, err := d.Decoder.Token()
	if err != nil {
		return nil, err
	}
	switch tok.(type) {
	case xml.StartElement:
		d.depth++
		if d.depth > maxDepth {
			return nil, errTooDeep
		}
	case xml.EndElement:
		d.depth--
	}
	return tok, nil
}

func malformed(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sifen: parse lot: %w", err)
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: unexpected end of document", ErrMalformedXML)
	}
	return fmt.Errorf("%w: %w", ErrMalformedXML, err)
}

// next returns the next element start or end and its offset, forgetting
// what came before it and skipping spaces, comments and processing
// instructions; text or a directive there is an error saying where. At the
// end of the input the token and the error are nil.
func (d *decoder) next(where string) (xml.Token, int64, error) {
	for {
		off := d.InputOffset()
		d.src.forget(off)
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil, off, nil
		}
		if err != nil {
			return nil, off, malformed(err)
		}
		switch t := tok.(type) {
		case xml.StartElement, xml.EndElement:
			return t, off, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return nil, off, fmt.Errorf("%w: text %s", ErrMalformedXML, where)
			}
		case xml.Directive:
			return nil, off, fmt.Errorf("%w: directive %s: DOCTYPE and other directives are not accepted", ErrMalformedXML, where)
		}
	}
}

// nsDecls returns the namespace declarations among attrs, which encoding/xml
// leaves untranslated.
func nsDecls(attrs []xml.Attr) []xml.Attr {
	var out []xml.Attr
	for _, a := range attrs {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			out = append(out, a)
		}
	}
	return out
}

// The paths, below rDE, of what a DE must carry.
const (
	pathDE    = "DE"
	pathType  = "DE/gTimb/iTiDE"
	pathRUC   = "DE/gDatGralOpe/gEmis/dRucEm"
	pathRUCDV = "DE/gDatGralOpe/gEmis/dDVEmi"
	pathName  = "DE/gDatGralOpe/gEmis/dNomEmi"
	pathItem  = "DE/gDtipDE/gCamItem"
	// testIssuerName is dNomEmi of every DE of SIFEN's test environment.
	testIssuerName = "DE generado en ambiente de prueba - sin valor comercial ni fiscal"
	nsDSig         = "http://www.w3.org/2000/09/xmldsig#"
	// maxPathDepth is the depth of the deepest of them.
	maxPathDepth = 4
)

// joinPath joins path when it is short enough to be one of the paths above,
// else "": parsing stays linear however deep the document.
func joinPath(path []string) string {
	if len(path) > maxPathDepth {
		return ""
	}
	return strings.Join(path, "/")
}

// isValuePath reports whether p is the path of a value parseRDE reads.
func isValuePath(p string) bool {
	return p == pathType || p == pathRUC || p == pathRUCDV || p == pathName
}

// parseRDE reads the rest of the rDE element that start opened at offset
// off, keeping only the text of the values it reads.
func parseRDE(d *decoder, start xml.StartElement, off int64, inherited []xml.Attr) (DE, error) {
	var (
		path    []string // local names below rDE; "-" for elements of another namespace
		values  = make(map[string]string)
		text    strings.Builder
		collect bool // the element open is one of the values
		cdc     string
		hasCDC  bool
		signed  bool
		items   int
	)
	for {
		tok, err := d.Token()
		if err != nil {
			return DE{}, malformed(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := "-"
			if t.Name.Space == Namespace {
				name = t.Name.Local
			}
			if len(path) == 0 && t.Name == (xml.Name{Space: nsDSig, Local: "Signature"}) {
				signed = true
			}
			path = append(path, name)
			if len(path) == 3 && joinPath(path) == pathItem {
				if items++; items > maxItems {
					return DE{}, fmt.Errorf("%w: more than %d items (gCamItem) in one DE", ErrMalformedXML, maxItems)
				}
			}
			text.Reset()
			collect = isValuePath(joinPath(path))
			if len(path) == 1 && path[0] == pathDE {
				for _, a := range t.Attr {
					if a.Name == (xml.Name{Local: "Id"}) {
						cdc, hasCDC = a.Value, true
					}
				}
			}
		case xml.CharData:
			if collect {
				text.Write(t)
			}
		case xml.EndElement:
			if len(path) == 0 {
				// The end of rDE.
				end := d.InputOffset()
				de, err := newDE(standalone(d.src.cut(off, end), start.Attr, inherited), values, cdc, hasCDC)
				de.Signed, de.TestIssuer = signed, values[pathName] == testIssuerName
				return de, err
			}
			if p := joinPath(path); isValuePath(p) {
				if _, dup := values[p]; dup {
					return DE{}, fmt.Errorf("%w: two %s in one DE", ErrMalformedXML, path[len(path)-1])
				}
				values[p] = strings.TrimSpace(text.String())
			}
			path = path[:len(path)-1]
			text.Reset()
			collect = false
		case xml.Directive:
			return DE{}, fmt.Errorf("%w: directive inside rDE", ErrMalformedXML)
		}
	}
}

// newDE validates what parseRDE found.
func newDE(raw []byte, values map[string]string, cdc string, hasCDC bool) (DE, error) {
	num, dv := values[pathRUC], values[pathRUCDV]
	if num == "" {
		return DE{}, fmt.Errorf("%w: no gDatGralOpe/gEmis/dRucEm", ErrMissingRUC)
	}
	if dv == "" {
		return DE{}, fmt.Errorf("%w: no gDatGralOpe/gEmis/dDVEmi for RUC %q", ErrMissingRUC, num)
	}
	ruc, err := newRUC(num, dv)
	if err != nil {
		return DE{}, err
	}
	s := values[pathType]
	typ, err := strconv.Atoi(s)
	if err != nil || typ < 1 || len(s) > 2 || !isDigits(s) {
		return DE{}, fmt.Errorf("%w: iTiDE %q", ErrInvalidType, s)
	}
	if !hasCDC {
		return DE{}, fmt.Errorf("%w: DE has no Id attribute", ErrInvalidCDC)
	}
	if err := validateCDC(cdc, typ, ruc); err != nil {
		return DE{}, err
	}
	return DE{RUC: ruc, Type: typ, CDC: cdc, XML: raw}, nil
}

// validateCDC checks a CDC against its DE: 44 digits, laid out as
//
//	TT RRRRRRRR D EEE PPP NNNNNNN C YYYYMMDD E SSSSSSSSS V
//
// (type, zero-padded RUC and its check digit, establishment, point, number,
// taxpayer type, date, emission type, security code, module-11 check digit
// of the first 43). The type must be iTiDE, and an all-digit RUC the
// issuer's. Errors wrap ErrInvalidCDC.
func validateCDC(cdc string, typ int, ruc RUC) error {
	if len(cdc) != 44 || !isDigits(cdc) {
		return fmt.Errorf("%w: %q is not 44 digits", ErrInvalidCDC, cdc)
	}
	if want := CheckDigit(cdc[:43]); int(cdc[43]-'0') != want {
		return fmt.Errorf("%w: %s: check digit %c, want %d", ErrInvalidCDC, cdc, cdc[43], want)
	}
	if want := fmt.Sprintf("%02d", typ); cdc[:2] != want {
		return fmt.Errorf("%w: %s starts with type %s but iTiDE is %d", ErrInvalidCDC, cdc, cdc[:2], typ)
	}
	if isDigits(ruc.Number) {
		want := strings.Repeat("0", 8-len(ruc.Number)) + ruc.Number + strconv.Itoa(ruc.DV)
		if cdc[2:11] != want {
			return fmt.Errorf("%w: %s holds RUC %s-%c but the issuer is %s", ErrInvalidCDC, cdc, cdc[2:10], cdc[10], ruc)
		}
	}
	return nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool { return s != "" && strings.TrimLeft(s, "0123456789") == "" }

// standalone adds to raw's start tag the inherited namespace declarations it
// does not make itself.
func standalone(raw []byte, own, inherited []xml.Attr) []byte {
	var decl bytes.Buffer
	for _, a := range inherited {
		if slices.ContainsFunc(own, func(o xml.Attr) bool { return o.Name == a.Name }) {
			continue // an inherited declaration's name is one only a declaration has
		}
		name := "xmlns"
		if a.Name.Space == "xmlns" {
			name += ":" + a.Name.Local
		}
		decl.WriteString(" " + name + `="`)
		_ = xml.EscapeText(&decl, []byte(a.Value))
		decl.WriteByte('"')
	}
	if decl.Len() == 0 {
		return bytes.Clone(raw)
	}
	// The element name ends at the first space, '/' or '>'.
	i := bytes.IndexAny(raw, " \t\n\r/>")
	return append(append(raw[:i:i], decl.Bytes()...), raw[i:]...)
}

// validate applies the lot rules but size: 1 to maxLotDEs DEs, no CDC twice,
// one type, one issuer (ErrLotEmpty, ErrLotTooManyDEs, ErrLotDuplicateCDC,
// ErrLotMixedTypes, ErrLotMixedRUC).
func (l Lote) validate() error {
	switch {
	case len(l.DEs) == 0:
		return ErrLotEmpty
	case len(l.DEs) > maxLotDEs:
		return fmt.Errorf("%w: %d DEs", ErrLotTooManyDEs, len(l.DEs))
	}
	first := l.DEs[0]
	for i, de := range l.DEs {
		if slices.ContainsFunc(l.DEs[:i], func(o DE) bool { return o.CDC == de.CDC }) {
			return fmt.Errorf("%w: %s", ErrLotDuplicateCDC, de.CDC)
		}
		if de.Type != first.Type {
			return fmt.Errorf("%w: DE 1 is of type %d, DE %d of type %d", ErrLotMixedTypes, first.Type, i+1, de.Type)
		}
		if de.RUC != first.RUC {
			return fmt.Errorf("%w: DE 1 is from %s, DE %d from %s", ErrLotMixedRUC, first.RUC, i+1, de.RUC)
		}
	}
	return nil
}

// document is the rLoteDE SIFEN receives, as DNIT's guide and both public
// clients write it: without a namespace, the standalone DEs in order.
func (l Lote) document() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>`)
	b.WriteString(`<rLoteDE>`)
	for _, de := range l.DEs {
		b.Write(de.XML)
	}
	b.WriteString(`</rLoteDE>`)
	return b.Bytes()
}

// packedLot is a lot ready to travel: its rLoteDE XML, its ZIP (xDE before
// base64), and Hash, its identity: the hex SHA-256 of XML.
type packedLot struct {
	XML  []byte
	Zip  []byte
	Hash string
}

// Pack validates l and packs it (pack).
func (l Lote) Pack() (packedLot, error) {
	if err := l.validate(); err != nil {
		return packedLot{}, err
	}
	return l.pack()
}

// pack builds l's XML and ZIP, without validating l, and checks the size of
// the message that will carry it (ErrLotTooBig beyond maxLotMessageBytes).
func (l Lote) pack() (packedLot, error) {
	doc := l.document()
	z, err := ZipLote(doc)
	if err == nil {
		err = CheckMessageSize(len(z))
	}
	if err != nil {
		return packedLot{}, err
	}
	sum := sha256.Sum256(doc)
	return packedLot{XML: doc, Zip: z, Hash: hex.EncodeToString(sum[:])}, nil
}

// messageSize is the size of the siRecepLoteDE message carrying a ZIP of
// zipLen bytes, as Client.RecepcionLote writes it (15-digit dId, base64).
func messageSize(zipLen int) int {
	env, err := MarshalSOAP(EnvioLote{ID: "100000000000000"})
	if err != nil {
		panic(err) // a constant message always marshals
	}
	return len(env) + base64.StdEncoding.EncodedLen(zipLen)
}

// CheckMessageSize returns ErrLotTooBig when the message carrying a ZIP of
// zipLen bytes exceeds maxLotMessageBytes (base64 adds a third).
func CheckMessageSize(zipLen int) error {
	if err := checkMessageBytes(messageSize(zipLen)); err != nil {
		return fmt.Errorf("%w (ZIP of %d bytes)", err, zipLen)
	}
	return nil
}

// checkMessageBytes returns ErrLotTooBig for a message of n bytes over the
// limit.
func checkMessageBytes(n int) error {
	if n > maxLotMessageBytes {
		return fmt.Errorf("%w: the message would be %d bytes (at most %d)", ErrLotTooBig, n, maxLotMessageBytes)
	}
	return nil
}

// ZipLote returns a deflate ZIP holding doc as lote.xml, without timestamp:
// the same doc gives the same bytes.
func ZipLote(doc []byte) ([]byte, error) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: lotFileName, Method: zip.Deflate})
	if err == nil {
		_, err = w.Write(doc)
	}
	if err := cmp.Or(err, zw.Close()); err != nil {
		return nil, fmt.Errorf("sifen: zip lot: %w", err)
	}
	return b.Bytes(), nil
}

// openLotZip opens the one file of the ZIP z, refusing one whose header says
// it inflates past maxLotXMLBytes (a lying header is caught while reading).
func openLotZip(z []byte) (io.ReadCloser, error) {
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, fmt.Errorf("%w: xDE is not a ZIP archive: %w", ErrMalformedXML, err)
	}
	if len(zr.File) != 1 {
		return nil, fmt.Errorf("%w: the ZIP holds %d files (want one)", ErrMalformedXML, len(zr.File))
	}
	if zr.File[0].UncompressedSize64 > maxLotXMLBytes {
		return nil, fmt.Errorf("%w: %w", ErrLotTooBig, errInflated)
	}
	f, err := zr.File[0].Open()
	if err != nil {
		return nil, fmt.Errorf("%w: ZIP: %w", ErrMalformedXML, err)
	}
	return f, nil
}
