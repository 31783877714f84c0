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
// 77 bytes, an e-mail) and a payer, quoted and spaced, fit many times over.
// Without a bound, one 300 MB line took 1.2 GB to read.
const MaxLookupLine = 4096

// ErrNoLookups means a lookups file holds no key (only a header, comments
// or nothing).
var ErrNoLookups = errors.New("no key to look up")

// ErrNoPayer means a line of a lookups file names no payer and no default
// payer was given.
var ErrNoPayer = errors.New("no payer")

// ErrLineTooLong means a line of a lookups file is longer than
// MaxLookupLine bytes.
var ErrLineTooLong = errors.New("line too long")

// ErrTooManyFields means a line of a lookups file has more than two fields
// (LineError.Fields says how many).
var ErrTooManyFields = errors.New("too many fields")

// LookupLine is one line of a lookups file: its number (1-based) and the
// getEntry it asks for (EndToEndID empty).
type LookupLine struct {
	Line int
	dict.LookupRequest
}

// LineError says which line of a lookups file is bad and why: longer than
// MaxLookupLine (ErrLineTooLong), more than two fields (ErrTooManyFields),
// an invalid key (dict.ParseKey's error) or payer (dict.ValidatePayerID's),
// or no payer at all (ErrNoPayer).
type LineError struct {
	Line int
	// Fields is the number of fields of the line (0 when it is too long).
	Fields int
	Err    error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// ReadLookupRequests reads a lookups file: one Pix key per line, or
// "key,payer" CSV, with an optional header line ("key" or "key,payer") and
// "#" comments; a line with no payer takes defaultPayer. Every key and
// payer is validated, and the first bad line stops the reading: the error
// is then a *LineError, or a *csv.ParseError for bad quoting, or
// ErrNoLookups when no line holds a key, or r's error. No line longer than
// MaxLookupLine is ever held in memory.
func ReadLookupRequests(r io.Reader, defaultPayer string) ([]LookupLine, error) {
	lr := &lineLimitReader{r: r, max: MaxLookupLine}
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

// lineLimitReader reads r and fails once a line (up to its newline) is
// longer than max bytes: tooLong is then that line's number (1-based),
// and the error ErrLineTooLong.
type lineLimitReader struct {
	r       io.Reader
	max     int
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
		if l.n++; l.n > l.max {
			l.tooLong = l.line + 1
			return i, ErrLineTooLong
		}
	}
	return n, err
}
