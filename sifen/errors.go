package sifen

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of the package. Each means bad input or a state that forbids the
// operation: nothing was throttled and nothing was sent. A throttle refusal
// is not an error (see LotSend); neither is an answer from SIFEN.
var (
	// ErrInvalidEnv: an environment other than "test" or "prod".
	ErrInvalidEnv = errors.New("sifen: invalid environment")

	// ErrMalformedXML: the document is not well-formed XML, or not a DE
	// (rDE) or a lot (rLoteDE) in SIFEN's namespace.
	ErrMalformedXML = errors.New("sifen: malformed XML")
	// ErrMissingRUC: a DE has no issuer RUC (gEmis/dRucEm) or no check
	// digit (gEmis/dDVEmi).
	ErrMissingRUC = errors.New("sifen: missing issuer RUC")
	// ErrInvalidRUC: a RUC that is not 3 to 8 letters or digits, or a check
	// digit that is not one digit.
	ErrInvalidRUC = errors.New("sifen: invalid RUC")
	// ErrInvalidDV: the check digit (dDVEmi) does not match the RUC.
	ErrInvalidDV = errors.New("sifen: wrong RUC check digit")
	// ErrInvalidCDC: a DE's CDC (the Id of DE) is not 44 digits, its own
	// check digit is wrong, or it disagrees with the DE's type or RUC.
	ErrInvalidCDC = errors.New("sifen: invalid CDC")
	// ErrUnfit: a DE that may not go to the environment asked: unsigned (no
	// ds:Signature; SenderConfig.AllowUnsigned lets them into test only),
	// or marked as a test DE (dNomEmi) and meant for prod.
	ErrUnfit = errors.New("sifen: DE not fit for the environment")
	// ErrInvalidType: a DE's type (gTimb/iTiDE) is missing or not 1..99.
	ErrInvalidType = errors.New("sifen: invalid DE type")

	// ErrLotEmpty: a lot without DEs.
	ErrLotEmpty = errors.New("sifen: lot has no DE")
	// ErrLotTooManyDEs: more than maxLotDEs DEs in one lot.
	ErrLotTooManyDEs = errors.New("sifen: lot has more than 50 DEs")
	// ErrLotMixedTypes: DEs of different types (iTiDE) in one lot.
	ErrLotMixedTypes = errors.New("sifen: lot mixes DE types")
	// ErrLotMixedRUC: DEs of different issuers (dRucEm) in one lot.
	ErrLotMixedRUC = errors.New("sifen: lot mixes issuer RUCs")
	// ErrLotMixedEnv: documents of different environments in one lot.
	ErrLotMixedEnv = errors.New("sifen: lot mixes environments")
	// ErrLotDuplicateCDC: the same CDC twice in one lot.
	ErrLotDuplicateCDC = errors.New("sifen: lot repeats a CDC")
	// ErrLotTooBig: the siRecepLoteDE message carrying the lot would exceed
	// maxLotMessageBytes.
	ErrLotTooBig = errors.New("sifen: lot message larger than 1000 KB (1,000,000 bytes)")
	// ErrLotAlreadySent: this exact lot already reached SIFEN (or may have:
	// its send has no final result yet). SIFEN blocks a RUC that resends a lot.
	ErrLotAlreadySent = errors.New("sifen: lot already sent")

	// ErrCDCInFlight: a document with this CDC is being sent, was sent and
	// has no final result yet, was approved, or was rejected and the DE
	// has not changed since; or it is a draft or error with other content
	// and the import did not ask to replace it (see *CDCError).
	ErrCDCInFlight = errors.New("sifen: CDC already sent")
	// ErrNotFound: no document with this id.
	ErrNotFound = errors.New("sifen: document not found")
	// ErrNotSendable: the document is not in draft or error (it is being
	// sent, was sent, or has a final result), or another process claimed it
	// first.
	ErrNotSendable = errors.New("sifen: document cannot be sent now")
	// ErrInvalidLotNumber: a lot number (dProtConsLote) that is not 1..20 digits.
	ErrInvalidLotNumber = errors.New("sifen: invalid lot number")

	// ErrNoResponse: a request may have reached SIFEN but no answer came
	// back (timeout, connection reset). The documents stay in "sending"
	// until Sender.Resolve asks SIFEN what it has.
	ErrNoResponse = errors.New("sifen: no response from SIFEN")
	// ErrRemote: SIFEN answered with a SOAP fault, an HTTP error or a body
	// that is not SOAP (see *RemoteError).
	ErrRemote = errors.New("sifen: SIFEN error")
)

// RemoteError is an answer from SIFEN that is not the service's result:
// SIFEN's generic refusal rRetEnviDe (Code set), a SOAP fault (Fault set),
// an HTTP status other than 200, or a body that cannot be read.
type RemoteError struct {
	// Service is the operation: "siRecepLoteDE", "siResultLoteDE" or "siConsDE".
	Service string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code and Message are dCodRes and dMsgRes of an rRetEnviDe answer
	// (e.g. 0160 "XML Mal Formado."), State its dEstRes and ProcessedAt its
	// dFecProc: SIFEN read the request far enough to refuse it.
	Code, Message, State, ProcessedAt string
	// Fault is the SOAP fault's code and reason, when there was one, and
	// FaultCode its code alone ("env:Receiver").
	Fault, FaultCode string
	// Body is the start of the body, for the log.
	Body string
}

func (e *RemoteError) Error() string {
	switch {
	case e.Code != "":
		return fmt.Sprintf("sifen: %s: HTTP %d: SIFEN refused the request: %s", e.Service, e.StatusCode, strings.TrimSpace(e.Code+" "+e.Message))
	case faultKind(e.FaultCode) == faultReceiver:
		return fmt.Sprintf("sifen: %s: HTTP %d: SOAP fault: %s (a failure on SIFEN's side: the request may have been processed)", e.Service, e.StatusCode, e.Fault)
	case e.Fault != "":
		return fmt.Sprintf("sifen: %s: HTTP %d: SOAP fault: %s", e.Service, e.StatusCode, e.Fault)
	}
	return fmt.Sprintf("sifen: %s: HTTP %d: %q", e.Service, e.StatusCode, e.Body)
}

// Unwrap makes errors.Is(err, ErrRemote) true.
func (e *RemoteError) Unwrap() error { return ErrRemote }

// CDCError is Import's refusal of a DE whose CDC a stored document already
// holds: the document is a draft or an error with other content (Import
// without Sender.ImportReplacing), is being sent, was sent and has no final result
// yet, was approved, or was rejected and the DE has the same XML (SIFEN
// would reject it again; a corrected DE keeps its CDC and is imported).
type CDCError struct {
	CDC string
	// Document is the stored document, without its XML: Status says why it
	// holds the CDC; Message and ResponseCode say what SIFEN answered.
	Document Document
	// Now is when the import was refused (it tells a send in progress from
	// one left without answer).
	Now time.Time
	// OtherContent: the DE's XML is not the document's. For a document
	// being sent, sent or approved, what SIFEN has (or is being given)
	// under the CDC is not this DE, and the message says so.
	OtherContent bool
}

func (e *CDCError) Error() string {
	d := e.Document
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	var msg string
	switch d.Status {
	case StatusDraft, StatusError:
		return fmt.Sprintf("sifen: CDC %s is already document %d, %s %s with other content (last changed %s): nothing was imported; to replace its content, import it again asking to replace it",
			e.CDC, d.ID, article(d.Status), d.Status, at(d.UpdatedAt))
	case StatusRejected: // refused only with the same XML
		return fmt.Sprintf("%v: %s is document %d, rejected by SIFEN (%s); correct the document to send it again",
			ErrCDCInFlight, e.CDC, d.ID, d.Message)
	case StatusSending:
		if e.SendInProgress() {
			msg = fmt.Sprintf("%v: %s is document %d, sending: being sent now by another send since %s", ErrCDCInFlight, e.CDC, d.ID, at(d.ClaimedAt))
		} else {
			msg = fmt.Sprintf("%v: %s is document %d, left in sending by a send without answer since %s; SIFEN is asked about it once that send is %s old, and it is sent again only on a definitive answer",
				ErrCDCInFlight, e.CDC, d.ID, at(d.ClaimedAt), DefaultResolveAfter)
		}
	default:
		msg = fmt.Sprintf("%v: %s is document %d, %s", ErrCDCInFlight, e.CDC, d.ID, d.Status)
	}
	if e.OtherContent {
		msg += fmt.Sprintf("; this DE's content differs from document %d's, the one sent to SIFEN under this CDC", d.ID)
	}
	return msg
}

// SendInProgress reports whether the document is being sent now: it is in
// sending, claimed less than defaultInFlightFor before the refusal (the
// longest a send's request lasts). An older claim is a send left without
// answer, which Sender.Resolve settles.
func (e *CDCError) SendInProgress() bool {
	return e.Document.Status == StatusSending && !e.Now.IsZero() && e.Now.Sub(e.Document.ClaimedAt) < DefaultInFlightFor
}

func article(s Status) string {
	if s == StatusError {
		return "an"
	}
	return "a"
}

// Unwrap makes errors.Is(err, ErrCDCInFlight) true.
func (e *CDCError) Unwrap() error { return ErrCDCInFlight }
