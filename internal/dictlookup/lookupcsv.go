// Package dictlookup holds the files of balde dict-lookup: the lookups it
// reads (ReadLookupRequests) and the results it writes (NewLookupRecord,
// LookupWriter). The lookups are dict.Batch's.
package dictlookup

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/balde-throttle/balde/dict"
)

// MaxLookupLine bounds a line of a lookups file, in bytes: a key (at most
// 77 bytes) and a payer fit many times over, and no huge line is held.
const MaxLookupLine = 4096

// Errors of a lookups file: no key at all, a line without a payer (and no
// default), longer than MaxLookupLine, or of more than two fields.
var (
	ErrNoLookups     = errors.New("no key to look up")
	ErrNoPayer       = errors.New("no payer")
	ErrLineTooLong   = errors.New("line too long")
	ErrTooManyFields = errors.New("too many fields")
)

// LookupLine is one line of a lookups file: its number (1-based) and the
// getEntry it asks for.
type LookupLine struct {
	Line int
	dict.LookupRequest
}

// LineError says which line of a lookups file is bad (with how many
// fields, 0 when too long) and why: an Err* or dict's validation error.
type LineError struct {
	Line, Fields int
	Err          error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// ReadLookupRequests reads a lookups file: a Pix key or "key,payer" per
// line (defaultPayer when none), an optional header and "#" comments. The
// first bad line stops it: a *LineError, a *csv.ParseError, ErrNoLookups
// or r's error.
func ReadLookupRequests(r io.Reader, defaultPayer string) ([]LookupLine, error) {
	lr := &lineLimitReader{r: r}
	cr := csv.NewReader(lr)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var lines []LookupLine
	for first := true; ; first = false {
		rec, err := cr.Read()
		if lr.tooLong > 0 {
			return nil, &LineError{Line: lr.tooLong, Err: fmt.Errorf("%w: longer than %d bytes (a key and a payer take at most a few hundred)", ErrLineTooLong, MaxLookupLine)}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if first && strings.EqualFold(strings.TrimSpace(rec[0]), "key") {
			continue
		}
		if len(rec) > 2 {
			return nil, &LineError{Line: line, Fields: len(rec), Err: fmt.Errorf("%w: %d, want key or key,payer", ErrTooManyFields, len(rec))}
		}
		l := LookupLine{Line: line, LookupRequest: dict.LookupRequest{Key: strings.TrimSpace(rec[0]), PayerID: defaultPayer}}
		if len(rec) == 2 && strings.TrimSpace(rec[1]) != "" {
			l.PayerID = strings.TrimSpace(rec[1])
		}
		if _, err := dict.ParseKey(l.Key); err != nil {
			return nil, &LineError{Line: line, Fields: len(rec), Err: err}
		}
		if l.PayerID == "" {
			return nil, &LineError{Line: line, Fields: len(rec), Err: ErrNoPayer}
		}
		if err := dict.ValidatePayerID(l.PayerID); err != nil {
			return nil, &LineError{Line: line, Fields: len(rec), Err: err}
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, ErrNoLookups
	}
	return lines, nil
}

// lineLimitReader fails with ErrLineTooLong once a line is longer than
// MaxLookupLine bytes; tooLong is then its number (1-based).
type lineLimitReader struct {
	r       io.Reader
	line    int // the current line's number, 0-based
	n       int // bytes of the current line so far
	tooLong int
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	if l.tooLong > 0 {
		return 0, ErrLineTooLong
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.line++
			l.n = 0
			continue
		}
		if l.n++; l.n > MaxLookupLine {
			l.tooLong = l.line + 1
			return i, ErrLineTooLong
		}
	}
	return n, err
}
