package sifen

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Defaults of SenderConfig.
const (
	// DefaultResolveAfter: the claim age at which Resolve settles documents,
	// past any live send and SIFEN's usual processing (DNIT: query after 10 min).
	DefaultResolveAfter = 15 * time.Minute
	// DefaultNotFoundAfter: the claim age from which a 0420 makes the document
	// sendable again; before it a lot may still be processing (DNIT: 1 to 24 h,
	// queryable 48 h; docs/decisions/0012-sifen-resolution.md).
	DefaultNotFoundAfter = 48 * time.Hour
	// DefaultRemoteBlock is the local block after a first 0301; each 0301
	// within DefaultBlockMemory of the previous blocks one step longer, up to
	// DefaultRemoteBlockMax (SIFEN blocks 10 to 60 minutes by recurrence).
	DefaultRemoteBlock    = 10 * time.Minute
	DefaultRemoteBlockMax = 60 * time.Minute
	DefaultBlockMemory    = 24 * time.Hour
	// DefaultInFlightFor is how long a lot without answer holds its RUC: its
	// request ended at the latest defaultTimeout after it left.
	DefaultInFlightFor = 2 * defaultTimeout
)

// SenderConfig configures a Sender. The zero value is usable.
type SenderConfig struct {
	// Clock must be the store's and the limiter's (default throttle.SystemClock).
	Clock throttle.Clock
	// ResolveAfter, NotFoundAfter, RemoteBlock, RemoteBlockMax, BlockMemory and
	// InFlightFor default to the Default constants of their names.
	ResolveAfter, NotFoundAfter                           time.Duration
	RemoteBlock, RemoteBlockMax, BlockMemory, InFlightFor time.Duration
	// ConsultaInterval is the time from a lot's send to its first result query
	// and between queries (a schedule, not a limit; DefaultConsultaInterval).
	ConsultaInterval time.Duration
	// AllowUnsigned lets unsigned DEs into the test environment, never prod.
	AllowUnsigned bool
	// Resolver is the limiter's resolver of SIFEN's policy (NewResolver).
	// Required: NewSender agrees its interval with the database through it.
	Resolver *Resolver
	// Logger receives the Sender's logs; nil logs nowhere.
	Logger *slog.Logger
}

// Sender is the one path by which documents reach SIFEN, for the web app
// and the batch command alike, across processes on one database. Safe for
// concurrent use.
//
// # The send protocol
//
// Nothing is sent twice, even when a process dies mid-send, and SIFEN never
// sees two lots of a RUC closer than the interval: each send takes these
// steps, each a short transaction, none held across an HTTP call
// (docs/decisions/0005, 0011, 0050, 0135):
//
//  1. Check (no write): the documents exist, are in draft or error, share
//     one environment, their XML still parses, the lot rules hold.
//  2. The RUC's gate: one take on its SIFEN_RECEPCION_LOTE bucket, refused
//     during the interval from the previous answer, while another lot of
//     the RUC is on the wire, during the block after a 0301, and past the
//     optional per-minute cap (OutcomeBlocked). Admitted, the take holds the
//     RUC (InFlightFor at most) until step 5.
//  3. Claim: the lot is registered and each document moves to "sending"
//     with a fresh token, conditional on its version (else ErrNotSendable).
//  4. Send, with the caller's cancellation detached.
//  5. Record the answer or failure on the gate (the next lot waits the
//     interval from now; a 0301 blocks), then on the documents: 0300 →
//     "sent"; another answer or no connection → "error"; no answer →
//     "sending", which Resolve settles, as after a crash.
type Sender struct {
	docs    DocumentStore
	client  SOAPServices
	limiter *throttle.Limiter
	clock   throttle.Clock
	cfg     SenderConfig
	logger  *slog.Logger
	notes   []string // what NewSender said of the interval
}

// NewSender returns a Sender keeping documents in docs (sifensql.New),
// sending with client (a *Client), and throttling with limiter, whose
// resolver of SIFEN's policy is cfg.Resolver.
//
// It agrees the interval between lots of a RUC with the database
// (docs/decisions/0135): per environment the stricter of its own and the
// stored one applies, and is stored. A difference is logged and kept for
// IntervalNotes; a database that cannot answer is logged, and Poll agrees
// again.
func NewSender(docs DocumentStore, client SOAPServices, limiter *throttle.Limiter, cfg SenderConfig) (*Sender, error) {
	if docs == nil || client == nil || limiter == nil {
		return nil, errors.New("sifen: NewSender needs a store, a client and a limiter")
	}
	if cfg.Resolver == nil {
		return nil, fmt.Errorf("sifen: NewSender needs SenderConfig.Resolver, the limiter's resolver of %s (NewResolver): %w", PolicyRecepcionLote, throttle.ErrUnknownPolicy)
	}
	if cfg.Clock == nil {
		cfg.Clock = throttle.SystemClock
	}
	orDefault(&cfg.ResolveAfter, DefaultResolveAfter)
	orDefault(&cfg.NotFoundAfter, DefaultNotFoundAfter)
	orDefault(&cfg.RemoteBlock, DefaultRemoteBlock)
	if cfg.RemoteBlockMax < cfg.RemoteBlock {
		cfg.RemoteBlockMax = max(DefaultRemoteBlockMax, cfg.RemoteBlock)
	}
	orDefault(&cfg.BlockMemory, DefaultBlockMemory)
	orDefault(&cfg.InFlightFor, DefaultInFlightFor)
	orDefault(&cfg.ConsultaInterval, DefaultConsultaInterval)
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	s := &Sender{docs: docs, client: client, limiter: limiter, clock: cfg.Clock, cfg: cfg,
		logger: logger.With(slog.String("component", "sifen"))}
	notes, err := s.shareInterval(context.Background())
	if err != nil {
		s.logger.Warn("the SIFEN interval could not be agreed with the database: this process waits its own until a Poll pass can", slog.Any("error", err))
	}
	s.notes = notes
	return s, nil
}

// IntervalNotes are the differences NewSender found between this process's
// interval and the database's, one line per environment (also logged).
func (s *Sender) IntervalNotes() []string { return s.notes }

// shareInterval agrees each environment's interval with the database (see
// NewSender) and logs each difference; Poll calls it again to learn of a
// stricter process started later.
func (s *Sender) shareInterval(ctx context.Context) ([]string, error) {
	var notes []string
	for _, env := range []Env{EnvTest, EnvProd} {
		own := s.cfg.Resolver.cfg.intervalFor(env)
		stored, err := s.docs.ShareInterval(ctx, env, own, s.clock())
		if err != nil {
			return notes, err
		}
		shared := &s.cfg.Resolver.shared[envIndex(env)]
		switch {
		case own > stored && stored > 0:
			notes = append(notes, fmt.Sprintf("SIFEN %s: this process's interval %s is stricter than the database's %s: every process now waits %s between lots of a RUC", env, own, stored, own))
		case stored > own && time.Duration(shared.Swap(int64(stored))) != stored:
			notes = append(notes, fmt.Sprintf("SIFEN %s: this process is configured for %s between lots of a RUC, but the database's interval is %s (set by another process): %s applies", env, own, stored, stored))
		}
	}
	for _, n := range notes {
		s.logger.Warn(n)
	}
	return notes, nil
}

// Import stores the DEs of data (one rDE or an rLoteDE) as draft documents
// of env, all or none, and returns them in input order. A CDC already stored
// in env is imported again when CheckReimport allows it; otherwise the import
// fails with a *CDCError naming the document that holds it.
//
// Errors: ErrInvalidEnv, ParseLote's, ErrUnfit, ErrLotTooBig, *CDCError
// (ErrCDCInFlight), throttle.ErrStoreUnavailable.
func (s *Sender) Import(ctx context.Context, data []byte, env Env) ([]Document, error) {
	return s.importDEs(ctx, data, env, false)
}

// ImportReplacing is Import that also replaces the content of a draft or
// error document holding one of the CDCs.
func (s *Sender) ImportReplacing(ctx context.Context, data []byte, env Env) ([]Document, error) {
	return s.importDEs(ctx, data, env, true)
}

func (s *Sender) importDEs(ctx context.Context, data []byte, env Env, replace bool) ([]Document, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	lot, err := parseLoteContext(ctx, data)
	if err != nil {
		return nil, err
	}
	for i, de := range lot.DEs {
		// A DE too big even for a lot of its own would, as its RUC's oldest
		// draft, hold back every lot after it (ErrLotTooBig).
		_, tooBig := Lote{DEs: []DE{de}}.pack()
		if err := cmp.Or(checkFit(env, de, s.cfg.AllowUnsigned), tooBig); err != nil {
			return nil, fmt.Errorf("DE %d (%s): %w", i+1, de.CDC, err)
		}
	}
	ids, err := s.docs.Import(ctx, env, lot.DEs, replace, s.clock())
	if err != nil {
		return nil, err
	}
	return s.docs.Documents(ctx, ids, true)
}

// Get returns one document with its XML. Errors: ErrNotFound,
// throttle.ErrStoreUnavailable.
func (s *Sender) Get(ctx context.Context, id int64) (Document, error) {
	docs, err := s.docs.Documents(ctx, []int64{id}, true)
	if err != nil {
		return Document{}, err
	}
	return docs[0], nil
}

// FitLot returns how many of the documents ids, from the first, fit in one
// lot message (0 when the first alone does not). Errors: ErrNotFound,
// throttle.ErrStoreUnavailable, ErrLotTooBig.
func (s *Sender) FitLot(ctx context.Context, ids []int64) (int, error) {
	stored, err := s.docs.Documents(ctx, ids, true) // in id order
	if err != nil {
		return 0, err
	}
	des := make([]DE, len(ids))
	for i, id := range ids {
		if des[i], err = storedDE(stored[slices.IndexFunc(stored, func(d Document) bool { return d.ID == id })]); err != nil {
			return 0, err
		}
	}
	// Bisect on the prefix length: is the prefix of i+1 DEs too big?
	var zipErr error
	n := sort.Search(len(des), func(i int) bool {
		_, err := Lote{DEs: des[:i+1]}.pack()
		if err != nil && !errors.Is(err, ErrLotTooBig) {
			zipErr = err
		}
		return err != nil
	})
	return n, zipErr
}

// List returns documents matching f, newest first, without their XML.
func (s *Sender) List(ctx context.Context, f Filter) ([]Document, error) {
	if f.Env != "" {
		if err := f.Env.Validate(); err != nil {
			return nil, err
		}
	}
	return s.docs.List(ctx, f)
}

// CountByStatus counts the documents by status, of env or of both when "".
func (s *Sender) CountByStatus(ctx context.Context, env Env) (map[Status]int64, error) {
	if env != "" {
		if err := env.Validate(); err != nil {
			return nil, err
		}
	}
	return s.docs.CountByStatus(ctx, env)
}

// Send sends the documents ids as one lot, following Sender's protocol. A
// refusal by the RUC's gate, an answer from SIFEN and a failed connection are
// LotSends, not errors.
//
// Errors (nothing taken or sent unless said): ErrNotFound, ErrNotSendable,
// ErrLotMixedEnv, the lot rules' errors, ErrLotAlreadySent, ParseLote's for
// a stored XML; throttle.ErrStoreUnavailable (from the gate: the documents
// go to "error"; after the send: they stay "sending" for Resolve).
func (s *Sender) Send(ctx context.Context, ids ...int64) (LotSend, error) {
	c, err := s.claim(ctx, ids)
	if err != nil || c.out.Status == OutcomeBlocked {
		return c.out, err
	}
	return s.sendLot(c)
}

// sendLot is steps 4 and 5 of the protocol for a claimed lot.
func (s *Sender) sendLot(c claimed) (LotSend, error) {
	resp, sendErr := s.client.RecepcionLote(c.bg, c.out.Env, c.packed.Zip)
	var unusable string
	if sendErr == nil && resp.Code == codeLotQueued && validateLotNumber(resp.LotNumber) != nil {
		unusable = fmt.Sprintf("SIFEN answered 0300 without a valid lot number (%q): Resolve will ask SIFEN before any resend", resp.LotNumber)
	}
	return s.record(c, sendErr, unusable, func(out *LotSend, log *slog.Logger) Settle {
		out.Code, out.Message, out.ProcessedAt = resp.Code, resp.Message, parseTime(resp.ProcessedAt)
		if resp.Code == codeLotQueued {
			out.Status, out.LotNumber = OutcomeSent, resp.LotNumber
			log.Info("lot queued", slog.String("lot", resp.LotNumber))
			s.answered(c, "lot:"+resp.LotNumber, false)
			// DNIT: a lot's first query ConsultaInterval after its send (a schedule).
			return Settle{Status: StatusSent, Message: resp.Code + " " + resp.Message, ResponseCode: resp.Code, LotNumber: resp.LotNumber,
				Sent: true, NextQueryAt: s.clock().Add(s.cfg.ConsultaInterval)}
		}
		out.Status = OutcomeNotQueued
		log.Warn("lot not queued", slog.String("code", resp.Code), slog.String("message", resp.Message))
		a := s.answered(c, resp.Code+":"+c.packed.Hash[:16], resp.Code == CodeLotNotQueued)
		if resp.Code == CodeLotNotQueued {
			s.limiter.RemoteRefused("sifen", c.key.Policy, resp.Code) // balde_remote_refusals_total: the mirror drifted
			// SIFEN may have blocked the RUC: wait, longer after each 0301 in a row.
			block := a.BlockedFor
			if block == 0 { // the gate could not be written: its hold stands
				block = s.cfg.InFlightFor
			}
			out.Message += fmt.Sprintf(" (RUC blocked locally for %s: 0301 number %d in a row)", block, a.BlockLevel)
		}
		return Settle{Status: StatusError, Message: "SIFEN did not queue the lot: " + resp.Code + " " + resp.Message, ResponseCode: resp.Code}
	})
}

// claimed is a send past step 3 of the protocol (or refused at step 2).
type claimed struct {
	out      LotSend
	lot      Lote
	packed   packedLot
	key      throttle.Key
	token    string
	held     time.Time     // the take's hold, which the answer ends
	interval time.Duration // the take's policy's: the next lot waits it from the answer
	bg       context.Context
}

// claim runs steps 1 to 3 of the protocol: check, the RUC's gate, claim.
func (s *Sender) claim(ctx context.Context, ids []int64) (claimed, error) {
	ids, err := checkIDs(ids)
	if err != nil {
		return claimed{}, err
	}
	rows, err := s.docs.Documents(ctx, ids, true)
	if err != nil {
		return claimed{}, err
	}
	// 1. Check: one environment, sendable, the XML still valid, the lot rules.
	env := rows[0].Env
	var lot Lote
	for _, r := range rows {
		if r.Env != env {
			return claimed{}, fmt.Errorf("%w: document %d is in %s, document %d in %s", ErrLotMixedEnv, rows[0].ID, env, r.ID, r.Env)
		}
		if !r.Status.Sendable() {
			return claimed{}, fmt.Errorf("%w: document %d is %s", ErrNotSendable, r.ID, r.Status)
		}
		de, err := storedDE(r)
		if err != nil {
			return claimed{}, err
		}
		if err := checkFit(env, de, s.cfg.AllowUnsigned); err != nil {
			return claimed{}, fmt.Errorf("document %d: %w", r.ID, err)
		}
		lot.DEs = append(lot.DEs, de)
	}
	packed, err := lot.Pack()
	if err != nil {
		return claimed{}, err
	}
	return s.admit(ctx, claimed{lot: lot, packed: packed}, env, ids, func(c *claimed, now time.Time) ([]int64, error) {
		return ids, s.docs.Claim(ctx, Claim{Docs: rows, Token: c.token, Lot: c.packed, Env: env, RUC: c.out.RUC, Now: now})
	})
}

// admit runs steps 2 and 3 of the protocol for c's checked lot of env: one
// take on the RUC's bucket, holding the RUC while the lot is on the wire
// (refused, c.out is OutcomeBlocked with the Decision), then claim, which
// claims the documents, stored (ids) or not yet (nil), and returns their
// ids. Stored documents also get the gate's failure or refusal.
func (s *Sender) admit(ctx context.Context, c claimed, env Env, ids []int64, claim func(c *claimed, now time.Time) ([]int64, error)) (claimed, error) {
	ruc := c.lot.DEs[0].RUC
	c.out = LotSend{DocumentIDs: ids, Env: env, RUC: ruc, LotHash: c.packed.Hash}
	c.key = RecepcionKey(env, ruc)
	d, err := s.limiter.Take(ctx, ledgerRef(ids, c.packed.Hash), throttle.Charge{Key: c.key, Cost: 1, HoldFor: s.cfg.InFlightFor})
	now := s.clock()
	switch {
	case err != nil && ids == nil:
		return claimed{}, fmt.Errorf("sifen: send lot %.16s: %w", c.packed.Hash, err)
	case err != nil:
		if ferr := s.docs.Fail(ctx, ids, "not sent: throttle unavailable: "+err.Error(), now); ferr != nil {
			s.logger.Error("recording a throttle failure on the documents", slog.Any("ids", ids), slog.Any("error", ferr))
		}
		return claimed{}, fmt.Errorf("sifen: send %v: %w", ids, err)
	case !d.Allowed:
		c.out.Status, c.out.Decision, c.out.DecidedAt = OutcomeBlocked, &d, now
		c.out.Message = fmt.Sprintf("blocked: %s, wait %d s", d.Reason, c.out.Blocked().WaitSeconds())
		if ids == nil {
			return c, nil
		}
		s.logger.Info("lot held back", slog.String("key", d.Key.String()),
			slog.String("reason", d.Reason.String()), slog.Duration("wait", d.RetryAfter))
		return c, s.docs.Hold(ctx, ids, c.out.Message, c.out.Blocked().Until, now)
	}
	// The interval runs from the answer; the take's policy says how long.
	c.held, c.interval = d.Buckets[0].HeldUntil, d.Buckets[0].Policy.MinInterval
	// From here on the hold must be ended whatever the caller does with ctx.
	c.bg = context.WithoutCancel(ctx)

	// 3. Claim the documents.
	c.token = rand.Text()
	if c.out.DocumentIDs, err = claim(&c, now); err != nil {
		// Nothing left: the hold ends now (the take's own interval stays).
		c.interval = 0
		s.answered(c, RefClaimFailed+c.packed.Hash[:16], false)
		return claimed{}, err
	}
	return c, nil
}

// RefClaimFailed begins the ledger ref of the answer a Sender records on a
// RUC's gate when a lot's documents could not be claimed: the lot never
// left, so the hold ends with no interval from that answer (the take's own
// interval still runs). What-if reads it to replay such a lot alike.
const RefClaimFailed = "claim failed:"

// answered records on the RUC's bucket that c's request ended now: the hold
// ends and the next lot waits c.interval; after a 0301 (notQueued) the RUC is
// also blocked, one RemoteBlock step longer per 0301 in a row, and it returns
// the block. A failure is logged: the hold then lasts until it expires.
func (s *Sender) answered(c claimed, ref string, notQueued bool) throttle.Adjusted {
	t := throttle.SyncTarget{Key: c.key, Tokens: throttle.MaxTokens, Cooldown: c.interval, Hold: c.held, Ref: ref}
	if notQueued {
		t.BlockFor, t.Escalate, t.BlockMax, t.Memory = s.cfg.RemoteBlock, true, s.cfg.RemoteBlockMax, s.cfg.BlockMemory
	}
	out, err := s.limiter.Sync(c.bg, t)
	if err != nil {
		s.logger.Error("recording an answer on the RUC's gate", slog.String("key", c.key.String()), slog.Any("error", err))
		return throttle.Adjusted{}
	}
	return out[0]
}

// record is step 5 of the protocol: first on the RUC's gate, then on the
// documents. A request that never left (notSent) leaves them "error"; no
// answer, or an unusable one (unusable says why), leaves them "sending" for
// Resolve; otherwise answer reads SIFEN's answer into out, records it on the
// gate and returns the documents' settle.
func (s *Sender) record(c claimed, sendErr error, unusable string, answer func(out *LotSend, log *slog.Logger) Settle) (LotSend, error) {
	ctx, out := c.bg, c.out
	ids, hash := out.DocumentIDs, out.LotHash
	log := s.logger.With(slog.Any("ids", ids), slog.String("env", string(out.Env)), slog.String("ruc", out.RUC.String()))
	var st Settle
	switch {
	case sendErr != nil && notSent(sendErr):
		out.Status, out.Message = OutcomeFailed, "not sent: "+sendErr.Error()
		st = Settle{Status: StatusError, Message: out.Message}
		log.Warn("not sent", slog.Any("error", sendErr))
		s.answered(c, "failed:"+hash[:16], false)
	case sendErr != nil || unusable != "":
		out.Status, out.Message = OutcomeUnknown, unusable
		if sendErr != nil {
			out.Message = fmt.Sprintf("no answer from SIFEN (%v): Resolve will ask SIFEN before any resend", sendErr)
		}
		log.Error("sent without a usable answer", slog.String("message", out.Message))
		// The interval runs from now; the documents stay in sending for Resolve.
		s.answered(c, "unknown:"+hash[:16], false)
		return out, s.docs.Note(ctx, ids, c.token, out.Message, s.clock())
	default:
		st = answer(&out, log)
	}
	n, err := s.docs.Release(ctx, Release{IDs: ids, Token: c.token, Env: out.Env, Hash: hash, St: st, Now: s.clock()})
	if err != nil {
		log.Error("recording the answer of a send failed: the documents stay in sending until Resolve", slog.Any("error", err))
		return out, err
	}
	if int(n) != len(ids) {
		log.Warn("some documents were settled by Resolve before their send recorded its answer", slog.Int64("recorded", n))
	}
	return out, nil
}

// checkFit refuses (ErrUnfit) a DE that may not go to env: unsigned (unless
// allowUnsigned and env is test), or a test DE meant for prod.
func checkFit(env Env, de DE, allowUnsigned bool) error {
	switch {
	case !de.Signed && (env == EnvProd || !allowUnsigned):
		return fmt.Errorf("%w: the DE is not signed (no ds:Signature in rDE): SIFEN rejects it", ErrUnfit)
	case de.TestIssuer && env == EnvProd:
		return fmt.Errorf("%w: the DE says it was made for the test environment (dNomEmi %q) and cannot go to prod", ErrUnfit, testIssuerName)
	}
	return nil
}

// storedDE parses a stored document again and checks it matches its row.
func storedDE(r Document) (DE, error) {
	lot, err := ParseLote([]byte(r.XML))
	if err != nil {
		return DE{}, fmt.Errorf("document %d: %w", r.ID, err)
	}
	if len(lot.DEs) != 1 {
		return DE{}, fmt.Errorf("%w: document %d holds %d DEs", ErrMalformedXML, r.ID, len(lot.DEs))
	}
	de := lot.DEs[0]
	if de.CDC != r.CDC || de.RUC != r.RUC || de.Type != r.Type {
		return DE{}, fmt.Errorf("%w: document %d: its XML does not match its row", ErrMalformedXML, r.ID)
	}
	return de, nil
}

// checkIDs sorts ids and refuses an empty, too long or repeating list.
func checkIDs(ids []int64) ([]int64, error) {
	switch {
	case len(ids) == 0:
		return nil, ErrLotEmpty
	case len(ids) > maxLotDEs:
		return nil, fmt.Errorf("%w: %d documents", ErrLotTooManyDEs, len(ids))
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, fmt.Errorf("%w: document %d listed twice", ErrLotDuplicateCDC, sorted[i])
		}
	}
	return sorted, nil
}

// ledgerRef is a send's ledger reference: the document id, or the lot's hash.
func ledgerRef(ids []int64, hash string) string {
	if len(ids) == 1 {
		return "doc:" + strconv.FormatInt(ids[0], 10)
	}
	return "lot:" + hash[:16]
}

// RUCWait says whether a lot of ruc in env would be admitted now, without
// taking anything: the Decision a Send now would get from the RUC's gate,
// admitted, or refused with the reason of the longest wait (a block wins a
// tie, then the cooldown).
func (s *Sender) RUCWait(ctx context.Context, env Env, ruc RUC) (throttle.Decision, error) {
	bs, err := s.limiter.State(ctx, RecepcionKey(env, ruc))
	if err != nil || bs.RetryAfter <= 0 {
		return throttle.Decision{Allowed: err == nil, Key: bs.Key}, err
	}
	reason := throttle.ReasonEmpty
	switch {
	case bs.BlockLeft >= bs.RetryAfter:
		reason = throttle.ReasonBlocked
	case bs.CooldownLeft >= bs.RetryAfter:
		reason = throttle.ReasonCooldown
	}
	return throttle.Decision{Key: bs.Key, Reason: reason, RetryAfter: bs.RetryAfter}, nil
}
