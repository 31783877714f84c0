package sifen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// lotSender is the one-lot primitive SendDocuments drives: *Sender, or an
// application's wrapper of it (or a test double).
type lotSender interface {
	Send(ctx context.Context, ids ...int64) (LotSend, error)
	FitLot(ctx context.Context, ids []int64) (int, error)
	Get(ctx context.Context, id int64) (Document, error)
}

var _ lotSender = (*Sender)(nil)

const (
	// defaultBatchMaxWait is BatchConfig.MaxWait's default: SIFEN's interval
	// many times over and a first local block after 0301.
	defaultBatchMaxWait = 15 * time.Minute
	// batchWatchEvery is how often a batch rereads documents another send holds.
	batchWatchEvery = time.Second
	// maxNotQueued is how many lots of one run drawing 0301 a document may be in
	// before it is reported failed (decision 0046).
	maxNotQueued = 2
	// maxRaces bounds the claim races a still sendable document may lose in one
	// run before it is reported failed.
	maxRaces = 5
)

// BatchConfig configures SendDocuments, SendFiles and FollowDocuments. The
// zero value sends one pass without waiting, on the system clock.
type BatchConfig struct {
	// Wait: a refused lot is sent once the refusal's wait has passed, as long
	// as each of its documents waits at most MaxWait in all, the other RUCs'
	// lots going meanwhile. Without it a refused lot is reported blocked at
	// once, and a lot that drew 0301 failed.
	Wait bool
	// MaxWait is the most one document may wait over all its retries, from when
	// its lot is its RUC's next (default defaultBatchMaxWait).
	MaxWait time.Duration
	// Clock is the Sender's store and limiter's; Sleep waits on it (defaults
	// throttle.SystemClock and throttle.SleepContext).
	Clock throttle.Clock
	Sleep throttle.Sleep
	// Progress, when set, is told each event as it happens; it must not block
	// for long.
	Progress func(Event)
	// Replace makes SendFiles import with Sender.ImportReplacing.
	Replace bool
}

func (cfg BatchConfig) emit(e Event) {
	if cfg.Progress != nil {
		cfg.Progress(e)
	}
}

// eventKind says what an Event reports.
type eventKind string

const (
	// EventLotSent: a lot went to SIFEN (or its request failed); TooBig counts
	// the documents of its group left for a later lot by size.
	EventLotSent eventKind = "lot_sent"
	// EventRefused: a lot was refused before it left (Blocked).
	EventRefused eventKind = "refused"
	// EventWaiting: every RUC left must wait; the batch sleeps Wait, until
	// Until. Blocked is the refusal due first (nil when waiting on another
	// send), IDs its next lot.
	EventWaiting eventKind = "waiting"
	// EventResult: one document's Result in a send, or its Document (approved
	// or rejected) in FollowDocuments.
	EventResult eventKind = "result"
	// EventResolved: SendFiles settled a document a crashed send left (Resolved).
	EventResolved eventKind = "resolved"
	// EventImported: SendFiles imported a DE, or could not (Imported).
	EventImported eventKind = "imported"
	// EventResolveFailed and EventPollFailed: SendFiles' initial resolve or a
	// FollowDocuments query failed other than by the store (Err); the run goes on.
	EventResolveFailed eventKind = "resolve_failed"
	EventPollFailed    eventKind = "poll_failed"
)

// Event is one step of a batch, for a caller to draw; Kind says which
// fields are set.
type Event struct {
	Kind     eventKind
	IDs      []int64
	LotSend  *LotSend
	Blocked  *Blocked
	TooBig   int
	Wait     time.Duration
	Until    time.Time
	Result   *DocResult
	Document *Document
	Resolved *Resolved
	Imported *Imported
	Err      error
}

// batchResult is how one document of a batch ended.
type batchResult string

const (
	// BatchSent: SIFEN queued its lot (0300); LotNumber is set.
	BatchSent batchResult = "sent"
	// BatchBlocked: not sent, sendable later: its RUC was refused beyond MaxWait
	// (or at all, without Wait; Blocked), or another send still holds it.
	BatchBlocked batchResult = "blocked"
	// BatchSentElsewhere: another process's send took it; Document is it as read.
	BatchSentElsewhere batchResult = "sent_elsewhere"
	// batchFailed: SIFEN did not queue its lot (Code), the request failed or had
	// no answer (LotSend), or Send refused the lot (Err).
	batchFailed batchResult = "failed"
)

// DocResult is one document's result in a batch.
type DocResult struct {
	DocumentID int64
	Result     batchResult
	// Code is SIFEN's last dCodRes about the document in this run, LotNumber
	// its dProtConsLote once queued, Message what happened.
	Code, LotNumber, Message string
	// LotSend is the last send of its lot; Blocked the refusal of a blocked
	// document (nil when another send holds it).
	LotSend *LotSend
	Blocked *Blocked
	// Wait is how long a sent document waited from when its lot was its RUC's
	// next; for a blocked one, the wait the refusal named.
	Wait time.Duration
	// Document is the document as read, for BatchSentElsewhere; Err the error
	// that failed it.
	Document *Document
	Err      error
}

// SendDocuments sends docs (drafts or in error; one listed twice is taken
// once; one in sending is watched until its send answers) through s in
// lots, and returns one result per document, in the order decided. It is
// balde's one send path (docs/decisions/0046):
//
//   - Lots: GroupLots; a lot too big is cut to the longest prefix that fits,
//     the rest forms the RUC's next lot.
//   - RUCs are independent gates: the batch sleeps only when every RUC left
//     must wait, until the first is due; each document waits at most MaxWait.
//   - A lot that lost a claim race is read again: sendable documents are
//     queued again, held ones watched, taken ones BatchSentElsewhere.
//   - A lot SIFEN answered 0301 is never sent again as it was: with Wait it
//     goes back in two halves once the RUC's block is over (a second 0301
//     fails them); without Wait they fail, and a later batch splits it.
//
// Each send completes whatever happens to ctx; between sends ctx ending
// stops the batch, the documents without a result keeping their status. The
// error is a store failure (throttle.ErrStoreUnavailable).
func SendDocuments(ctx context.Context, s lotSender, docs []Document, cfg BatchConfig) ([]DocResult, error) {
	b := newBatch(ctx, s, docs, cfg)
	for b.pending() {
		tried := false
		for _, g := range b.gates {
			if ctx.Err() != nil {
				return b.results, nil
			}
			if g.due(b.now()) {
				tried = true
				if err := b.step(ctx, g); err != nil {
					return b.results, err
				}
			}
		}
		if tried {
			continue
		}
		g := b.soonest()
		at := g.next()
		wait := at.Sub(b.now())
		b.cfg.emit(Event{Kind: EventWaiting, IDs: g.headIDs(), Blocked: g.refusal, Wait: wait, Until: at})
		if err := b.cfg.Sleep(ctx, wait); err != nil {
			return b.results, nil
		}
	}
	return b.results, nil
}

// batch is the state of one SendDocuments.
type batch struct {
	s       lotSender
	cfg     BatchConfig
	gates   []*batchGate
	docs    map[int64]*batchDoc
	results []DocResult
}

// batchDoc is what a batch remembers of a document: its lots that drew 0301,
// its lost claim races, SIFEN's last 0301 about it.
type batchDoc struct {
	notQueued, races int
	code             string
}

// batchLot is a lot waiting to go; its documents' waits count from start,
// when it became its RUC's next (zero: not yet).
type batchLot struct {
	ids    []int64
	start  time.Time
	tooBig int // documents of its group left out by size
}

// batchGate is one (env, RUC): its lots, not tried before readyAt, and the
// documents another send holds, reread at watchAt (watched since watchSince).
type batchGate struct {
	lots                []*batchLot
	readyAt             time.Time
	refusal             *Blocked
	watch               []int64
	watchAt, watchSince time.Time
}

func newBatch(ctx context.Context, s lotSender, docs []Document, cfg BatchConfig) *batch {
	orDefault(&cfg.MaxWait, defaultBatchMaxWait)
	if cfg.Clock == nil {
		cfg.Clock = throttle.SystemClock
	}
	if cfg.Sleep == nil {
		cfg.Sleep = throttle.SleepContext
	}
	b := &batch{s: s, cfg: cfg, docs: make(map[int64]*batchDoc)}
	byID := make(map[int64]Document, len(docs))
	unique := make([]Document, 0, len(docs))
	for _, d := range docs {
		if _, twice := byID[d.ID]; !twice {
			byID[d.ID] = d
			unique = append(unique, d)
		}
		b.docs[d.ID] = &batchDoc{}
	}
	index := make(map[[2]string]*batchGate) // by environment and RUC
	gate := func(d Document) *batchGate {
		k := [2]string{string(d.Env), d.RUC.Number}
		if index[k] == nil {
			index[k] = &batchGate{}
			b.gates = append(b.gates, index[k])
		}
		return index[k]
	}
	for _, ids := range b.lots(ctx, unique, byID) {
		g := gate(byID[ids[0]])
		g.lots = append(g.lots, &batchLot{ids: ids})
	}
	// A document another send claimed since it was read is watched from
	// the start, so that it gets a result once that send answers.
	for _, d := range unique {
		if !d.Status.Sendable() {
			g := gate(d)
			if len(g.watch) == 0 {
				g.watchSince, g.watchAt = b.now(), b.now()
			}
			g.watch = append(g.watch, d.ID)
		}
	}
	return b
}

// lots groups docs (GroupLots), ordered by their first document; a lot that
// drew 0301 goes in two halves (decision 0046), its documents counting it.
func (b *batch) lots(ctx context.Context, docs []Document, byID map[int64]Document) [][]int64 {
	var lots [][]int64
	for _, ids := range GroupLots(docs) {
		if !b.drewNotQueued(ctx, ids, byID) {
			lots = append(lots, ids)
			continue
		}
		for _, id := range ids {
			b.docs[id] = &batchDoc{notQueued: 1, code: CodeLotNotQueued}
		}
		lots = append(lots, halves(ids)...)
	}
	slices.SortStableFunc(lots, func(x, y []int64) int { return cmp.Compare(x[0], y[0]) })
	return lots
}

// drewNotQueued reports whether ids are the very lot that drew a 0301; in
// doubt (a read fails) yes: splitting costs one interval, a second 0301 more.
func (b *batch) drewNotQueued(ctx context.Context, ids []int64, byID map[int64]Document) bool {
	hash := byID[ids[0]].LotHash
	for _, id := range ids {
		d := byID[id]
		if d.Status != StatusError || d.ResponseCode != CodeLotNotQueued || d.LotHash == "" || d.LotHash != hash {
			return false
		}
	}
	var lot Lote
	for _, id := range ids {
		d, err := b.s.Get(ctx, id)
		if err != nil {
			return true
		}
		de, err := storedDE(d)
		if err != nil {
			return true
		}
		lot.DEs = append(lot.DEs, de)
	}
	packed, err := lot.Pack()
	return err != nil || packed.Hash == hash
}

func (b *batch) now() time.Time { return b.cfg.Clock() }

func (b *batch) pending() bool {
	return slices.ContainsFunc(b.gates, (*batchGate).busy)
}

func (g *batchGate) busy() bool { return len(g.lots) > 0 || len(g.watch) > 0 }

// next is when g has something to do: its next lot's readyAt, or watchAt.
func (g *batchGate) next() time.Time {
	var at time.Time
	if len(g.lots) > 0 {
		at = g.readyAt
	}
	if len(g.watch) > 0 && (len(g.lots) == 0 || g.watchAt.Before(at)) {
		at = g.watchAt
	}
	return at
}

func (g *batchGate) due(now time.Time) bool { return g.busy() && !now.Before(g.next()) }

func (g *batchGate) headIDs() []int64 {
	if len(g.lots) > 0 {
		return g.lots[0].ids
	}
	return g.watch
}

// soonest is the busy gate due first.
func (b *batch) soonest() *batchGate {
	var first *batchGate
	for _, g := range b.gates {
		if g.busy() && (first == nil || g.next().Before(first.next())) {
			first = g
		}
	}
	return first
}

// step does g's due work: its watched documents, then its next lot.
func (b *batch) step(ctx context.Context, g *batchGate) error {
	if len(g.watch) > 0 && !b.now().Before(g.watchAt) {
		if err := b.recheck(ctx, g); err != nil {
			return err
		}
	}
	if len(g.lots) == 0 || b.now().Before(g.readyAt) {
		return nil
	}
	return b.try(ctx, g)
}

// report records one result per id and tells the caller.
func (b *batch) report(ids []int64, r DocResult) {
	for _, id := range ids {
		r := r
		r.DocumentID = id
		if d := b.docs[id]; d != nil && r.Code == "" && r.Result != BatchSent {
			r.Code = d.code // a blocked or failed document whose lot drew 0301 says so
		}
		b.results = append(b.results, r)
		b.cfg.emit(Event{Kind: EventResult, IDs: []int64{id}, Result: &b.results[len(b.results)-1]})
	}
}

// pushFront queues lots before g's next ones.
func (g *batchGate) pushFront(lots ...*batchLot) {
	g.lots = append(slices.Clip(lots), g.lots...)
}

// try sends g's next lot and decides what becomes of its documents.
func (b *batch) try(ctx context.Context, g *batchGate) error {
	lot := g.lots[0]
	g.lots = g.lots[1:]
	at := b.now()
	if lot.start.IsZero() {
		lot.start = at
	}
	// Once started, a send completes whatever happens to ctx: Ctrl-C stops
	// the batch after this lot, never half-way through it.
	out, err := b.s.Send(context.WithoutCancel(ctx), lot.ids...)
	switch {
	case errors.Is(err, ErrLotTooBig) && len(lot.ids) > 1:
		// Refused untaken: the longest prefix that fits goes first, the rest next.
		n, ferr := b.s.FitLot(ctx, lot.ids)
		if ferr != nil {
			b.report(lot.ids, DocResult{Result: batchFailed, Message: ferr.Error(), Err: ferr})
			return storeFailure(ferr)
		}
		n = max(n, 1) // the first alone is too big: its own send says so
		if n >= len(lot.ids) {
			n = len(lot.ids) / 2 // FitLot and Send disagree: halves
		}
		g.pushFront(&batchLot{ids: lot.ids[:n], start: lot.start, tooBig: len(lot.ids) - n + lot.tooBig},
			&batchLot{ids: lot.ids[n:]})
		return nil
	case errors.Is(err, ErrNotSendable), errors.Is(err, ErrLotAlreadySent):
		return b.raced(ctx, g, lot)
	case err != nil:
		b.report(lot.ids, DocResult{Result: batchFailed, Message: err.Error(), Err: err})
		return storeFailure(err)
	}

	if out.Status == OutcomeBlocked {
		bl := out.Blocked()
		b.cfg.emit(Event{Kind: EventRefused, IDs: lot.ids, LotSend: &out, Blocked: bl, Wait: bl.Wait, Until: bl.Until})
		if b.cfg.Wait && at.Add(bl.Wait).Sub(lot.start) <= b.cfg.MaxWait {
			g.readyAt, g.refusal = bl.Until, bl
			g.pushFront(lot)
			return nil
		}
		msg := fmt.Sprintf("blocked: %s on %s, retry in %s", bl.Reason, bl.Key, bl.Wait)
		if b.cfg.Wait {
			msg += fmt.Sprintf(" (beyond the longest wait %s)", b.cfg.MaxWait)
		}
		// The next lot is tried at once: refused, it is reported with its own wait.
		b.report(lot.ids, DocResult{Result: BatchBlocked, Message: msg, LotSend: &out, Blocked: bl, Wait: bl.Wait})
		return nil
	}

	g.readyAt, g.refusal = time.Time{}, nil
	b.cfg.emit(Event{Kind: EventLotSent, IDs: lot.ids, LotSend: &out, TooBig: lot.tooBig})
	switch {
	case out.Status == OutcomeSent:
		b.report(lot.ids, DocResult{Result: BatchSent, Code: out.Code, LotNumber: out.LotNumber, Message: out.Message,
			LotSend: &out, Wait: at.Sub(lot.start)})
	case out.Status == OutcomeNotQueued && out.Code == CodeLotNotQueued && b.cfg.Wait:
		b.notQueued(g, lot, out)
	case out.Status == OutcomeNotQueued:
		b.report(lot.ids, DocResult{Result: batchFailed, Code: out.Code, Message: "SIFEN did not queue the lot: " + out.Message, LotSend: &out})
	default: // OutcomeFailed, OutcomeUnknown
		b.report(lot.ids, DocResult{Result: batchFailed, Code: out.Code, Message: out.Message, LotSend: &out})
	}
	return nil
}

// notQueued requeues a lot SIFEN answered 0301 at the front of its RUC, in
// two halves; a document drawing its second 0301 fails.
func (b *batch) notQueued(g *batchGate, lot *batchLot, out LotSend) {
	var again []int64
	for _, id := range lot.ids {
		d := b.docs[id]
		d.notQueued++
		d.code = out.Code
		if d.notQueued >= maxNotQueued {
			b.report([]int64{id}, DocResult{Result: batchFailed, Code: out.Code,
				Message: "SIFEN did not queue the lot, for the second time in this run: " + out.Message, LotSend: &out})
			continue
		}
		again = append(again, id)
	}
	for _, ids := range slices.Backward(halves(again)) {
		g.pushFront(&batchLot{ids: ids, start: lot.start})
	}
}

// halves splits ids in two lots, or leaves one id alone.
func halves(ids []int64) [][]int64 {
	switch len(ids) {
	case 0:
		return nil
	case 1:
		return [][]int64{ids}
	}
	return [][]int64{ids[:len(ids)/2], ids[len(ids)/2:]}
}

// raced rereads a lot whose claim another send won and watches what it holds.
func (b *batch) raced(ctx context.Context, g *batchGate, lot *batchLot) error {
	held, err := b.reread(ctx, g, lot.ids, lot.start, true)
	if err != nil || len(held) == 0 {
		return err
	}
	now := b.now()
	if len(g.watch) == 0 {
		g.watchSince = now
	}
	g.watch = append(g.watch, held...)
	if !b.cfg.Wait {
		return b.recheck(ctx, g)
	}
	g.watchAt = now.Add(batchWatchEvery)
	return nil
}

// recheck rereads g's watched documents; those still held are watched on, or
// blocked once watched MaxWait (at once without Wait).
func (b *batch) recheck(ctx context.Context, g *batchGate) error {
	now := b.now()
	watch := g.watch
	g.watch = nil
	held, err := b.reread(ctx, g, watch, g.watchSince, false)
	if err != nil || len(held) == 0 {
		return err
	}
	if !b.cfg.Wait || now.Add(batchWatchEvery).Sub(g.watchSince) > b.cfg.MaxWait {
		b.report(held, DocResult{Result: BatchBlocked, Wait: now.Sub(g.watchSince),
			Message: "being sent by another process, without an answer yet; a run after it answers (or after Resolve) sends it if it is still unsent"})
		return nil
	}
	g.watch, g.watchAt = held, now.Add(batchWatchEvery)
	return nil
}

// reread reads ids again: a sendable document is queued again (after a lost
// race at most maxRaces times), one another send holds is returned to watch
// while that send may be on the wire (claimed less than DefaultInFlightFor
// ago; else blocked), one it took is BatchSentElsewhere. A store failure
// stops it.
func (b *batch) reread(ctx context.Context, g *batchGate, ids []int64, start time.Time, raced bool) (held []int64, err error) {
	var again []int64
	for _, id := range ids {
		d, err := b.s.Get(ctx, id)
		if err != nil {
			b.report([]int64{id}, DocResult{Result: batchFailed, Message: err.Error(), Err: err})
			if storeFailure(err) != nil {
				return nil, err
			}
			continue
		}
		switch bd := b.docs[id]; {
		case d.Status.Sendable() && raced && bd.races >= maxRaces:
			b.report([]int64{id}, DocResult{Result: batchFailed, Document: &d,
				Message: fmt.Sprintf("document %d changed under %d sends in a row (imported again elsewhere?): not sent", id, maxRaces)})
		case d.Status.Sendable():
			if raced {
				bd.races++
			}
			again = append(again, id)
		case d.Status == StatusSending && b.now().Sub(d.ClaimedAt) >= DefaultInFlightFor:
			// No request of it can be on the wire: only Resolve settles it.
			b.report([]int64{id}, DocResult{Result: BatchBlocked, Document: &d, Message: leftSending(d.ClaimedAt)})
		case d.Status == StatusSending:
			held = append(held, id)
		default:
			msg := fmt.Sprintf("sent by another process: document %d is %s", d.ID, d.Status)
			if d.LotNumber != "" {
				msg += " (lot " + d.LotNumber + ")"
			}
			b.report([]int64{id}, DocResult{Result: BatchSentElsewhere, Code: d.ResponseCode, LotNumber: d.LotNumber, Message: msg, Document: &d})
		}
	}
	if len(again) > 0 {
		g.pushFront(&batchLot{ids: again, start: start})
	}
	return held, nil
}

// storeFailure returns err when it is a store failure, nil otherwise.
func storeFailure(err error) error {
	if errors.Is(err, throttle.ErrStoreUnavailable) {
		return err
	}
	return nil
}
