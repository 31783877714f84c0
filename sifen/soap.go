package sifen

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// SOAPNamespace is the namespace of SOAP 1.2 envelopes; SOAPContentType is
// their media type.
const (
	SOAPNamespace   = "http://www.w3.org/2003/05/soap-envelope"
	SOAPContentType = "application/soap+xml; charset=utf-8"
)

// The service names, as SIFEN's WSDLs call the operations.
const (
	ServiceRecepcionLote = "siRecepLoteDE"
	serviceConsultaLote  = "siResultLoteDE"
	ServiceConsultaDE    = "siConsDE"
)

// SIFEN's response codes (manual técnico v150): strings, with leading zeros.
const (
	// siRecepLoteDE (dCodRes).
	codeLotQueued    = "0300" // Lote recibido con éxito
	CodeLotNotQueued = "0301" // Lote no encolado para procesamiento

	// siResultLoteDE (dCodResLot).
	codeLotUnknown    = "0360" // Número de lote inexistente
	codeLotProcessing = "0361" // Lote en procesamiento
	codeLotDone       = "0362" // Procesamiento de lote concluido
	codeLotTooLate    = "0364" // Consulta extemporánea de lote (more than 48 h)

	// siConsDE (dCodRes).
	codeDENotFound = "0420" // Documento no existe en SIFEN o ha sido rechazado
	codeDEFound    = "0422" // CDC encontrado
)

// The per-DE results of a processed lot (dEstRes).
const (
	resultApproved        = "Aprobado"
	ResultApprovedWithObs = "Aprobado con observación"
	resultRejected        = "Rechazado"
)

// TimeLayout is the layout of dFecProc.
const TimeLayout = "2006-01-02T15:04:05-07:00"

// EnvioLote is the body of siRecepLoteDE.
type EnvioLote struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnvioLote"`
	// ID (dId) identifies the request: up to 15 digits. XDE is the base64 of a
	// ZIP holding the rLoteDE.
	ID  string `xml:"dId"`
	XDE string `xml:"xDE"`
}

// EnvioLoteResponse is the answer of siRecepLoteDE.
type EnvioLoteResponse struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rResEnviLoteDe"`
	// ProcessedAt (dFecProc) is when SIFEN handled the request (TimeLayout).
	ProcessedAt string `xml:"dFecProc"`
	// Code is "0300" or CodeLotNotQueued.
	Code    string `xml:"dCodRes"`
	Message string `xml:"dMsgRes"`
	// LotNumber (dProtConsLote) is the queued lot's number: a string of 17
	// digits and more.
	LotNumber string `xml:"dProtConsLote,omitempty"`
	// ProcessingTime (dTpoProces) is SIFEN's estimate, in seconds.
	ProcessingTime string `xml:"dTpoProces,omitempty"`
}

// ConsultaLote is the body of siResultLoteDE.
type ConsultaLote struct {
	XMLName   xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsLoteDe"`
	ID        string   `xml:"dId"`
	LotNumber string   `xml:"dProtConsLote"`
}

// ConsultaLoteResponse is the answer of siResultLoteDE.
type ConsultaLoteResponse struct {
	XMLName     xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rResEnviConsLoteDe"`
	ProcessedAt string   `xml:"dFecProc"`
	// Code is "0360", "0361", "0362" or "0364".
	Code    string `xml:"dCodResLot"`
	Message string `xml:"dMsgResLot"`
	// Results has one entry per DE when Code is "0362".
	Results []DEResult `xml:"gResProcLote"`
}

// DEResult is the result of one DE of a processed lot.
type DEResult struct {
	CDC string `xml:"id"`
	// Status (dEstRes) is "Aprobado", ResultApprovedWithObs or "Rechazado";
	// AuthNumber (dProtAut) the approval's protocol; Messages its codes and texts.
	Status     string          `xml:"dEstRes"`
	AuthNumber string          `xml:"dProtAut,omitempty"`
	Messages   []ResultMessage `xml:"gResProc"`
}

// Approved reports whether the DE was approved (with or without
// observations), reading dEstRes as DNIT writes it.
func (r DEResult) Approved() bool { return approved(r.result()) }

// ResultMessage is one gResProc. Status and AuthNumber are dEstRes and
// dProtAut where the manual's example of rProtDe writes them (see ProtDE).
type ResultMessage struct {
	Status     string `xml:"dEstRes,omitempty"`
	AuthNumber string `xml:"dProtAut,omitempty"`
	Code       string `xml:"dCodRes"`
	Message    string `xml:"dMsgRes"`
}

// ConsultaDE is the body of siConsDE.
type ConsultaDE struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsDeRequest"`
	ID      string   `xml:"dId"`
	CDC     string   `xml:"dCDC"`
}

// ConsultaDEResponse is the answer of siConsDE.
type ConsultaDEResponse struct {
	XMLName     xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsDeResponse"`
	ProcessedAt string   `xml:"dFecProc"`
	// Code is "0422" or "0420".
	Code    string `xml:"dCodRes"`
	Message string `xml:"dMsgRes"`
	// Content (xContenDE) is the DE and its approval when found, as it came
	// (elements, escaped XML or CDATA); AuthNumber reads dProtAut from it.
	Content innerXML `xml:"xContenDE,omitempty"`
}

// innerXML is an element's content as it came, inner XML and all (a string
// would keep only its text); it encodes back to the same XML.
type innerXML string

func (x *innerXML) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	var v struct {
		Inner string `xml:",innerxml"`
	}
	err := d.DecodeElement(&v, &start)
	*x = innerXML(v.Inner)
	return err
}

func (x innerXML) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return e.EncodeElement(struct {
		Inner string `xml:",innerxml"`
	}{string(x)}, start)
}

// retEnviDe is rRetEnviDe, SIFEN's protocol of one DE (manual técnico v150,
// §7.4). SIFEN also answers it, on HTTP 200 or 400, to a request of another
// service it refuses unread (0160 "XML Mal Formado").
type retEnviDe struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rRetEnviDe"`
	Prot    ProtDE   `xml:"rProtDe"`
}

// ProtDE is rProtDe. dEstRes and dProtAut are read beside gResProc (SIFEN's
// answers) and inside it (the manual's example).
type ProtDE struct {
	CDC         string          `xml:"id"`
	ProcessedAt string          `xml:"dFecProc"`
	Status      string          `xml:"dEstRes"`
	AuthNumber  string          `xml:"dProtAut"`
	Results     []ResultMessage `xml:"gResProc"`
}

// Code is the first dCodRes, Message its dMsgRes.
func (p ProtDE) Code() (code, message string) {
	for _, r := range p.Results {
		if c := strings.TrimSpace(r.Code); c != "" {
			return c, strings.TrimSpace(r.Message)
		}
	}
	return "", ""
}

// State is dEstRes, wherever it was written.
func (p ProtDE) State() string {
	return p.first(p.Status, func(m ResultMessage) string { return m.Status })
}

// authNumber is dProtAut, wherever it was written.
func (p ProtDE) authNumber() string {
	return p.first(p.AuthNumber, func(m ResultMessage) string { return m.AuthNumber })
}

// first returns own, trimmed, or else the first non-blank field of a gResProc.
func (p ProtDE) first(own string, field func(ResultMessage) string) string {
	if s := strings.TrimSpace(own); s != "" {
		return s
	}
	for _, r := range p.Results {
		if s := strings.TrimSpace(field(r)); s != "" {
			return s
		}
	}
	return ""
}

// soapFault is a SOAP 1.2 fault.
type soapFault struct {
	XMLName xml.Name `xml:"http://www.w3.org/2003/05/soap-envelope Fault"`
	Code    string   `xml:"http://www.w3.org/2003/05/soap-envelope Code>Value"`
	Reason  string   `xml:"http://www.w3.org/2003/05/soap-envelope Reason>Text"`
}

func (f *soapFault) String() string { return strings.TrimSpace(f.Code + ": " + f.Reason) }

// faultReceiver is the SOAP 1.2 fault code blaming the receiver (SOAP 1.2
// Part 1, §5.4.6), as faultKind returns it.
const faultReceiver = "Receiver"

// faultKind is a fault code without its namespace prefix.
func faultKind(code string) string {
	code = strings.TrimSpace(code)
	if i := strings.LastIndexByte(code, ':'); i >= 0 {
		return code[i+1:]
	}
	return code
}

// envelope is a SOAP 1.2 envelope whose body holds a T or a Fault.
type envelope[T any] struct {
	XMLName xml.Name `xml:"http://www.w3.org/2003/05/soap-envelope Envelope"`
	Body    struct {
		Fault   *soapFault
		Content *T
		// Rejection is SIFEN's generic refusal of a request (retEnviDe).
		Rejection *retEnviDe
	} `xml:"http://www.w3.org/2003/05/soap-envelope Body"`
}

// MarshalSOAP returns a SOAP 1.2 envelope holding body (one of the message
// types of this file, or a *soapFault).
func MarshalSOAP(body any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<soap:Envelope xmlns:soap="` + SOAPNamespace + `"><soap:Header/><soap:Body>`)
	if err := xml.NewEncoder(&b).Encode(body); err != nil {
		return nil, fmt.Errorf("sifen: marshal SOAP body: %w", err)
	}
	b.WriteString(`</soap:Body></soap:Envelope>`)
	return b.Bytes(), nil
}

// UnmarshalSOAP reads a SOAP 1.2 envelope whose body holds a T or a Fault,
// and returns either. When it holds SIFEN's generic refusal rRetEnviDe the
// error is a *RemoteError with its Code and Message; when neither, an error
// wrapping ErrMalformedXML.
func UnmarshalSOAP[T any](data []byte) (*T, *soapFault, error) {
	var env envelope[T]
	if err := xml.Unmarshal(data, &env); err != nil {
		return nil, nil, fmt.Errorf("%w: SOAP envelope: %w", ErrMalformedXML, err)
	}
	if env.Body.Fault != nil {
		return nil, env.Body.Fault, nil
	}
	if env.Body.Content == nil && env.Body.Rejection != nil {
		p := env.Body.Rejection.Prot
		code, msg := p.Code()
		if code != "" {
			return nil, nil, &RemoteError{Code: code, Message: msg, State: p.State(), ProcessedAt: strings.TrimSpace(p.ProcessedAt), prot: &p}
		}
	}
	if env.Body.Content == nil {
		var zero T
		return nil, nil, fmt.Errorf("%w: SOAP body does not hold %T", ErrMalformedXML, zero)
	}
	return env.Body.Content, nil, nil
}

// parseTime reads dFecProc; the zero time when it cannot.
func parseTime(s string) time.Time {
	t, _ := time.Parse(TimeLayout, strings.TrimSpace(s))
	return t
}
