package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/report"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// runSifenSend is "balde sifen-send": it imports DE and lot XML files as
// documents and sends them with sifen.SendDocuments — the same send path,
// throttle and documents table as serve's "Send all drafts" button — on the
// database it shares with serve, drawing its progress and printing one
// result per document.
//
// A rerun, or a run after a crash, never sends a document twice: documents
// left in "sending" are resolved first (Sender.Resolve), documents already
// sent are skipped (Import refuses their CDC), and only drafts and errors
// are grouped and sent.
//
// With --follow it then fetches the results of every lot of the database
// still "sent" — this run's and any earlier run's or serve's — as serve's
// poller does (each lot queried when its schedule says it is due); with no
// FILE it only does that.
func runSifenSend(ctx context.Context, m *Main, args []string) (err error) {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return UsageError("%v", err)
	}
	fs := m.newFlagSet("sifen-send",
		"sifen-send [--env test|prod] [--db DSN] [--sifen-url URL] [--wait|--no-wait] [--max-wait D] [--follow] [--replace] [--allow-unsigned] [--json] FILE|DIR...\n       balde sifen-send --follow [--db DSN] [--sifen-url URL] [--json]",
		"balde sifen-send --env test --sifen-url official --db sqlite://balde.db invoices/2026-01/ extra/lote-17.xml\n  balde sifen-send --follow --sifen-url official --db sqlite://balde.db")
	cfg.addStoreFlags(fs)
	cfg.addSifenFlags(fs)
	envName := fs.String("env", string(sifen.EnvTest), "SIFEN environment: test or prod")
	var wf waitFlags
	wf.add(fs)
	jsonOut := fs.Bool("json", false, "write one JSON object per document, then a summary object")
	allowUnsigned := fs.Bool("allow-unsigned", false, "accept DEs without a signature (test environment only; SIFEN rejects them)")
	replace := fs.Bool("replace", false, "a draft or error of the database holding a FILE's CDC with other content takes the FILE's content (without it, that DE is reported invalid and not sent)")
	follow := fs.Bool("follow", false, "after sending, query the result of every lot of the database still sent, this run's and earlier ones' (siConsLoteDE, each lot when due: 10 min after its send, then every interval), until each document is approved or rejected; with no FILE, only that")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	env, err := sifen.ParseEnv(*envName)
	if err != nil {
		return UsageError("sifen-send: --env %q: want test or prod", *envName)
	}
	if *allowUnsigned && env != sifen.EnvTest {
		return UsageError("sifen-send: --allow-unsigned is for the test environment only")
	}
	if err := cfg.checkSifenBlock(); err != nil {
		return err
	}
	wait, maxWait, err := wf.resolve("sifen-send")
	if err != nil {
		return err
	}
	if fs.NArg() == 0 && !*follow {
		return UsageError("sifen-send: no FILE or DIR to send, and no --follow (see balde sifen-send --help)")
	}
	if cfg.SifenURL == "" {
		return UsageError(`sifen-send: no SIFEN URL configured (set --sifen-url or BALDE_SIFEN_URL; "official" for SIFEN's endpoints)`)
	}

	// Every file is read and parsed before anything is stored or sent:
	// bad input changes nothing.
	files, err := sifen.XMLFiles(fs.Args())
	if err != nil {
		return UsageError("sifen-send: %v", err)
	}
	clock := m.batchClock()
	mode := report.ChooseMode(m.Stdout, *jsonOut)
	items, bad := parseDocuments(ctx, files, env, *allowUnsigned)
	if len(bad) > 0 {
		rep := report.New(m.Stdout, mode, len(items), "sifen-send", clock, m.printer())
		for _, it := range bad {
			rep.Item(report.Invalid, it.Line(), it.Record())
		}
		rep.Finish(false, len(items)-len(bad))
		return UsageError("sifen-send: %d invalid document(s), nothing sent: %s", len(bad), bad[0].Message)
	}

	client, err := cfg.sifenClient(cfg.SifenURL)
	if err != nil {
		return err
	}
	eng, err := openEngine(ctx, cfg, engineOptions{Clock: clock.Now})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.close(ctx)) }()
	sender, err := eng.sifenSender(cfg, client, *allowUnsigned)
	if err != nil {
		return err
	}
	// The interval between lots is the database's (the strictest any
	// process configured): a difference is said, never silent.
	notes, err := sender.ShareInterval(ctx)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(m.Stderr, "balde: sifen-send: %s\n", n)
	}
	b := &sifenBatch{
		sender: sender, env: env, wait: wait, maxWait: maxWait, clock: clock, replace: *replace,
		rep: report.New(m.Stdout, mode, len(items), "sifen-send", clock, m.printer()), warn: m.Stderr,
	}
	b.rep.Progress = wf.progressTo(m, mode)
	sum, err := b.run(ctx, items)
	if err != nil {
		return err
	}
	if *follow && ctx.Err() == nil { // after Ctrl-C the summary says what was done; nothing is followed
		if err := b.follow(ctx, items); err != nil {
			return err
		}
	}
	return batchExit("sifen-send", sum, b.rep.Tr)
}

// sifenItem is one DE of the input and what became of it; sifenRecord is
// its JSON line.
type (
	sifenItem   = report.SifenItem
	sifenRecord = report.SifenRecord
)

// parseDocuments reads every file (sifen.ReadFiles) and returns its DEs as
// items, in order; bad lists the files (or DEs) that cannot be sent:
// unreadable, malformed, a bad RUC, check digit or CDC, or a CDC given twice.
func parseDocuments(ctx context.Context, files []string, env sifen.Env, allowUnsigned bool) (items, bad []*sifenItem) {
	des, _ := sifen.ReadFiles(ctx, files, env, allowUnsigned)
	for _, fd := range des {
		it := &sifenItem{File: fd.File, Env: env, DE: fd.DE}
		items = append(items, it)
		if fd.Err != nil {
			it.Result, it.Message = report.Invalid, fd.Err.Error()
			bad = append(bad, it)
		}
	}
	return items, bad
}

// sifenBatch sends one run's documents.
type sifenBatch struct {
	sender  *sifen.Sender
	env     sifen.Env
	replace bool // --replace: Import replaces a draft's or error's content
	wait    bool
	maxWait time.Duration
	clock   report.Clock
	rep     *report.Reporter
	warn    io.Writer // warnings that do not stop the run

	done int // items reported
}

// finish reports it.
func (b *sifenBatch) finish(it *sifenItem) {
	b.done++
	b.rep.Item(it.Result, it.Line(), it.Record())
}

// run resolves, imports and sends (sifen.SendDocuments). It returns the
// summary, or an error when the store failed (the summary is printed
// first).
func (b *sifenBatch) run(ctx context.Context, items []*sifenItem) (report.Summary, error) {
	stop := func(err error) (report.Summary, error) {
		if ctx.Err() != nil && !errors.Is(err, throttle.ErrStoreUnavailable) {
			return b.interrupted(items)
		}
		b.rep.Finish(false, len(items)-b.done)
		return report.Summary{}, err
	}

	// 1. Settle what a crashed or unanswered send left in "sending" before
	// anything can be sent again.
	resolved, err := b.sender.Resolve(ctx)
	for _, r := range resolved {
		b.rep.Note(b.rep.Tr.Sprintf("resolved document %s (cdc=%s) left sending: SIFEN answered %s, now %s", strconv.FormatInt(r.DocumentID, 10), r.CDC, r.Code, b.rep.Tr.Text(string(r.Status))))
	}
	if errors.Is(err, throttle.ErrStoreUnavailable) {
		return stop(err)
	}
	if err != nil {
		fmt.Fprintln(b.warn, "balde:", b.rep.Tr.Sprintf("sifen-send: some documents left sending could not be resolved (they stay unsent): %s", oneLine(err.Error())))
	}

	// 2. Import each DE on its own: a document already sent is skipped
	// without refusing the rest of its file.
	des := make([]sifen.FileDE, len(items))
	for i, it := range items {
		des[i] = sifen.FileDE{File: it.File, DE: it.DE}
	}
	var importer sifen.Importer = b.sender
	if b.replace {
		importer = sifen.ImportFunc(b.sender.ImportReplacing)
	}
	imported, err := sifen.ImportFiles(ctx, importer, des, b.env)
	byID := make(map[int64]*sifenItem)
	var docs []sifen.Document
	for i, im := range imported {
		it := items[i]
		var taken *sifen.CDCError
		switch {
		case im.Err == nil:
			it.Document = im.Document.ID
			byID[it.Document] = it
			docs = append(docs, im.Document)
		case errors.As(im.Err, &taken):
			// Another document holds the CDC (Import says which and why).
			it.Result, it.Message = report.Skipped, strings.TrimPrefix(im.Err.Error(), "sifen: ")
			switch taken.Document.Status {
			case sifen.StatusSending:
				// After Resolve, a send may still be live, here or elsewhere:
				// Import's error says which, and since when.
				it.Result = report.Blocked
				since := taken.Document.ClaimedAt.UTC().Format("2006-01-02 15:04:05 UTC")
				if taken.SendInProgress() {
					it.Said = b.rep.Tr.Sprintf("being sent now by another send since %s", since)
				} else {
					it.Said = b.rep.Tr.Sprintf("left in sending by a send without answer since %s; SIFEN is asked about it once that send is %s old, and it is sent again only on a definitive answer", since, sifen.DefaultResolveAfter)
				}
			case sifen.StatusDraft, sifen.StatusError:
				// Another content under the CDC: the user decides (bad
				// input, not "nothing to do").
				it.Result = report.Invalid
				it.Message += " (sifen-send --replace)"
				it.Said = b.rep.Tr.Sprintf("already document %s, a draft or an error with other content: not imported (--replace gives it this file's content)", strconv.FormatInt(taken.Document.ID, 10))
			case sifen.StatusRejected:
				// Import takes a rejected CDC again once its XML changed.
				it.Document, it.Code = taken.Document.ID, taken.Document.ResponseCode
				it.Message = fmt.Sprintf("rejected by SIFEN (%s); correct the document to send it again", taken.Document.Message)
				it.Said = b.rep.Tr.Sprintf("rejected by SIFEN (%s); correct the document to send it again", taken.Document.Message)
			}
			b.finish(it)
		default:
			it.Result, it.Message = report.Failed, im.Err.Error()
			b.finish(it)
		}
	}
	if err != nil {
		return stop(err)
	}

	// 3. Send: sifen's one send path groups, sends and waits; this command
	// draws its events.
	_, err = sifen.SendDocuments(ctx, b.sender, docs, sifen.BatchConfig{
		Wait: b.wait && b.maxWait > 0, MaxWait: b.maxWait, Clock: b.clock.Time, Sleep: b.clock.Sleep,
		Progress: func(e sifen.Event) { b.draw(e, byID) },
	})
	if err != nil {
		return stop(err)
	}
	if ctx.Err() != nil {
		return b.interrupted(items)
	}
	return b.rep.Finish(false, 0), nil
}

// interrupted ends a run stopped by Ctrl-C between items.
func (b *sifenBatch) interrupted(items []*sifenItem) (report.Summary, error) {
	return b.rep.Finish(true, len(items)-b.done), nil
}

// draw shows one event of sifen.SendDocuments: a wait about to start, or a
// document's result line.
func (b *sifenBatch) draw(e sifen.Event, byID map[int64]*sifenItem) {
	tr := b.rep.Tr
	switch e.Kind {
	case sifen.EventWaiting:
		if bl := e.Blocked; bl != nil {
			b.rep.Waiting(e.Wait, tr.Sprintf("%s on %s, %d document(s)", tr.Text(bl.Reason.String()), bl.Key, len(e.IDs)))
		} else {
			b.rep.Waiting(e.Wait, tr.Sprintf("results of %d document(s)", len(e.IDs)))
		}
	case sifen.EventResult:
		if it := byID[e.Result.DocumentID]; it != nil {
			b.result(it, e.Result)
			b.finish(it)
		}
	}
}

// result fills it from its document's result, with the plain line's
// message in the reader's language.
func (b *sifenBatch) result(it *sifenItem, r *sifen.DocResult) {
	tr := b.rep.Tr
	it.Code, it.Lot, it.Wait, it.Message, it.Said = r.Code, r.LotNumber, r.Wait, r.Message, ""
	switch r.Result {
	case sifen.BatchSent:
		it.Result = report.Sent
	case sifen.BatchBlocked:
		it.Result = report.Blocked
		if bl := r.Blocked; bl != nil {
			d := web.FormatWait(bl.Wait)
			it.Message = fmt.Sprintf("blocked: %s on %s, retry in %s", bl.Reason, bl.Key, d)
			it.Said = tr.Sprintf("blocked: %s on %s, retry in %s", tr.Text(bl.Reason.String()), bl.Key, d)
			if b.wait {
				it.Message += fmt.Sprintf(" (beyond --max-wait %s)", b.maxWait)
				it.Said += tr.Sprintf(" (beyond --max-wait %s)", b.maxWait)
			}
		}
	case sifen.BatchSentElsewhere:
		it.Result = report.Skipped
		detail := strings.TrimPrefix(r.Message, "sent by another process: ")
		it.Said = tr.Sprintf("sent by another process: %s", detail)
	default: // sifen.BatchFailed
		it.Result = report.Failed
		if o := r.LotSend; o != nil && o.Status == sifen.OutcomeNotQueued {
			it.Said = tr.Sprintf("SIFEN did not queue the lot: %s", o.Message)
		}
	}
}

// follow fetches SIFEN's results (sifen.FollowDocuments) of this run's
// sent documents and of every document of the database still sent — earlier
// runs' or serve's — and reports each: approved (with dProtAut, and whether
// with observations) or rejected (with SIFEN's codes). With --json it ends
// with one {"follow": {...}} object. Ctrl-C stops it with exit 1: the
// documents left stay sent, and a later --follow (or a serve on the
// database) fetches their results.
func (b *sifenBatch) follow(ctx context.Context, items []*sifenItem) error {
	var ids []int64
	for _, it := range items {
		if it.Result == report.Sent {
			ids = append(ids, it.Document)
		}
	}
	var sum sifen.FollowSummary
	left, err := sifen.FollowDocuments(ctx, b.sender, ids, sifen.FollowConfig{
		Sleep: b.clock.Sleep,
		Progress: func(e sifen.FollowEvent) {
			if e.Kind == sifen.EventResult {
				sum.Count(e.Document.Status)
			}
			b.drawFollow(e)
		},
	})
	sum.Pending, sum.Interrupted = len(left), ctx.Err() != nil
	if b.rep.Mode() == report.JSON {
		writeJSONLine(b.rep.Writer(), map[string]sifen.FollowSummary{"follow": sum})
	}
	if sum.Interrupted {
		return &ExitError{Code: ExitFailed, Err: errors.New(b.rep.Tr.Sprintf(
			"sifen-send: interrupted while following %d document(s): they stay sent; balde sifen-send --follow fetches their results (so does balde serve on this database)", len(left)))}
	}
	return err
}

// drawFollow shows one event of sifen.FollowDocuments.
func (b *sifenBatch) drawFollow(e sifen.FollowEvent) {
	switch e.Kind {
	case sifen.EventPollFailed:
		fmt.Fprintln(b.warn, "balde:", b.rep.Tr.Sprintf("sifen-send: lot results: %s", oneLine(e.Err.Error())))
	case sifen.EventWaiting:
		b.rep.Waiting(e.Wait, b.rep.Tr.Sprintf("results of %d document(s)", len(e.IDs)))
	case sifen.EventResult:
		r := sifen.NewLotResult(*e.Document)
		b.rep.Note(r.String())
		if b.rep.Mode() == report.JSON {
			writeJSONLine(b.rep.Writer(), map[string]sifen.LotResult{"lot_result": r})
		}
	}
}
