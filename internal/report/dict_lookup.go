package report

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
)

// DictLookup prints the lookups of a dict.Batch on Reporter, for any
// caller ("balde dict-lookup" is one): each lookup's
// dictlookup.LookupRecord (the JSON line, and the row or object written to
// Out) and its plain line, whose message is in Reporter's language, in
// input order. The Batch runs
// the lookups: give it Progress and Print, then hand Run's error to
// Finish.
type DictLookup struct {
	Reporter *Reporter
	// Wait and MaxWait are the Batch's: a refused lookup whose wait was
	// beyond MaxWait says so.
	Wait    bool
	MaxWait time.Duration
	// Out, when set, receives every record too (dictlookup.CreateLookupFile).
	Out interface {
		Write(dictlookup.LookupRecord) error
	}
	printed int

	mu      sync.Mutex        // Progress runs on the lookups' goroutines
	waiting map[int]time.Time // when each lookup's current wait began
}

// OutputError is a record DictLookup.Print could not write to Out: the run
// stopped there.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "results file: " + e.Err.Error() }

func (e *OutputError) Unwrap() error { return e.Err }

// Progress is the Batch's Progress: it draws a lookup that waits for the
// mirror. The lookups run side by side, so their waits are the Batch's
// Sleep (give it the reporter clock's BaseSleep: the countdown is for one
// wait at a time); each printed result adds its own wait to the summary,
// an interrupted one the part of its last wait that passed.
func (l *DictLookup) Progress(ev dict.BatchEvent) {
	if ev.Kind == dict.BatchWaiting {
		rep := l.Reporter
		l.mu.Lock()
		if l.waiting == nil {
			l.waiting = make(map[int]time.Time)
		}
		l.waiting[ev.Index] = rep.clock.Time()
		l.mu.Unlock()
		rep.Waiting(ev.Wait, rep.Tr.Sprintf("%s on %s", rep.Tr.Text(ev.Decision.Reason.String()), ev.Decision.Key))
	}
}

// Print is the Batch's deliver: it prints res and writes its record to
// Out; a record Out cannot take is an *OutputError, which stops the run.
func (l *DictLookup) Print(res dict.BatchResult) error {
	rep := l.Reporter
	rec := lookupRecordOf(res, l.Wait, l.MaxWait, rep)
	l.printed++
	waited := res.Waited
	l.mu.Lock()
	if began, ok := l.waiting[res.Index]; ok && res.Interrupted {
		// Ctrl-C during a wait: res.Waited counts only the waits that ended.
		waited += max(rep.clock.Time().Sub(began), 0)
	}
	delete(l.waiting, res.Index)
	l.mu.Unlock()
	rep.AddWait(waited)
	rep.Item(Result(rec.Result), rec.line(), rec.LookupRecord)
	if l.Out != nil {
		if err := l.Out.Write(rec.LookupRecord); err != nil {
			return &OutputError{Err: err}
		}
	}
	return nil
}

// Finish prints the summary of a run of total lookups that ended with err
// (Batch.Run's) and returns it. A run stopped by ctx is an interrupted
// summary, not an error: a lookup that was waiting for the mirror was
// printed Interrupted and counted not processed, as the lookups never
// reached are, never blocked. Out's failure (*OutputError) and the store's
// are returned; the summary is printed first either way.
func (l *DictLookup) Finish(ctx context.Context, total int, err error) (Summary, error) {
	var oe *OutputError
	switch {
	case errors.As(err, &oe):
		l.Reporter.Finish(false, total-l.printed)
		return Summary{}, err
	case ctx.Err() != nil:
		l.Reporter.Finish(true, total-l.printed)
		return l.Reporter.Summary(), nil
	case err != nil:
		l.Reporter.Finish(false, total-l.printed)
		return Summary{}, err
	}
	return l.Reporter.Finish(false, 0), nil
}

// lookupRecord is a lookup's dictlookup.LookupRecord (the JSON line with
// --json, the row or object of --out) with its message in the reader's
// language for the plain line.
type lookupRecord struct {
	dictlookup.LookupRecord
	said string
}

// line renders the record for the plain output.
func (r lookupRecord) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %s payer=%s status=%d", r.Result, r.Key, r.Payer, r.Status)
	if r.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", r.Reason)
	}
	if r.RetryAfterS > 0 {
		fmt.Fprintf(&b, " retry_after=%s", FormatSeconds(r.RetryAfterS))
	}
	if r.WaitS > 0 {
		fmt.Fprintf(&b, " wait=%s", FormatSeconds(r.WaitS))
	}
	if r.OwnerName != "" {
		fmt.Fprintf(&b, " owner=%q participant=%s", r.OwnerName, r.Participant)
	}
	if r.said != "" {
		fmt.Fprintf(&b, " %q", r.said)
	} else if r.Message != "" {
		fmt.Fprintf(&b, " %q", r.Message)
	}
	return b.String()
}

// lookupRecordOf turns a lookup's result into its record
// (dictlookup.NewLookupRecord), naming --max-wait when a refusal's wait was
// beyond it.
func lookupRecordOf(res dict.BatchResult, wait bool, maxWait time.Duration, rep *Reporter) lookupRecord {
	rec := lookupRecord{LookupRecord: dictlookup.NewLookupRecord(res)}
	tr := rep.Tr
	switch {
	case rec.Message == dictlookup.MsgLookupInterrupted, rec.Message == dictlookup.MsgNoEntry:
		rec.said = tr.Sprintf(rec.Message)
	case rec.Result == dictlookup.LookupBlocked:
		rec.said = tr.Sprintf(dictlookup.MsgLookupRefused, res.Decision.Key)
		if wait {
			rec.Message += fmt.Sprintf(" (the wait is beyond --max-wait %s)", maxWait)
			rec.said += tr.Sprintf(" (the wait is beyond --max-wait %s)", maxWait)
		}
	}
	return rec
}
