package sifen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Defaults of SenderConfig.
const (
	// DefaultResolveAfter is how old a claim must be before Resolve settles
	// its documents: longer than any live send (DefaultTimeout) and than
	// SIFEN's usual processing of a lot (DNIT advises querying after 10 min).
	DefaultResolveAfter = 15 * time.Minute
	// DefaultRemoteBlock is how long a RUC is blocked locally after SIFEN
	// answers 0301 (SIFEN blocks for 10 to 60 minutes).
	DefaultRemoteBlock = 10 * time.Minute
)

// SenderConfig configures a Sender. The zero value is usable.
type SenderConfig struct {
	// Clock must be the clock of the store and of the limiter. Default
	// throttle.SystemClock.
	Clock throttle.Clock
	// ResolveAfter: see DefaultResolveAfter.
	ResolveAfter time.Duration
	// RemoteBlock: see DefaultRemoteBlock.
	RemoteBlock time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Sender is the one path by which documents reach SIFEN: the web app's send
// button and the batch command both call Send, from different processes, on
// the same database. Safe for concurrent use.
//
// # The send protocol
//
// Nothing is sent twice, even when a process dies mid-send, because every
// send goes through these steps, each one short transaction (none is held
// across an HTTP call):
//
//  1. Check (no write): the documents exist, are all in draft or error,
//     share one environment; their XML is parsed again and the lot rules are
//     applied (1-50 DEs, one type, one RUC, ZIP at most 1000 KB). Bad input
//     is an error here and nothing changes.
//  2. Claim: in one transaction, register the lot (env, hash) in
//     document_lots — refused if it is there already: a lot is never sent
//     twice — and move every document from draft/error to "sending" with a
//     fresh claim token, each UPDATE conditional on the version read in
//     step 1. If any document was claimed or changed meanwhile, by this
//     process or another, the whole claim rolls back (ErrNotSendable).
//     A CDC is unique per environment, and a document in sending or sent
//     cannot be claimed, so no CDC is sent again while an earlier send of
//     it has no final result.
//  3. Take one token from SIFEN_RECEPCION_LOTE for (env, RUC) — the
//     cooldown every process shares through the database. A refusal
//     releases the claim: documents to "error" with "blocked: REASON, wait
//     N s" and RetryAt, the lot unregistered, and OutcomeBlocked returned.
//  4. Send siRecepLoteDE, with the caller's cancellation detached: once the
//     request may have left, its answer is recorded.
//  5. Record, conditional on the claim token: 0300 → "sent" with the lot
//     number (and the lot's first query is blocked for ConsultaInterval);
//     any other answer → "error" (after 0301 the RUC is also blocked
//     locally for RemoteBlock); no connection → "error"; no answer →
//     the documents stay "sending".
//
// A process that dies between 2 and 5 leaves documents in "sending", which
// no send can claim. Resolve, run at start-up (and from time to time), asks
// SIFEN about each of them by CDC (siConsDE) once its claim is older than
// ResolveAfter: found → approved, not found → draft, sendable again. See
// docs/decisions/0005-sifen-send-protocol.md.
type Sender struct {
	docs    docStore
	client  *Client
	limiter *throttle.Limiter
	clock   throttle.Clock
	cfg     SenderConfig
	logger  *slog.Logger
}

// NewSender returns a Sender keeping documents in store's database (the
// documents table of migration 0003), sending with client, and throttling
// with limiter, whose resolver must know SIFEN's policies (NewResolver).
func NewSender(store *sqlstore.Store, client *Client, limiter *throttle.Limiter, cfg SenderConfig) (*Sender, error) {
	if store == nil || client == nil || limiter == nil {
		return nil, errors.New("sifen: NewSender needs a store, a client and a limiter")
	}
	probe := RecepcionKey(EnvTest, RUC{Number: "88888801", DV: 5})
	if _, err := limiter.Policy(probe); err != nil {
		return nil, fmt.Errorf("sifen: the limiter does not resolve %s (use sifen.NewResolver): %w", PolicyRecepcionLote, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = throttle.SystemClock
	}
	if cfg.ResolveAfter <= 0 {
		cfg.ResolveAfter = DefaultResolveAfter
	}
	if cfg.RemoteBlock <= 0 {
		cfg.RemoteBlock = DefaultRemoteBlock
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Sender{
		docs:    docStore{write: store.DB(), read: store.ReadDB()},
		client:  client,
		limiter: limiter,
		clock:   cfg.Clock,
		cfg:     cfg,
		logger:  logger.With(slog.String("component", "sifen")),
	}, nil
}

// Import stores the DEs of data (one rDE or an rLoteDE) as draft documents
// of env and returns them in input order. All or nothing: a DE with a
// missing RUC, a wrong check digit or a bad CDC refuses the whole input.
// A CDC already stored in env is imported again (the document becomes a
// draft of the new XML) when it is in draft or error, or rejected and the
// XML differs (a corrected DE keeps its CDC); otherwise — being sent, sent,
// approved, or rejected with the same XML — the import fails with a
// *CDCError naming the document that holds the CDC.
//
// Errors: ErrInvalidEnv, the errors of ParseLote, *CDCError
// (ErrCDCInFlight), throttle.ErrStoreUnavailable.
func (s *Sender) Import(ctx context.Context, data []byte, env Env) ([]Document, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	lot, err := ParseLoteContext(ctx, data)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	ids := make([]int64, len(lot.DEs))
	err = s.docs.inTx(ctx, "import documents", func(tx *sqlx.Tx) error {
		for i, de := range lot.DEs {
			if ids[i], err = s.docs.importDE(ctx, tx, env, de, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rows, err := s.docs.get(ctx, s.docs.read, ids, true)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]Document, len(rows))
	for _, r := range rows {
		byID[r.ID] = r.document()
	}
	out := make([]Document, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, nil
}

// Get returns one document with its XML. Errors: ErrNotFound,
// throttle.ErrStoreUnavailable.
func (s *Sender) Get(ctx context.Context, id int64) (Document, error) {
	rows, err := s.docs.get(ctx, s.docs.read, []int64{id}, true)
	if err != nil {
		return Document{}, err
	}
	return rows[0].document(), nil
}

// List returns documents matching f, newest first, without their XML.
func (s *Sender) List(ctx context.Context, f Filter) ([]Document, error) {
	if f.Env != "" {
		if err := f.Env.Validate(); err != nil {
			return nil, err
		}
	}
	return s.docs.list(ctx, f)
}

// CountByStatus counts the documents by status, of env or of both
// environments when env is "".
func (s *Sender) CountByStatus(ctx context.Context, env Env) (map[Status]int64, error) {
	if env != "" {
		if err := env.Validate(); err != nil {
			return nil, err
		}
	}
	return s.docs.countByStatus(ctx, env)
}

// Send sends the documents ids as one lot, following the protocol in
// Sender's doc comment, and returns how it ended. A throttle refusal, an
// answer from SIFEN and a failed connection are Outcomes, not errors.
//
// Errors (nothing was taken from the throttle and nothing sent, unless
// said): ErrNotFound; ErrNotSendable (a document not in draft or error, or
// claimed by another send first); ErrLotMixedEnv and the lot rules
// (ErrLotEmpty, ErrLotTooManyDEs, ErrLotDuplicateCDC, ErrLotMixedTypes,
// ErrLotMixedRUC, ErrLotTooBig); ErrLotAlreadySent; a stored XML that no
// longer parses (the errors of ParseLote); throttle.ErrStoreUnavailable
// (when it comes from the throttle, the documents are released to "error";
// when it comes after the send, they stay "sending" for Resolve).
func (s *Sender) Send(ctx context.Context, ids ...int64) (Outcome, error) {
	ids, err := checkIDs(ids)
	if err != nil {
		return Outcome{}, err
	}
	rows, err := s.docs.get(ctx, s.docs.read, ids, true)
	if err != nil {
		return Outcome{}, err
	}

	// 1. Check: one environment, sendable, the XML still valid, the lot rules.
	env := Env(rows[0].Env)
	var lot Lote
	for _, r := range rows {
		if Env(r.Env) != env {
			return Outcome{}, fmt.Errorf("%w: document %d is in %s, document %d in %s", ErrLotMixedEnv, rows[0].ID, env, r.ID, r.Env)
		}
		if st := Status(r.Status); !st.Sendable() {
			return Outcome{}, fmt.Errorf("%w: document %d is %s", ErrNotSendable, r.ID, st)
		}
		de, err := storedDE(r)
		if err != nil {
			return Outcome{}, err
		}
		lot.DEs = append(lot.DEs, de)
	}
	packed, err := lot.Pack()
	if err != nil {
		return Outcome{}, err
	}
	ruc := lot.DEs[0].RUC
	out := Outcome{DocumentIDs: ids, Env: env, RUC: ruc, LotHash: packed.Hash}

	// 2. Claim.
	claim := newClaim()
	if err := s.docs.claim(ctx, rows, claim, packed, ruc, s.clock()); err != nil {
		return Outcome{}, err
	}
	// From here on the claim must be released or recorded whatever the
	// caller does with ctx.
	bg := context.WithoutCancel(ctx)

	// 3. Throttle.
	key := RecepcionKey(env, ruc)
	d, err := s.limiter.Take(ctx, ledgerRef(ids, packed.Hash), throttle.Charge{Key: key, Cost: 1})
	if err != nil {
		msg := "not sent: throttle unavailable: " + err.Error()
		if _, rerr := s.docs.release(bg, ids, claim, env, packed.Hash, settle{status: StatusError, message: msg}, s.clock()); rerr != nil {
			s.logger.Error("releasing documents after a throttle failure", slog.Any("ids", ids), slog.Any("error", rerr))
		}
		return Outcome{}, fmt.Errorf("sifen: send %v: %w", ids, err)
	}
	if !d.Allowed {
		now := s.clock()
		out.Status, out.Blocked = OutcomeBlocked, newBlocked(d, now)
		out.Message = out.Blocked.Message()
		st := settle{status: StatusError, message: out.Message, retryAt: out.Blocked.Until}
		if _, err := s.docs.release(bg, ids, claim, env, packed.Hash, st, now); err != nil {
			return out, err
		}
		s.logger.Info("lot refused by the throttle", slog.String("key", key.String()),
			slog.String("reason", d.Reason.String()), slog.Duration("wait", d.RetryAfter))
		return out, nil
	}

	// 4. Send.
	resp, sendErr := s.client.RecepcionLote(bg, env, packed.Zip)

	// 5. Record.
	return s.record(bg, out, claim, resp, sendErr)
}

// record writes the answer of a send (step 5 of the protocol).
func (s *Sender) record(ctx context.Context, out Outcome, claim string, resp EnvioLoteResponse, sendErr error) (Outcome, error) {
	now := s.clock()
	ids, env, hash := out.DocumentIDs, out.Env, out.LotHash
	log := s.logger.With(slog.Any("ids", ids), slog.String("env", string(env)), slog.String("ruc", out.RUC.String()))
	var st settle
	switch {
	case sendErr != nil && NotSent(sendErr):
		out.Status, out.Message = OutcomeFailed, "not sent: "+sendErr.Error()
		st = settle{status: StatusError, message: out.Message}
		log.Warn("lot not sent", slog.Any("error", sendErr))
	case sendErr != nil || (resp.Code == CodeLotQueued && ValidateLotNumber(resp.LotNumber) != nil):
		out.Status = OutcomeUnknown
		if sendErr != nil {
			out.Message = fmt.Sprintf("no answer from SIFEN (%v): Resolve will ask SIFEN before any resend", sendErr)
		} else {
			out.Message = fmt.Sprintf("SIFEN answered 0300 without a valid lot number (%q): Resolve will ask SIFEN before any resend", resp.LotNumber)
		}
		log.Error("lot sent without a usable answer", slog.String("message", out.Message))
		return out, s.docs.note(ctx, ids, claim, out.Message, now)
	case resp.Code == CodeLotQueued:
		out.Status = OutcomeSent
		out.Code, out.Message, out.LotNumber = resp.Code, resp.Message, resp.LotNumber
		out.ProcessedAt = parseTime(resp.ProcessedAt)
		st = settle{status: StatusSent, message: resp.Code + " " + resp.Message, responseCode: resp.Code, lotNumber: resp.LotNumber, sent: true}
		log.Info("lot queued", slog.String("lot", resp.LotNumber))
	default:
		out.Status = OutcomeNotQueued
		out.Code, out.Message = resp.Code, resp.Message
		out.ProcessedAt = parseTime(resp.ProcessedAt)
		st = settle{status: StatusError, message: "SIFEN did not queue the lot: " + resp.Code + " " + resp.Message, responseCode: resp.Code}
		log.Warn("lot not queued", slog.String("code", resp.Code), slog.String("message", resp.Message))
	}
	n, err := s.docs.release(ctx, ids, claim, env, hash, st, now)
	if err != nil {
		log.Error("recording the answer of a send failed: the documents stay in sending until Resolve", slog.Any("error", err))
		return out, err
	}
	if int(n) != len(ids) {
		log.Warn("some documents were settled by Resolve before their send recorded its answer", slog.Int64("recorded", n))
	}

	// What the answer means for the throttle.
	switch {
	case out.Status == OutcomeSent:
		// DNIT: the first query of a lot no earlier than 10 minutes after it was sent.
		s.sync(ctx, ConsultaKey(env, out.LotNumber), s.consultaDelay(env, out.LotNumber), "lot:"+out.LotNumber)
	case out.Code == CodeLotNotQueued:
		// SIFEN may have blocked the RUC: do not knock again for a while.
		s.sync(ctx, RecepcionKey(env, out.RUC), s.cfg.RemoteBlock, "0301:"+hash[:16])
	}
	return out, nil
}

// consultaDelay is the lot's query interval, from the limiter's policy.
func (s *Sender) consultaDelay(env Env, lotNumber string) time.Duration {
	p, err := s.limiter.Policy(ConsultaKey(env, lotNumber))
	if err != nil || p.MinInterval <= 0 {
		return DefaultConsultaInterval
	}
	return p.MinInterval
}

// sync blocks key for d without touching its tokens; a failure is logged
// (the send itself is recorded already).
func (s *Sender) sync(ctx context.Context, key throttle.Key, d time.Duration, ref string) {
	_, err := s.limiter.Sync(ctx, throttle.SyncTarget{Key: key, Tokens: throttle.MaxTokens, BlockFor: d, Ref: ref})
	if err != nil {
		s.logger.Error("blocking a throttle key", slog.String("key", key.String()), slog.Any("error", err))
	}
}

// storedDE parses a stored document again and checks it is what the row
// says.
func storedDE(r docRow) (DE, error) {
	lot, err := ParseLote([]byte(r.XML))
	if err != nil {
		return DE{}, fmt.Errorf("document %d: %w", r.ID, err)
	}
	if len(lot.DEs) != 1 {
		return DE{}, fmt.Errorf("%w: document %d holds %d DEs", ErrMalformedXML, r.ID, len(lot.DEs))
	}
	de := lot.DEs[0]
	if de.CDC != r.CDC || de.RUC != (RUC{Number: r.RUC, DV: r.DV}) || de.Type != r.Type {
		return DE{}, fmt.Errorf("%w: document %d: its XML does not match its row", ErrMalformedXML, r.ID)
	}
	return de, nil
}

// checkIDs sorts ids and refuses an empty, too long or repeating list.
func checkIDs(ids []int64) ([]int64, error) {
	switch {
	case len(ids) == 0:
		return nil, ErrLotEmpty
	case len(ids) > MaxLotDEs:
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

// ledgerRef is the throttle ledger's reference of a send: the document id,
// or the lot's hash for several.
func ledgerRef(ids []int64, hash string) string {
	if len(ids) == 1 {
		return "doc:" + strconv.FormatInt(ids[0], 10)
	}
	return "lot:" + hash[:16]
}

func newClaim() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
