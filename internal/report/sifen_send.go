package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// ReadSifenFiles reads the files' DEs as items, in order; bad lists those
// that cannot be sent (sifen.ReadFiles' errors).
func ReadSifenFiles(ctx context.Context, files []string, env sifen.Env, allowUnsigned bool) (items, bad []*SifenItem) {
	for _, fd := range sifen.ReadFiles(ctx, files, env, allowUnsigned) {
		it := &SifenItem{File: fd.File, Env: env, DE: fd.DE}
		items = append(items, it)
		if fd.Err != nil {
			it.Result, it.Message = Invalid, fd.Err.Error()
			bad = append(bad, it)
		}
	}
	return items, bad
}

// Invalid reports the items bad of a run of total, none sent, then the
// summary with the others not processed.
func (r *Reporter) Invalid(bad []*SifenItem, total int) {
	for _, it := range bad {
		r.Item(Invalid, it.Line(), it.Record())
	}
	r.Finish(false, total-len(bad))
}

// SifenSend draws one run of "balde sifen-send" on Reporter, one item per
// DE. Fill the fields (Replace: --replace; Wait, MaxWait: --wait,
// --max-wait; Warn: warning lines, nil discards them), then call Run once
// and Follow at most once. Not safe for concurrent use.
type SifenSend struct {
	Sender   *sifen.Sender
	Env      sifen.Env
	Replace  bool
	Wait     bool
	MaxWait  time.Duration
	Clock    Clock
	Reporter *Reporter
	Warn     io.Writer

	done int // items reported
}

// finish reports it.
func (b *SifenSend) finish(it *SifenItem) {
	b.done++
	b.Reporter.Item(it.Result, it.Line(), it.Record())
}

// Run sends items with Sender.SendFiles and draws its events. A run
// stopped by ctx is an interrupted summary, not an error; a store's or
// import's failure is returned after the summary.
func (b *SifenSend) Run(ctx context.Context, items []*SifenItem) (Summary, error) {
	for _, n := range b.Sender.IntervalNotes() { // the interval agreed with the database, never silent
		b.warn("balde:", "sifen-send: "+n)
	}
	des := make([]sifen.FileDE, len(items))
	for i, it := range items {
		des[i] = sifen.FileDE{File: it.File, DE: it.DE}
	}
	byID := make(map[int64]*SifenItem)
	tr, next := b.Reporter.Tr, 0
	_, _, err := b.Sender.SendFiles(ctx, des, b.Env, sifen.BatchConfig{
		Wait: b.Wait && b.MaxWait > 0, MaxWait: b.MaxWait, Clock: b.Clock.Time, Sleep: b.Clock.Sleep, Replace: b.Replace,
		Progress: func(e sifen.Event) {
			switch e.Kind {
			case sifen.EventResolved:
				r := e.Resolved
				b.Reporter.Note(tr.Sprintf("resolved document %s (cdc=%s) left sending: SIFEN answered %s, now %s", strconv.FormatInt(r.DocumentID, 10), r.CDC, r.Code, tr.Text(string(r.Status))))
			case sifen.EventResolveFailed:
				b.warn("balde:", tr.Sprintf("sifen-send: some documents left sending could not be resolved (they stay unsent): %s", OneLine(e.Err.Error())))
			case sifen.EventImported:
				b.imported(items[next], e.Imported, byID)
				next++
			case sifen.EventWaiting:
				if bl := e.Blocked; bl != nil {
					b.Reporter.Waiting(e.Wait, tr.Sprintf("%s on %s, %d document(s)", tr.Text(bl.Reason.String()), bl.Key, len(e.IDs)))
				} else {
					b.Reporter.Waiting(e.Wait, tr.Sprintf("results of %d document(s)", len(e.IDs)))
				}
			case sifen.EventResult:
				if it := byID[e.Result.DocumentID]; it != nil {
					b.result(it, e.Result)
					b.finish(it)
				}
			}
		},
	})
	if ctx.Err() != nil && !errors.Is(err, throttle.ErrStoreUnavailable) {
		return b.Reporter.Finish(true, len(items)-b.done), nil // Ctrl-C between items
	}
	if err != nil {
		b.Reporter.Finish(false, len(items)-b.done)
		return Summary{}, err
	}
	return b.Reporter.Finish(false, 0), nil
}

// imported draws one DE's import: a draft waits for its send's result,
// another is reported now.
func (b *SifenSend) imported(it *SifenItem, im *sifen.Imported, byID map[int64]*SifenItem) {
	tr := b.Reporter.Tr
	var taken *sifen.CDCError
	switch {
	case im.Err == nil, im.Watched():
		// Its result comes from the sends (another's, when in flight).
		it.Document = im.Document.ID
		byID[it.Document] = it
		return
	case errors.As(im.Err, &taken):
		// Another document holds the CDC.
		it.Result, it.Message = Skipped, strings.TrimPrefix(im.Err.Error(), "sifen: ")
		switch taken.Document.Status {
		case sifen.StatusSending:
			it.Result = Blocked
			since := taken.Document.ClaimedAt.UTC().Format("2006-01-02 15:04:05 UTC")
			if taken.SendInProgress() {
				it.Said = tr.Sprintf("being sent now by another send since %s", since)
			} else {
				it.Said = tr.Sprintf("left in sending by a send without answer since %s; SIFEN is asked about it once that send is %s old, and it is sent again only on a definitive answer", since, sifen.DefaultResolveAfter)
			}
			if taken.OtherContent {
				it.Said += tr.Sprintf("; this file's content differs from document %s's, the one sent to SIFEN under this CDC", strconv.FormatInt(taken.Document.ID, 10))
			}
		case sifen.StatusDraft, sifen.StatusError:
			// Another content under the CDC: the user decides.
			it.Result = Invalid
			it.Message += " (sifen-send --replace)"
			it.Said = tr.Sprintf("already document %s, a draft or an error with other content: not imported (--replace gives it this file's content)", strconv.FormatInt(taken.Document.ID, 10))
		case sifen.StatusRejected:
			// Import takes a rejected CDC again once its XML changed.
			it.Document, it.Code = taken.Document.ID, taken.Document.ResponseCode
			it.Message = fmt.Sprintf("rejected by SIFEN (%s); correct the document to send it again", taken.Document.Message)
			it.Said = tr.Sprintf("rejected by SIFEN (%s); correct the document to send it again", taken.Document.Message)
		}
		if it.Result == Skipped && taken.OtherContent && b.Reporter.mode == Bar {
			b.Reporter.Note(it.Line()) // a bar shows no skipped line: this one must be read
		}
	default:
		it.Result, it.Message = Failed, im.Err.Error()
	}
	b.finish(it)
}

// result fills it from its document's result.
func (b *SifenSend) result(it *SifenItem, r *sifen.DocResult) {
	tr := b.Reporter.Tr
	it.Code, it.Lot, it.Wait, it.Message, it.Said = r.Code, r.LotNumber, r.Wait, r.Message, ""
	switch r.Result {
	case sifen.BatchSent:
		it.Result = Sent
	case sifen.BatchBlocked:
		it.Result = Blocked
		if bl := r.Blocked; bl != nil {
			d := view.FormatWait(bl.Wait)
			it.Message = fmt.Sprintf("blocked: %s on %s, retry in %s", bl.Reason, bl.Key, d)
			it.Said = tr.Sprintf("blocked: %s on %s, retry in %s", tr.Text(bl.Reason.String()), bl.Key, d)
			if b.Wait {
				it.Message += fmt.Sprintf(" (beyond --max-wait %s)", b.MaxWait)
				it.Said += tr.Sprintf(" (beyond --max-wait %s)", b.MaxWait)
			}
		}
	case sifen.BatchSentElsewhere:
		it.Result = Skipped
		detail := strings.TrimPrefix(r.Message, "sent by another process: ")
		it.Said = tr.Sprintf("sent by another process: %s", detail)
	default: // sifen.BatchFailed
		it.Result = Failed
		if o := r.LotSend; o != nil && o.Status == sifen.OutcomeNotQueued {
			it.Said = tr.Sprintf("SIFEN did not queue the lot: %s", o.Message)
		}
	}
}

// Follow fetches and reports the results of every document still sent
// (sifen.FollowDocuments), ending JSON with {"follow": {...}}; an ended ctx
// stops it with an error, in the Reporter's language, counting the
// documents left sent.
func (b *SifenSend) Follow(ctx context.Context, items []*SifenItem) error {
	var ids []int64
	for _, it := range items {
		if it.Result == Sent {
			ids = append(ids, it.Document)
		}
	}
	var sum FollowSummary
	left, err := sifen.FollowDocuments(ctx, b.Sender, ids, sifen.BatchConfig{
		Sleep: b.Clock.Sleep,
		Progress: func(e sifen.Event) {
			if e.Kind == sifen.EventResult {
				sum.Count(e.Document.Status)
			}
			b.drawFollow(e)
		},
	})
	sum.Pending, sum.Interrupted = len(left), ctx.Err() != nil
	if b.Reporter.mode == JSON {
		WriteJSONLine(b.Reporter.w, map[string]FollowSummary{"follow": sum})
	}
	if sum.Interrupted {
		return errors.New(b.Reporter.Tr.Sprintf(
			"sifen-send: interrupted while following %d document(s): they stay sent; balde sifen-send --follow fetches their results (so does balde serve on this database)", len(left)))
	}
	return err
}

// drawFollow shows one event of sifen.FollowDocuments.
func (b *SifenSend) drawFollow(e sifen.Event) {
	switch e.Kind {
	case sifen.EventPollFailed:
		b.warn("balde:", b.Reporter.Tr.Sprintf("sifen-send: lot results: %s", OneLine(e.Err.Error())))
	case sifen.EventWaiting:
		b.Reporter.Waiting(e.Wait, b.Reporter.Tr.Sprintf("results of %d document(s)", len(e.IDs)))
	case sifen.EventResult:
		r := NewLotResult(*e.Document)
		b.Reporter.Note(r.String())
		if b.Reporter.mode == JSON {
			WriteJSONLine(b.Reporter.w, map[string]LotResult{"lot_result": r})
		}
	}
}

// warn writes one warning line on Warn.
func (b *SifenSend) warn(args ...any) {
	if b.Warn != nil {
		fmt.Fprintln(b.Warn, args...)
	}
}

// OneLine is s on one line, without balde's package prefixes ("sqlstore: "),
// which an operator does not need.
func OneLine(s string) string {
	return strings.Join(slices.DeleteFunc(strings.Fields(s), func(w string) bool { return internalPrefixes[w] }), " ")
}

// internalPrefixes are the error prefixes of balde's packages.
var internalPrefixes = map[string]bool{
	"sqlstore:": true, "migrate:": true, "migrations:": true, "throttle:": true,
	"web:": true, "webhook:": true, "engine:": true, "groupcommit:": true, "balde:": true,
}
