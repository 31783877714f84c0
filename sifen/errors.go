package sifen

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of the package: bad input or a state that forbids the operation;
// nothing was throttled or sent. A throttle refusal or an answer from SIFEN
// is not an error (see LotSend).
var (
	ErrInvalidEnv = errors.New("sifen: invalid environment")

	// ErrMalformedXML: not well-formed XML, or not an rDE or rLoteDE of SIFEN.
	ErrMalformedXML = errors.New("sifen: malformed XML")
	// ErrMissingRUC: a DE without gEmis/dRucEm or gEmis/dDVEmi.
	ErrMissingRUC = errors.New("sifen: missing issuer RUC")
	// ErrInvalidRUC: a RUC not 3 to 8 letters or digits, or a check digit not
	// one digit.
	ErrInvalidRUC = errors.New("sifen: invalid RUC")
	ErrInvalidDV  = errors.New("sifen: wrong RUC check digit")
	// ErrInvalidCDC: a CDC not 44 digits, with a wrong check digit, or
	// disagreeing with the DE's type or RUC.
	ErrInvalidCDC = errors.New("sifen: invalid CDC")
	// ErrUnfit: a DE unsigned (SenderConfig.AllowUnsigned admits it to test
	// only), or a test DE (dNomEmi) meant for prod.
	ErrUnfit       = errors.New("sifen: DE not fit for the environment")
	ErrInvalidType = errors.New("sifen: invalid DE type")

	ErrLotEmpty        = errors.New("sifen: lot has no DE")
	ErrLotTooManyDEs   = errors.New("sifen: lot has more than 50 DEs")
	ErrLotMixedTypes   = errors.New("sifen: lot mixes DE types")
	ErrLotMixedRUC     = errors.New("sifen: lot mixes issuer RUCs")
	ErrLotMixedEnv     = errors.New("sifen: lot mixes environments")
	ErrLotDuplicateCDC = errors.New("sifen: lot repeats a CDC")
	ErrLotTooBig       = errors.New("sifen: lot message larger than 1000 KB (1,000,000 bytes)")
	// ErrLotAlreadySent: this exact lot reached SIFEN, or may have (no final
	// result yet); SIFEN blocks a RUC that resends a lot.
	ErrLotAlreadySent = errors.New("sifen: lot already sent")

	// ErrCDCInFlight: a document holds this CDC that Import may not give it to
	// (see *CDCError).
	ErrCDCInFlight = errors.New("sifen: CDC already sent")
	ErrNotFound    = errors.New("sifen: document not found")
	// ErrNotSendable: the document is not in draft or error, or another process
	// claimed it first.
	ErrNotSendable      = errors.New("sifen: document cannot be sent now")
	ErrInvalidLotNumber = errors.New("sifen: invalid lot number")

	// ErrNoResponse: a request may have reached SIFEN but no answer came back;
	// the documents stay in "sending" until Sender.Resolve.
	ErrNoResponse = errors.New("sifen: no response from SIFEN")
	// ErrRemote: SIFEN answered with a SOAP fault, an HTTP error or a body that
	// is not SOAP (see *RemoteError).
	ErrRemote = errors.New("sifen: SIFEN error")
)

// RemoteError is an answer from SIFEN that is not the service's result:
// its generic refusal rRetEnviDe (Code set), a SOAP fault (Fault set), an
// HTTP status other than 200, or an unreadable body.
type RemoteError struct {
	// Service is "siRecepLoteDE", "siResultLoteDE" or "siConsDE".
	Service    string
	StatusCode int
	// Code, Message, State and ProcessedAt are dCodRes, dMsgRes, dEstRes and
	// dFecProc of an rRetEnviDe (e.g. 0160 "XML Mal Formado.").
	Code, Message, State, ProcessedAt string
	// Fault is the SOAP fault's code and reason, FaultCode its code alone.
	Fault, FaultCode string
	// Body is the start of the body, for the log.
	Body string
	// prot is the rRetEnviDe's protocol, siRecepDE's answer.
	prot *ProtDE
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

// CDCError is Import's refusal of a DE whose CDC a stored document holds: a
// draft or error with other content (unless ImportReplacing), being sent,
// sent without final result, approved, or rejected with the same XML.
type CDCError struct {
	CDC string
	// Document is the holder, without its XML; Now when the import was refused.
	Document Document
	Now      time.Time
	// OtherContent: the DE's XML is not the document's (for a document sent,
	// SIFEN has another DE under the CDC, and the message says so).
	OtherContent bool
}

func (e *CDCError) Error() string {
	d := e.Document
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	var msg string
	switch d.Status {
	case StatusDraft, StatusError:
		return fmt.Sprintf("sifen: CDC %s is already document %d, %s %s with other content (last changed %s): nothing was imported; to replace its content, import it again asking to replace it",
			e.CDC, d.ID, map[Status]string{StatusDraft: "a", StatusError: "an"}[d.Status], d.Status, at(d.UpdatedAt))
	case StatusRejected: // refused only with the same XML
		return fmt.Sprintf("%v: %s is document %d, rejected by SIFEN (%s); correct the document to send it again",
			ErrCDCInFlight, e.CDC, d.ID, d.Message)
	case StatusSending:
		if e.SendInProgress() {
			msg = fmt.Sprintf("%v: %s is document %d, sending: being sent now by another send since %s", ErrCDCInFlight, e.CDC, d.ID, at(d.ClaimedAt))
		} else {
			msg = fmt.Sprintf("%v: %s is document %d, %s", ErrCDCInFlight, e.CDC, d.ID, leftSending(d.ClaimedAt))
		}
	default:
		msg = fmt.Sprintf("%v: %s is document %d, %s", ErrCDCInFlight, e.CDC, d.ID, d.Status)
	}
	if e.OtherContent {
		msg += fmt.Sprintf("; this DE's content differs from document %d's, the one sent to SIFEN under this CDC", d.ID)
	}
	return msg
}

// leftSending says of a document a send without answer claimed at claimedAt
// and left in sending when it may be sent again.
func leftSending(claimedAt time.Time) string {
	return fmt.Sprintf("left in sending by a send without answer since %s; SIFEN is asked about it once that send is %s old, and it is sent again only on a definitive answer",
		claimedAt.UTC().Format("2006-01-02 15:04:05 UTC"), DefaultResolveAfter)
}

// SendInProgress reports whether the document is being sent now: in sending,
// claimed less than DefaultInFlightFor before the refusal. An older claim is
// a send left without answer, which Sender.Resolve settles.
func (e *CDCError) SendInProgress() bool {
	return e.Document.Status == StatusSending && !e.Now.IsZero() && e.Now.Sub(e.Document.ClaimedAt) < DefaultInFlightFor
}

// Unwrap makes errors.Is(err, ErrCDCInFlight) true.
func (e *CDCError) Unwrap() error { return ErrCDCInFlight }
