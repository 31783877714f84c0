package sifen

import (
	"errors"
	"fmt"
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
	// ErrLotTooManyDEs: more than MaxLotDEs DEs in one lot.
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
	// MaxLotMessageBytes.
	ErrLotTooBig = errors.New("sifen: lot message larger than 1000 KB (1,000,000 bytes)")
	// ErrLotAlreadySent: this exact lot already reached SIFEN (or may have:
	// its send has no final result yet). SIFEN blocks a RUC that resends a lot.
	ErrLotAlreadySent = errors.New("sifen: lot already sent")

	// ErrCDCInFlight: a document with this CDC is being sent, was sent and
	// has no final result yet, was approved, or was rejected and the DE
	// has not changed since (see *CDCError).
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

// RemoteError is an answer from SIFEN that is not a result: an HTTP status
// other than 200, a SOAP fault, or a body that cannot be read.
type RemoteError struct {
	// Service is the operation: "siRecepLoteDE", "siResultLoteDE" or "siConsDE".
	Service string
	// StatusCode is the HTTP status.
	StatusCode int
	// Fault is the SOAP fault's code and reason, when there was one.
	Fault string
	// Body is the start of the body, for the log.
	Body string
}

func (e *RemoteError) Error() string {
	if e.Fault != "" {
		return fmt.Sprintf("sifen: %s: HTTP %d: SOAP fault: %s", e.Service, e.StatusCode, e.Fault)
	}
	return fmt.Sprintf("sifen: %s: HTTP %d: %q", e.Service, e.StatusCode, e.Body)
}

// Unwrap makes errors.Is(err, ErrRemote) true.
func (e *RemoteError) Unwrap() error { return ErrRemote }

// CDCError is Import's refusal of a DE whose CDC a stored document already
// holds: the document is being sent, was sent and has no final result yet,
// was approved, or was rejected and the DE has the same XML (SIFEN would
// reject it again; a corrected DE keeps its CDC and is imported).
type CDCError struct {
	CDC string
	// Document is the stored document, without its XML: Status says why it
	// holds the CDC; Message and ResponseCode say what SIFEN answered.
	Document Document
}

func (e *CDCError) Error() string {
	if e.Document.Status == StatusRejected {
		return fmt.Sprintf("%v: %s is document %d, rejected by SIFEN (%s); correct the document to send it again",
			ErrCDCInFlight, e.CDC, e.Document.ID, e.Document.Message)
	}
	return fmt.Sprintf("%v: %s is document %d, %s", ErrCDCInFlight, e.CDC, e.Document.ID, e.Document.Status)
}

// Unwrap makes errors.Is(err, ErrCDCInFlight) true.
func (e *CDCError) Unwrap() error { return ErrCDCInFlight }
