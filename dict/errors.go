package dict

import (
	"errors"
	"fmt"
	"time"
)

// Errors of bad input, returned before anything is taken or sent. Key errors
// wrap ErrInvalidKey and the key type's sentinel; payer id errors wrap
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

	errInvalidPolicyFile = errors.New("dict: invalid policy file") // the message names the field
	errUnknownOutcome    = errors.New("dict: unknown outcome")     // no cost or credit for it

	// ErrUnknownEndToEndID means no lookup was recorded with that EndToEndId.
	ErrUnknownEndToEndID = errors.New("dict: no lookup with that EndToEndId")
	// ErrNotPayable means the lookup of that EndToEndId did not end in 200.
	ErrNotPayable = errors.New("dict: lookup did not find an entry")
	errNoRecords  = errors.New("dict: no lookup records configured")
	// ErrUnsigned means a write was about to go unsigned to a DICT that is
	// not a simulator on loopback.
	ErrUnsigned = errors.New("dict: write operation not signed (configure a Signer)")
	// ErrMalformedResponse means the DICT's body is not the XML the operation expects.
	ErrMalformedResponse = errors.New("dict: malformed response")
)

// RemoteError is a response of the DICT with another status than the
// operation's success, with its RFC 7807 Problem (or nil) and Retry-After (or 0).
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
