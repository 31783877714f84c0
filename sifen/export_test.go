package sifen

import (
	"errors"
	"fmt"
	"io"
)

// CheckMessageBytes exposes checkMessageBytes to the tests of the size
// boundary, which no ZIP length reaches exactly (base64 grows by 4).
var CheckMessageBytes = checkMessageBytes

type EventKind = eventKind

type FileError = fileError

type LotSender = lotSender

const MaxFileSize = maxFileSize

const MaxLotDEs = maxLotDEs

const MaxLotMessageBytes = maxLotMessageBytes

var MessageSize = messageSize

var NotSent = notSent

var ParseLoteContext = parseLoteContext

// ReadResult is DEResult.result of a result with status and codes.
func ReadResult(status string, codes ...string) Verdict {
	r := DEResult{Status: status}
	for _, c := range codes {
		r.Messages = append(r.Messages, ResultMessage{Code: c})
	}
	return r.result()
}

var ValidateCDC = validateCDC

// UnzipLote returns the one file of a lot's ZIP, read as ParseLoteZip reads
// it. Errors wrap ErrMalformedXML (not a ZIP of one file) or ErrLotTooBig.
func UnzipLote(z []byte) ([]byte, error) {
	f, err := openLotZip(z)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := &window{r: f, limit: maxLotXMLBytes}
	if _, err := io.Copy(io.Discard, w); err != nil {
		if errors.Is(err, errInflated) {
			return nil, fmt.Errorf("%w: %w", ErrLotTooBig, err)
		}
		return nil, fmt.Errorf("%w: ZIP: %w", ErrMalformedXML, err)
	}
	return w.buf, nil
}

const VerdictUnknown = ""

const VerdictApproved = resultApproved

const VerdictApprovedWithObs = ResultApprovedWithObs

const VerdictRejected = resultRejected

type Verdict = string

func (c *Client) URL(env Env, path string) string { return c.url(env, path) }

func (l Lote) Validate() error { return l.validate() }

func (l Lote) XML() []byte { return l.document() }

func (r RUC) Validate() error { return r.validate() }

func (r DEResult) Verdict() Verdict { return r.result() }

var ImportFilesWith = importFiles

const ServiceConsultaLote = serviceConsultaLote

const CodeLotQueued = codeLotQueued

const CodeLotProcessing = codeLotProcessing

const CodeLotDone = codeLotDone

const CodeDENotFound = codeDENotFound

const CodeDEFound = codeDEFound

const ResultApproved = resultApproved

const ResultRejected = resultRejected
