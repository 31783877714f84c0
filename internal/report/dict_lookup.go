package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/balde-throttle/balde/dict"
)

// DictLookup is one run of "balde dict-lookup" for any caller: it runs
// dict.Batch over its requests and reports each lookup on Reporter, in
// input order: its dict.LookupRecord (the JSON line, and the row or object
// written to Out) and its plain line, whose message is in Reporter's
// language. Fill the fields, then call Run once.
type DictLookup struct {
	Client *dict.Client
	// Wait waits a refusal out, each lookup for at most MaxWait over all
	// its retries; without it (or beyond MaxWait) a refused lookup is
	// reported blocked.
	Wait    bool
	MaxWait time.Duration
	// Senders is the most lookups in flight at once (dict.Batch.Senders).
	Senders  int
	Reporter *Reporter
	// Out, when set, receives every record too (dict.LookupFile).
	Out interface {
		Write(dict.LookupRecord) error
	}
}

// OutputError is a record DictLookup.Run could not write to Out: the run
// stopped there.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "results file: " + e.Err.Error() }

func (e *OutputError) Unwrap() error { return e.Err }

// Run looks up reqs and reports each. It returns the summary (a run
// stopped by ctx is an interrupted summary, not an error: a lookup that
// was waiting for the mirror is reported Interrupted and counted not
// processed, as the lookups never reached are, never blocked), or an
// *OutputError when Out failed, or dict.Batch's error (the store); the
// summary is printed first either way.
func (l *DictLookup) Run(ctx context.Context, reqs []dict.LookupRequest) (Summary, error) {
	rep := l.Reporter
	// The batch's lookups run side by side: their waits go straight to the
	// underlying sleep (the reporter's countdown is for one wait at a
	// time), and each delivered result adds its own wait to the summary.
	batch := dict.Batch{
		Client:  l.Client,
		Wait:    l.Wait,
		MaxWait: l.MaxWait,
		Senders: l.Senders,
		Sleep:   rep.clock.BaseSleep(),
		Progress: func(ev dict.BatchEvent) {
			if ev.Kind == dict.BatchWaiting {
				rep.Waiting(ev.Wait, rep.Tr.Sprintf("%s on %s", rep.Tr.Text(ev.Decision.Reason.String()), ev.Decision.Key))
			}
		},
	}
	delivered := 0
	var outErr error
	err := batch.Run(ctx, reqs, func(res dict.BatchResult) error {
		rec := lookupRecordOf(res, l.Wait, l.MaxWait, rep)
		delivered++
		rep.AddWait(res.Waited)
		rep.Item(Result(rec.Result), rec.line(), rec.LookupRecord)
		if l.Out != nil {
			if err := l.Out.Write(rec.LookupRecord); err != nil {
				outErr = &OutputError{Err: err}
				return outErr
			}
		}
		return nil
	})
	switch {
	case outErr != nil:
		rep.Finish(false, len(reqs)-delivered)
		return Summary{}, outErr
	case ctx.Err() != nil:
		rep.Finish(true, len(reqs)-delivered)
		return rep.Summary(), nil
	case err != nil:
		rep.Finish(false, len(reqs)-delivered)
		return Summary{}, err
	}
	return rep.Finish(false, 0), nil
}

// lookupRecord is a lookup's dict.LookupRecord (the JSON line with
// --json, the row or object of --out) with its message in the reader's
// language for the plain line.
type lookupRecord struct {
	dict.LookupRecord
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
// (dict.NewLookupRecord), naming --max-wait when a refusal's wait was
// beyond it.
func lookupRecordOf(res dict.BatchResult, wait bool, maxWait time.Duration, rep *Reporter) lookupRecord {
	rec := lookupRecord{LookupRecord: dict.NewLookupRecord(res)}
	tr := rep.Tr
	switch {
	case rec.Message == dict.MsgLookupInterrupted, rec.Message == dict.MsgNoEntry:
		rec.said = tr.Sprintf(rec.Message)
	case rec.Result == dict.LookupBlocked:
		rec.said = tr.Sprintf(dict.MsgLookupRefused, res.Decision.Key)
		if wait {
			rec.Message += fmt.Sprintf(" (the wait is beyond --max-wait %s)", maxWait)
			rec.said += tr.Sprintf(" (the wait is beyond --max-wait %s)", maxWait)
		}
	}
	return rec
}
