package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
)

// DictLookup prints the lookups of a dict.Batch on Reporter, each as its
// dictlookup.LookupRecord, also written to Out when set. Give the Batch
// Progress and Print, and Run's error to Finish; Wait and MaxWait are the
// Batch's.
type DictLookup struct {
	Reporter *Reporter
	Wait     bool
	MaxWait  time.Duration
	Out      *dictlookup.LookupWriter
	printed  int

	mu      sync.Mutex        // Progress runs on the lookups' goroutines
	waiting map[int]time.Time // when each lookup's current wait began
}

// OutputError is a record Print could not write to Out: the run stops.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "results file: " + e.Err.Error() }

func (e *OutputError) Unwrap() error { return e.Err }

// Progress is the Batch's Progress: it draws a lookup that waits. Give the
// Batch Clock.BaseSleep: Print adds each lookup's waits to the summary.
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

// Print is the Batch's deliver: it prints res and writes it to Out (an
// *OutputError on failure).
func (l *DictLookup) Print(res dict.BatchResult) error {
	rep := l.Reporter
	rec, said := lookupRecordOf(res, l.Wait, l.MaxWait, rep)
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
	rep.Item(Result(rec.Result), lookupLine(rec, said), rec)
	if l.Out != nil {
		if err := l.Out.Write(rec); err != nil {
			return &OutputError{Err: err}
		}
	}
	return nil
}

// Finish prints the summary of a run of total lookups that ended with err
// (Batch.Run's) and returns it: a run stopped by ctx is an interrupted
// summary; Out's or the store's failure is returned after the summary.
func (l *DictLookup) Finish(ctx context.Context, total int, err error) (Summary, error) {
	var oe *OutputError
	interrupted, left := ctx.Err() != nil && !errors.As(err, &oe), total-l.printed
	if err == nil && !interrupted {
		left = 0
	}
	sum := l.Reporter.Finish(interrupted, left)
	if err != nil && !interrupted {
		return Summary{}, err
	}
	return sum, nil
}

// lookupLine renders a record for the plain output, with said, its message
// in the reader's language, when set.
func lookupLine(r dictlookup.LookupRecord, said string) string {
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
	if m := cmp.Or(said, r.Message); m != "" {
		fmt.Fprintf(&b, " %q", m)
	}
	return b.String()
}

// lookupRecordOf is res's record, naming --max-wait when a refusal's wait
// was beyond it, and its message in the reader's language ("" when not translated).
func lookupRecordOf(res dict.BatchResult, wait bool, maxWait time.Duration, rep *Reporter) (rec dictlookup.LookupRecord, said string) {
	rec = dictlookup.NewLookupRecord(res)
	tr := rep.Tr
	switch {
	case rec.Message == dictlookup.MsgLookupInterrupted, rec.Message == dictlookup.MsgNoEntry:
		said = tr.Sprintf(rec.Message)
	case rec.Result == dictlookup.LookupBlocked:
		said = tr.Sprintf(dictlookup.MsgLookupRefused, res.Decision.Key)
		if wait {
			rec.Message += fmt.Sprintf(" (the wait is beyond --max-wait %s)", maxWait)
			said += tr.Sprintf(" (the wait is beyond --max-wait %s)", maxWait)
		}
	}
	return rec, said
}
