package sifen

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/balde-throttle/balde/throttle"
)

// Status is where a document stands.
type Status string

const (
	// StatusDraft: imported, never sent, or known not to be at SIFEN.
	StatusDraft Status = "draft"
	// StatusSending: claimed by one send, which has not recorded SIFEN's
	// answer yet (or crashed: see Sender.Resolve).
	StatusSending Status = "sending"
	// StatusSent: in a lot SIFEN queued (0300); no final result yet.
	StatusSent Status = "sent"
	// StatusApproved and StatusRejected are SIFEN's final results.
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
	// StatusError: the last send did not reach SIFEN, or SIFEN did not queue
	// the lot (0301), or the throttle refused it; Message says which. The
	// document may be sent again.
	StatusError Status = "error"
)

// Sendable reports whether a document in status s may be claimed by a send.
func (s Status) Sendable() bool { return s == StatusDraft || s == StatusError }

// Final reports whether s is SIFEN's final result.
func (s Status) Final() bool { return s == StatusApproved || s == StatusRejected }

// Document is a DE kept in the database with its sending state.
type Document struct {
	ID   int64
	Env  Env
	RUC  RUC
	CDC  string
	Type int
	// XML is the rDE element. List leaves it empty; Get fills it.
	XML     []byte
	Status  Status
	Message string
	// LotHash is the identity of the lot of the last send (Packed.Hash).
	LotHash string
	// LotNumber is SIFEN's number of that lot (dProtConsLote), once queued.
	LotNumber string
	// ResponseCode is the last code SIFEN gave about this document.
	ResponseCode string
	// RetryAt is, after a throttle refusal, the earliest instant a send
	// would be admitted.
	RetryAt time.Time
	// Version is bumped by every change.
	Version                                 int64
	CreatedAt, UpdatedAt, ClaimedAt, SentAt time.Time
}

// Filter selects documents for List. Empty fields match everything.
type Filter struct {
	Env       Env
	RUC       string // the number, without check digit
	Statuses  []Status
	LotNumber string
	// BeforeID is the keyset cursor: documents with a smaller id (List
	// returns the newest first). 0 starts from the newest.
	BeforeID int64
	// Limit bounds the documents returned: default 100, at most 1000.
	Limit int
}

// docRow is a documents row.
type docRow struct {
	ID           int64          `db:"id"`
	Env          string         `db:"env"`
	RUC          string         `db:"ruc"`
	DV           int            `db:"dv"`
	CDC          string         `db:"cdc"`
	Type         int            `db:"de_type"`
	XML          string         `db:"xml"`
	Status       string         `db:"status"`
	Message      string         `db:"message"`
	Version      int64          `db:"version"`
	Claim        sql.NullString `db:"claim"`
	LotHash      sql.NullString `db:"lot_hash"`
	LotNumber    sql.NullString `db:"lot_number"`
	ResponseCode sql.NullString `db:"response_code"`
	RetryAt      sql.NullInt64  `db:"retry_at"`
	CreatedAt    int64          `db:"created_at"`
	UpdatedAt    int64          `db:"updated_at"`
	ClaimedAt    sql.NullInt64  `db:"claimed_at"`
	SentAt       sql.NullInt64  `db:"sent_at"`
}

const docColumns = `id, env, ruc, dv, cdc, de_type, xml, status, message, version, claim,
	lot_hash, lot_number, response_code, retry_at, created_at, updated_at, claimed_at, sent_at`

// listColumns are docColumns without the XML.
const listColumns = `id, env, ruc, dv, cdc, de_type, '' AS xml, status, message, version, claim,
	lot_hash, lot_number, response_code, retry_at, created_at, updated_at, claimed_at, sent_at`

func (r docRow) document() Document {
	d := Document{
		ID:           r.ID,
		Env:          Env(r.Env),
		RUC:          RUC{Number: r.RUC, DV: r.DV},
		CDC:          r.CDC,
		Type:         r.Type,
		Status:       Status(r.Status),
		Message:      r.Message,
		LotHash:      r.LotHash.String,
		LotNumber:    r.LotNumber.String,
		ResponseCode: r.ResponseCode.String,
		RetryAt:      fromNullNanos(r.RetryAt),
		Version:      r.Version,
		CreatedAt:    fromNanos(r.CreatedAt),
		UpdatedAt:    fromNanos(r.UpdatedAt),
		ClaimedAt:    fromNullNanos(r.ClaimedAt),
		SentAt:       fromNullNanos(r.SentAt),
	}
	if r.XML != "" {
		d.XML = []byte(r.XML)
	}
	return d
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func nullNanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNanos(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func fromNullNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// docStore is the SQL of the documents and document_lots tables. Every
// exported Sender method that writes runs one short transaction through
// these helpers; none is ever open across an HTTP call.
type docStore struct {
	write *sqlx.DB // on SQLite: the store's single write connection (BEGIN IMMEDIATE)
	read  *sqlx.DB
}

// dbError wraps a database failure as the throttle engine does: a context
// error stays itself, anything else is throttle.ErrStoreUnavailable.
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sifen: %s: %w", op, err)
	}
	return fmt.Errorf("sifen: %s: %w: %w", op, throttle.ErrStoreUnavailable, err)
}

// inTx runs fn in one write transaction.
func (s *docStore) inTx(ctx context.Context, op string, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.write.BeginTxx(ctx, nil)
	if err != nil {
		return dbError(op, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		var se storeErr
		if errors.As(err, &se) {
			return dbError(op, se.err)
		}
		return err
	}
	return dbError(op, tx.Commit())
}

// storeErr marks a database failure inside inTx (as opposed to a rule).
type storeErr struct{ err error }

func (e storeErr) Error() string { return e.err.Error() }

func wrapDB(err error) error {
	if err == nil {
		return nil
	}
	return storeErr{err}
}

// get returns the documents with ids, in id order; ErrNotFound names a
// missing one.
func (s *docStore) get(ctx context.Context, db sqlx.QueryerContext, ids []int64, withXML bool) ([]docRow, error) {
	cols := listColumns
	if withXML {
		cols = docColumns
	}
	q, args, err := sqlx.In(`SELECT `+cols+` FROM balde_documents WHERE id IN (?) ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("sifen: get documents: %w", err)
	}
	var rows []docRow
	if err := sqlx.SelectContext(ctx, db, &rows, s.read.Rebind(q), args...); err != nil {
		return nil, dbError("get documents", err)
	}
	if len(rows) != len(ids) {
		found := make(map[int64]bool, len(rows))
		for _, r := range rows {
			found[r.ID] = true
		}
		for _, id := range ids {
			if !found[id] {
				return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
			}
		}
	}
	return rows, nil
}

// list runs a Filter.
func (s *docStore) list(ctx context.Context, f Filter) ([]Document, error) {
	where, args := []string{"1 = 1"}, []any{}
	if f.Env != "" {
		where, args = append(where, "env = ?"), append(args, string(f.Env))
	}
	if f.RUC != "" {
		where, args = append(where, "ruc = ?"), append(args, f.RUC)
	}
	if len(f.Statuses) > 0 {
		marks := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			marks[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, "status IN ("+strings.Join(marks, ", ")+")")
	}
	if f.LotNumber != "" {
		where, args = append(where, "lot_number = ?"), append(args, f.LotNumber)
	}
	if f.BeforeID > 0 {
		where, args = append(where, "id < ?"), append(args, f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	q := `SELECT ` + listColumns + ` FROM balde_documents WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	var rows []docRow
	if err := s.read.SelectContext(ctx, &rows, s.read.Rebind(q), args...); err != nil {
		return nil, dbError("list documents", err)
	}
	out := make([]Document, len(rows))
	for i, r := range rows {
		out[i] = r.document()
	}
	return out, nil
}

// countByStatus counts the documents of each status (of env, if given).
func (s *docStore) countByStatus(ctx context.Context, env Env) (map[Status]int64, error) {
	q, args := `SELECT status, COUNT(*) FROM balde_documents GROUP BY status`, []any{}
	if env != "" {
		q, args = `SELECT status, COUNT(*) FROM balde_documents WHERE env = ? GROUP BY status`, []any{string(env)}
	}
	rows, err := s.read.QueryContext(ctx, s.read.Rebind(q), args...)
	if err != nil {
		return nil, dbError("count documents", err)
	}
	defer rows.Close()
	out := make(map[Status]int64)
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, dbError("count documents", err)
		}
		out[Status(st)] = n
	}
	return out, dbError("count documents", rows.Err())
}

// importDE inserts de, or turns an existing document with its CDC back
// into a draft of the new XML when that document may be sent again: it is
// in draft or error, or SIFEN rejected it and de is a corrected version.
func (s *docStore) importDE(ctx context.Context, tx *sqlx.Tx, env Env, de DE, now time.Time) (int64, error) {
	var existing []docRow
	err := tx.SelectContext(ctx, &existing, tx.Rebind(`SELECT `+docColumns+` FROM balde_documents WHERE env = ? AND cdc = ?`), string(env), de.CDC)
	if err != nil {
		return 0, wrapDB(err)
	}
	if len(existing) == 1 {
		ex := existing[0]
		st := Status(ex.Status)
		corrected := st == StatusRejected && ex.XML != string(de.XML)
		if !st.Sendable() && !corrected {
			ex.XML = ""
			return 0, &CDCError{CDC: de.CDC, Document: ex.document()}
		}
		_, err := tx.ExecContext(ctx, tx.Rebind(`
			UPDATE balde_documents SET
				ruc = ?, dv = ?, de_type = ?, xml = ?,
				status = 'draft', message = ?, version = version + 1,
				claim = NULL, lot_hash = NULL, lot_number = NULL, response_code = NULL, retry_at = NULL,
				updated_at = ?, claimed_at = NULL, sent_at = NULL
			WHERE id = ?`),
			de.RUC.Number, de.RUC.DV, de.Type, string(de.XML),
			"imported again (was "+ex.Status+")", nanos(now), ex.ID)
		return ex.ID, wrapDB(err)
	}
	// RETURNING rows are drained (rows.Next to the end): an unfinished
	// statement would stop SQLite's WAL checkpoints.
	rows, err := tx.QueryContext(ctx, tx.Rebind(`
		INSERT INTO balde_documents (env, ruc, dv, cdc, de_type, xml, status, message, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, 'draft', '', ?, ?)
		RETURNING id`),
		string(env), de.RUC.Number, de.RUC.DV, de.CDC, de.Type, string(de.XML), nanos(now), nanos(now))
	if err != nil {
		return 0, wrapDB(err)
	}
	defer rows.Close()
	var id int64
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return 0, wrapDB(err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, wrapDB(err)
	}
	return id, wrapDB(rows.Close())
}

// claim moves docs to 'sending' under claim, each only if it is still in
// draft or error at the version read, and registers the lot. Any document
// claimed or changed meanwhile, or a lot already registered, aborts the
// whole claim.
func (s *docStore) claim(ctx context.Context, rows []docRow, claim string, p Packed, ruc RUC, now time.Time) error {
	env := rows[0].Env
	return s.inTx(ctx, "claim documents", func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, tx.Rebind(`
			INSERT INTO balde_document_lots (env, hash, ruc, status, created_at)
			VALUES (?, ?, ?, 'sending', ?)
			ON CONFLICT (env, hash) DO NOTHING`),
			env, p.Hash, ruc.Number, nanos(now))
		if err != nil {
			return wrapDB(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return wrapDB(err)
		} else if n == 0 {
			return fmt.Errorf("%w: lot %.16s of %s in %s", ErrLotAlreadySent, p.Hash, ruc, env)
		}
		for _, r := range rows {
			res, err := tx.ExecContext(ctx, tx.Rebind(`
				UPDATE balde_documents SET
					status = 'sending', claim = ?, claimed_at = ?, lot_hash = ?,
					message = '', retry_at = NULL, version = version + 1, updated_at = ?
				WHERE id = ? AND version = ? AND status IN ('draft', 'error')`),
				claim, nanos(now), p.Hash, nanos(now), r.ID, r.Version)
			if err != nil {
				return wrapDB(err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return wrapDB(err)
			} else if n != 1 {
				return fmt.Errorf("%w: document %d changed or was claimed by another send", ErrNotSendable, r.ID)
			}
		}
		return nil
	})
}

// settle is what a send, or Resolve, learned about documents it holds.
type settle struct {
	status       Status
	message      string
	responseCode string
	lotNumber    string
	retryAt      time.Time
	sent         bool // set sent_at
}

// release writes the outcome of a send to the documents it claimed (only
// those still held by claim), and updates the lot: dropped when SIFEN does
// not have it, queued with its number when it does.
func (s *docStore) release(ctx context.Context, ids []int64, claim string, env Env, hash string, st settle, now time.Time) (int64, error) {
	var n int64
	var sentAt sql.NullInt64
	if st.sent {
		sentAt = nullNanos(now)
	}
	err := s.inTx(ctx, "record send", func(tx *sqlx.Tx) error {
		q, args, err := sqlx.In(`
			UPDATE balde_documents SET
				status = ?, message = ?, response_code = ?, lot_number = ?, retry_at = ?,
				sent_at = COALESCE(?, sent_at),
				claim = NULL, version = version + 1, updated_at = ?
			WHERE id IN (?) AND status = 'sending' AND claim = ?`,
			string(st.status), st.message, nullString(st.responseCode), nullString(st.lotNumber), nullNanos(st.retryAt),
			sentAt, nanos(now), ids, claim)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, tx.Rebind(q), args...)
		if err != nil {
			return wrapDB(err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return wrapDB(err)
		}
		return wrapDB(s.updateLot(ctx, tx, env, hash, st))
	})
	return n, err
}

// updateLot records what is known of a lot after a send or a resolve.
func (s *docStore) updateLot(ctx context.Context, tx *sqlx.Tx, env Env, hash string, st settle) error {
	switch {
	case st.status == StatusSent || st.status.Final():
		_, err := tx.ExecContext(ctx, tx.Rebind(`
			UPDATE balde_document_lots SET status = 'queued', lot_number = COALESCE(?, lot_number)
			WHERE env = ? AND hash = ?`), nullString(st.lotNumber), string(env), hash)
		return err
	case st.status == StatusSending:
		return nil
	default:
		// SIFEN does not have the lot, unless one of its documents says
		// otherwise (Resolve settles them one by one).
		_, err := tx.ExecContext(ctx, tx.Rebind(`
			DELETE FROM balde_document_lots
			WHERE env = ? AND hash = ? AND NOT EXISTS (
				SELECT 1 FROM balde_documents
				WHERE balde_documents.env = balde_document_lots.env AND balde_documents.lot_hash = balde_document_lots.hash
				AND balde_documents.status IN ('sending', 'sent', 'approved', 'rejected'))`),
			string(env), hash)
		return err
	}
}

// note updates the message of documents still held by claim, leaving them
// in 'sending'.
func (s *docStore) note(ctx context.Context, ids []int64, claim, message string, now time.Time) error {
	return s.inTx(ctx, "record send", func(tx *sqlx.Tx) error {
		q, args, err := sqlx.In(`UPDATE balde_documents SET message = ?, updated_at = ?, version = version + 1
			WHERE id IN (?) AND status = 'sending' AND claim = ?`, message, nanos(now), ids, claim)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, tx.Rebind(q), args...)
		return wrapDB(err)
	})
}

// stale returns the documents left in 'sending' with a claim made at or
// before cutoff.
func (s *docStore) stale(ctx context.Context, cutoff time.Time) ([]docRow, error) {
	var rows []docRow
	err := s.read.SelectContext(ctx, &rows, s.read.Rebind(`SELECT `+listColumns+` FROM balde_documents
		WHERE status = 'sending' AND claimed_at <= ? ORDER BY id`), nanos(cutoff))
	return rows, dbError("find documents left sending", err)
}

// sentLots returns the (env, lot number) of lots with documents still 'sent'.
func (s *docStore) sentLots(ctx context.Context) ([]lotRef, error) {
	var rows []lotRef
	err := s.read.SelectContext(ctx, &rows, `SELECT DISTINCT env, lot_number FROM balde_documents
		WHERE status = 'sent' AND lot_number IS NOT NULL ORDER BY lot_number`)
	return rows, dbError("find sent lots", err)
}

type lotRef struct {
	Env       Env    `db:"env"`
	LotNumber string `db:"lot_number"`
}

// lotDocs returns the documents of a lot that are still 'sent'.
func (s *docStore) lotDocs(ctx context.Context, env Env, lotNumber string) ([]docRow, error) {
	var rows []docRow
	err := s.read.SelectContext(ctx, &rows, s.read.Rebind(`SELECT `+listColumns+` FROM balde_documents
		WHERE env = ? AND lot_number = ? AND status = 'sent' ORDER BY id`), string(env), lotNumber)
	return rows, dbError("find documents of lot", err)
}

// finish sets the final (or resendable) status of one 'sent' document of a
// lot, conditional on its version.
func (s *docStore) finish(ctx context.Context, r docRow, st settle, now time.Time) (bool, error) {
	var n int64
	err := s.inTx(ctx, "record lot result", func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, tx.Rebind(`
			UPDATE balde_documents SET status = ?, message = ?, response_code = ?,
				version = version + 1, updated_at = ?
			WHERE id = ? AND version = ? AND status = 'sent'`),
			string(st.status), st.message, nullString(st.responseCode), nanos(now), r.ID, r.Version)
		if err != nil {
			return wrapDB(err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return wrapDB(err)
		}
		if n == 1 && r.LotHash.Valid {
			return wrapDB(s.updateLot(ctx, tx, Env(r.Env), r.LotHash.String, st))
		}
		return nil
	})
	return n == 1, err
}

// GroupLots splits documents into lots SIFEN accepts by count and kind:
// one environment, one RUC and one DE type per lot, at most MaxLotDEs
// each, in id order within a lot, lots ordered by their first document.
// Documents that are not sendable are left out. A lot of very large DEs may
// still exceed MaxLotZipBytes (Send says ErrLotTooBig); send it in halves.
func GroupLots(docs []Document) [][]int64 {
	type kind struct {
		env Env
		ruc string
		typ int
	}
	sorted := slices.Clone(docs)
	slices.SortFunc(sorted, func(a, b Document) int { return cmp.Compare(a.ID, b.ID) })
	var lots [][]int64
	open := make(map[kind]int) // the index in lots of each kind's lot being filled
	for _, d := range sorted {
		if !d.Status.Sendable() {
			continue
		}
		k := kind{d.Env, d.RUC.Number, d.Type}
		i, ok := open[k]
		if !ok || len(lots[i]) == MaxLotDEs {
			lots = append(lots, nil)
			i = len(lots) - 1
			open[k] = i
		}
		lots[i] = append(lots[i], d.ID)
	}
	return lots
}
