package dict

import (
	"errors"
	"fmt"
	"time"
)

// Errors of bad input. Each is returned before anything is taken from a
// bucket or sent to the DICT. Key parse errors wrap ErrInvalidKey and the
// sentinel of the key type (errors.Is works for both); payer id errors wrap
// ErrInvalidPayerID and errInvalidCPF or errInvalidCNPJ.
var (
	ErrInvalidKey        = errors.New("dict: invalid key")
	errInvalidCPF        = errors.New("dict: invalid CPF")
	errInvalidCNPJ       = errors.New("dict: invalid CNPJ")
	errInvalidEmail      = errors.New("dict: invalid EMAIL key")
	errInvalidPhone      = errors.New("dict: invalid PHONE key")
	errInvalidEVP        = errors.New("dict: invalid EVP key")
	errUnknownKeyType    = errors.New("dict: unknown key type")
	ErrInvalidISPB       = errors.New("dict: invalid ISPB")
	ErrInvalidPayerID    = errors.New("dict: invalid payer id")
	ErrInvalidEndToEndID = errors.New("dict: invalid EndToEndId")
	errInvalidCategory   = errors.New("dict: invalid participant category")

	// errInvalidPolicyFile means a policy file could not be read or holds a
	// value that cannot describe a policy; the message names the field.
	errInvalidPolicyFile = errors.New("dict: invalid policy file")

	// errUnknownOutcome means an outcome or event has no cost or credit in
	// the policy's counting rules.
	errUnknownOutcome = errors.New("dict: unknown outcome")

	// ErrUnknownEndToEndID means no lookup was recorded with that
	// EndToEndId, so a payment cannot be credited.
	ErrUnknownEndToEndID = errors.New("dict: no lookup with that EndToEndId")
	// ErrNotPayable means the lookup of that EndToEndId did not find an
	// entry (only a 200 can lead to a payment order).
	ErrNotPayable = errors.New("dict: lookup did not find an entry")

	// errNoRecords means the operation needs the lookup records (Records)
	// and the client has none.
	errNoRecords = errors.New("dict: no lookup records configured")

	// ErrUnsigned means a write operation was about to go unsigned to a
	// DICT that is not a simulator on loopback: configure a Signer.
	ErrUnsigned = errors.New("dict: write operation not signed (configure a Signer)")

	// ErrMalformedResponse means the DICT answered with a body that is not
	// the XML the operation expects.
	ErrMalformedResponse = errors.New("dict: malformed response")
)

// RemoteError is a response of the DICT with a status other than the
// operation's success. Problem is the RFC 7807 body when the DICT sent one
// (nil otherwise). RetryAfter is the response's Retry-After (0 when absent).
type RemoteError struct {
	Op         string
	Status     int
	RetryAfter time.Duration
	Problem    *Problem
}

func (e *RemoteError) Error() string {
	s := fmt.Sprintf("dict: %s: remote status %d", e.Op, e.Status)
	if e.Problem != nil {
		s += ": " + e.Problem.TypeName()
		if e.Problem.Title != "" {
			s += ": " + e.Problem.Title
		}
		if e.Problem.Detail != "" {
			s += " (" + e.Problem.Detail + ")"
		}
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(", retry after %s", e.RetryAfter)
	}
	return s
}

// NotFound reports whether the DICT answered 404 (for getEntry: no entry
// for the key).
func (e *RemoteError) NotFound() bool { return e.Status == 404 }
