package dictlookup

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// The results of a LookupRecord.
const (
	lookupSent    = "sent"    // answered by the DICT: an entry, or no entry for the key (404)
	LookupBlocked = "blocked" // refused by the local mirror: nothing was sent
	LookupFailed  = "failed"  // sent or tried, without an answer that says found or not found
	// LookupInterrupted: stopped while the lookup waited for the mirror;
	// nothing was sent, and running it again looks it up.
	LookupInterrupted = "interrupted"
)

// LookupRecord is the result of one lookup: the JSON line of "balde
// dict-lookup --json" and a row (or object) of its --out file.
type LookupRecord struct {
	Key   string `json:"key"`
	Payer string `json:"payer"`
	// Status is the DICT's HTTP status, or 0 when nothing was answered.
	Status int `json:"status"`
	// Reason is a local refusal's, the DICT's problem type, "store commit
	// in doubt" or "request failed".
	Reason string `json:"reason"`
	// RetryAfterS is the mirror's wait (at least 0.001) or the DICT's
	// Retry-After; WaitS the time slept while refused; both in seconds.
	RetryAfterS float64 `json:"retry_after_s"`
	Result      string  `json:"result"`
	WaitS       float64 `json:"wait_s"`
	EndToEndID  string  `json:"end_to_end_id,omitempty"`
	Message     string  `json:"message,omitempty"` // in English

	// The entry, when the DICT found the key.
	KeyType     string `json:"key_type,omitempty"`
	Participant string `json:"participant,omitempty"`
	Branch      string `json:"branch,omitempty"`
	Account     string `json:"account,omitempty"`
	AccountType string `json:"account_type,omitempty"`
	OwnerType   string `json:"owner_type,omitempty"`
	OwnerTaxID  string `json:"owner_tax_id,omitempty"`
	OwnerName   string `json:"owner_name,omitempty"`
}

// Messages of NewLookupRecord that a caller may translate.
const (
	MsgLookupInterrupted = "interrupted while waiting for the throttle"
	MsgLookupRefused     = "refused locally by %s, not sent" // the bucket's key
	MsgNoEntry           = "no entry for this key"
)

// NewLookupRecord is res as a record: blocked (or interrupted while it
// waited) when the mirror refused it, sent for an entry or a 404, failed
// for another answer or error.
func NewLookupRecord(res dict.BatchResult) LookupRecord {
	rec := LookupRecord{Key: res.Request.Key, Payer: res.Request.PayerID, EndToEndID: res.EndToEndID, WaitS: view.Seconds(res.Waited)}
	err := res.Err
	var remote *dict.RemoteError
	switch {
	case err == nil && !res.Decision.Allowed:
		d := res.Decision
		rec.Result, rec.Message = LookupBlocked, fmt.Sprintf(MsgLookupRefused, d.Key)
		if res.Interrupted {
			rec.Result, rec.Message = LookupInterrupted, MsgLookupInterrupted
		}
		rec.Reason, rec.RetryAfterS = d.Reason.String(), view.Seconds(max(d.RetryAfter, time.Millisecond))
	case err == nil:
		rec.Status, rec.Result = http.StatusOK, lookupSent
		e := res.Response.Entry
		rec.KeyType, rec.Participant, rec.Branch = string(e.KeyType), e.Account.Participant, e.Account.Branch
		rec.Account, rec.AccountType = e.Account.AccountNumber, e.Account.AccountType
		rec.OwnerType, rec.OwnerTaxID, rec.OwnerName = e.Owner.Type, e.Owner.TaxIDNumber, e.Owner.Name
	case errors.As(err, &remote):
		rec.Status, rec.RetryAfterS = remote.Status, view.Seconds(remote.RetryAfter)
		if remote.Problem != nil {
			rec.Reason = remote.Problem.TypeName()
		}
		rec.Result, rec.Message = LookupFailed, err.Error()
		if remote.NotFound() {
			rec.Result, rec.Message = lookupSent, MsgNoEntry
		}
	case errors.Is(err, throttle.ErrOutcomeUnknown):
		// If the lost commit landed, a hold stays: only stricter.
		rec.Result, rec.Reason, rec.Message = LookupFailed, "store commit in doubt", err.Error()
	default:
		rec.Result, rec.Reason, rec.Message = LookupFailed, "request failed", err.Error()
	}
	return rec
}

// LookupColumns is the header of a CSV LookupWriter.
var LookupColumns = []string{"key", "payer", "status", "reason", "retry_after_s", "result", "wait_s", "end_to_end_id",
	"key_type", "participant", "branch", "account", "account_type", "owner_type", "owner_tax_id", "owner_name", "message"}

// LookupWriter writes records as CSV rows under LookupColumns or one JSON
// array, each Write flushed. Not safe for concurrent use.
type LookupWriter struct {
	w    io.Writer
	csv  *csv.Writer // nil: a JSON array
	sep  string      // before the next JSON record
	file *os.File    // CreateLookupFile's, closed by Close
}

// NewLookupWriter starts a file on w: the CSV header, or "[" with asJSON.
func NewLookupWriter(w io.Writer, asJSON bool) (*LookupWriter, error) {
	lw := &LookupWriter{w: w, sep: "\n"}
	var err error
	if asJSON {
		_, err = io.WriteString(w, "[")
	} else {
		lw.csv = csv.NewWriter(w)
		err = lw.writeRow(LookupColumns)
	}
	if err != nil {
		return nil, fmt.Errorf("dict: lookup file: %w", err)
	}
	return lw, nil
}

// writeRow writes and flushes one CSV row.
func (lw *LookupWriter) writeRow(row []string) error {
	if err := lw.csv.Write(row); err != nil {
		return err
	}
	lw.csv.Flush()
	return lw.csv.Error()
}

// Write writes one record.
func (lw *LookupWriter) Write(r LookupRecord) error {
	if lw.csv == nil {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = io.WriteString(lw.w, lw.sep+string(b))
		lw.sep = ",\n"
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return lw.writeRow([]string{r.Key, r.Payer, strconv.Itoa(r.Status), r.Reason, f(r.RetryAfterS), r.Result, f(r.WaitS), r.EndToEndID,
		r.KeyType, r.Participant, r.Branch, r.Account, r.AccountType, r.OwnerType, r.OwnerTaxID, r.OwnerName, r.Message})
}

// Close ends the file, and closes it when CreateLookupFile created it.
func (lw *LookupWriter) Close() error {
	var err error
	if lw.csv == nil {
		_, err = io.WriteString(lw.w, "\n]\n")
	}
	if lw.file != nil {
		err = errors.Join(err, lw.file.Close())
	}
	return err
}
