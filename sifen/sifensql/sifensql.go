// Package sifensql keeps SIFEN's documents and lots in balde's SQL
// database (SQLite or PostgreSQL, the tables of migrations 0003, 0005 and
// 0006): the sifen.DocumentStore that sifen.Sender uses. It is the
// adapter; the domain package sifen imports no database driver.
package sifensql

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

	"github.com/balde-throttle/balde/internal/sqlkit"
	"github.com/balde-throttle/balde/internal/sqltime"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// store is the SQL sifen.DocumentStore, safe for concurrent use. Reads and
// transactions run again after a transient failure (the throttle store's
// Retry), never a COMMIT in doubt (docs/decisions/0020).
type store struct {
	db *sqlstore.Store // on SQLite, its DB() is a single write connection (BEGIN IMMEDIATE)
}

var _ sifen.DocumentStore = (*store)(nil)

// New returns the documents store of s's database (migrated to 0006 or
// later). It shares s's connections and retries as s does (s.Retry).
func New(s *sqlstore.Store) sifen.DocumentStore {
	return &store{db: s}
}

// docRow is a balde_documents row.
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
	Result       sql.NullString `db:"result"`
	AuthNumber   sql.NullString `db:"auth_number"`
	RetryAt      sql.NullInt64  `db:"retry_at"`
	CreatedAt    int64          `db:"created_at"`
	UpdatedAt    int64          `db:"updated_at"`
	ClaimedAt    sql.NullInt64  `db:"claimed_at"`
	SentAt       sql.NullInt64  `db:"sent_at"`
}

const docColumns = `id, env, ruc, dv, cdc, de_type, xml, status, message, version, claim,
	lot_hash, lot_number, response_code, result, auth_number, retry_at, created_at, updated_at, claimed_at, sent_at`

// listColumns are docColumns without the XML.
var listColumns = strings.Replace(docColumns, " xml,", " '' AS xml,", 1)

func (r docRow) document() sifen.Document {
	d := sifen.Document{
		ID:           r.ID,
		Env:          sifen.Env(r.Env),
		RUC:          sifen.RUC{Number: r.RUC, DV: r.DV},
		CDC:          r.CDC,
		Type:         r.Type,
		Status:       sifen.Status(r.Status),
		Message:      r.Message,
		Claim:        r.Claim.String,
		LotHash:      r.LotHash.String,
		LotNumber:    r.LotNumber.String,
		ResponseCode: r.ResponseCode.String,
		Result:       r.Result.String,
		AuthNumber:   r.AuthNumber.String,
		RetryAt:      sqltime.NullTime(r.RetryAt),
		Version:      r.Version,
		CreatedAt:    sqltime.Time(r.CreatedAt),
		UpdatedAt:    sqltime.Time(r.UpdatedAt),
		ClaimedAt:    sqltime.NullTime(r.ClaimedAt),
		SentAt:       sqltime.NullTime(r.SentAt),
	}
	if r.XML != "" {
		d.XML = []byte(r.XML)
	}
	return d
}

// selectAll runs the read q (its IN lists expanded, rebound), again after
// transient failures; op names it in the error.
func selectAll[T any](ctx context.Context, s *store, op, q string, args ...any) ([]T, error) {
	q, args, err := sqlx.In(q, args...)
	if err != nil {
		return nil, fmt.Errorf("sifen: %s: %w", op, err)
	}
	var rows []T // SelectContext empties it before each try
	err = s.db.Retry(ctx, op, func() error {
		return s.db.ReadDB().SelectContext(ctx, &rows, s.db.ReadDB().Rebind(q), args...)
	})
	return rows, sqlkit.StoreError("sifen", op, err)
}

// selectDocs runs the read q (rebound) and returns its documents.
func (s *store) selectDocs(ctx context.Context, op, q string, args ...any) ([]sifen.Document, error) {
	rows, err := selectAll[docRow](ctx, s, op, q, args...)
	docs := make([]sifen.Document, len(rows))
	for i, r := range rows {
		docs[i] = r.document()
	}
	return docs, err
}

// exec runs q (its IN lists expanded, rebound) on tx and returns the rows it
// affected.
func exec(ctx context.Context, tx *sqlx.Tx, q string, args ...any) (int64, error) {
	q, args, err := sqlx.In(q, args...)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, tx.Rebind(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// inTx runs fn in one write transaction, all again after a transient failure
// before the COMMIT (fn must do nothing but its statements on tx). A rule's
// error (one fn returns as a rule) is returned as is, and a commit in doubt (sqlstore.ErrCommitInDoubt) is never retried. It returns
// what fn returned in the transaction committed.
func inTx[T any](ctx context.Context, s *store, op string, fn func(tx *sqlx.Tx) (T, error)) (T, error) {
	var out, zero T
	var ruleErr error
	err := s.db.Retry(ctx, op, func() error {
		ruleErr = nil
		tx, err := s.db.DB().BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if out, err = fn(tx); err != nil {
			r := rule{}
			if !errors.As(err, &r) {
				return err
			}
			ruleErr = r.error
			return nil // rolled back by the defer; not a store failure
		}
		return s.db.CommitError(tx.Commit())
	})
	if err = cmp.Or(ruleErr, sqlkit.StoreError("sifen", op, err)); err != nil {
		return zero, err
	}
	return out, nil
}

// rule marks an error of inTx's fn that is a rule's, not a database failure.
type rule struct{ error }

// Documents implements sifen.DocumentStore.
func (s *store) Documents(ctx context.Context, ids []int64, withXML bool) ([]sifen.Document, error) {
	cols := listColumns
	if withXML {
		cols = docColumns
	}
	docs, err := s.selectDocs(ctx, "get documents", `SELECT `+cols+` FROM balde_documents WHERE id IN (?) ORDER BY id`, ids)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.ContainsFunc(docs, func(d sifen.Document) bool { return d.ID == id }) {
			return nil, fmt.Errorf("%w: %d", sifen.ErrNotFound, id)
		}
	}
	return docs, nil
}

// List implements sifen.DocumentStore.
func (s *store) List(ctx context.Context, f sifen.Filter) ([]sifen.Document, error) {
	var c sqlkit.Conds
	c.And(f.Env != "", "env = ?", string(f.Env))
	c.And(f.RUC != "", "ruc = ?", f.RUC)
	c.And(len(f.Statuses) > 0, "status IN (?)", f.Statuses)
	c.And(f.LotNumber != "", "lot_number = ?", f.LotNumber)
	c.And(len(f.CDCs) > 0, "cdc IN (?)", f.CDCs)
	c.And(f.BeforeID > 0, "id < ?", f.BeforeID)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return s.selectDocs(ctx, "list documents", `SELECT `+listColumns+` FROM balde_documents `+c.Where()+` ORDER BY id DESC LIMIT ?`,
		append(c.Args, min(limit, 1000))...)
}

// CountByStatus implements sifen.DocumentStore.
func (s *store) CountByStatus(ctx context.Context, env sifen.Env) (map[sifen.Status]int64, error) {
	rows, err := selectAll[struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
	}](ctx, s, "count documents", `SELECT status, COUNT(*) AS n FROM balde_documents WHERE env = ? OR ? = '' GROUP BY status`, string(env), string(env))
	if err != nil {
		return nil, err
	}
	out := make(map[sifen.Status]int64, len(rows))
	for _, r := range rows {
		out[sifen.Status(r.Status)] = r.N
	}
	return out, nil
}

// Import implements sifen.DocumentStore.
func (s *store) Import(ctx context.Context, env sifen.Env, des []sifen.DE, replace bool, now time.Time) ([]int64, error) {
	return inTx(ctx, s, "import documents", func(tx *sqlx.Tx) ([]int64, error) {
		ids := make([]int64, len(des))
		for i, de := range des {
			var err error
			if ids[i], err = s.importDE(ctx, tx, env, de, replace, now); err != nil {
				return nil, err
			}
		}
		return ids, nil
	})
}

// importDE inserts de, or turns the document holding its CDC back into a
// draft when sifen.CheckReimport allows it. A CDC another import committed
// meanwhile is read again like any stored CDC (docs/decisions/0057). On
// PostgreSQL the row read stays locked until the transaction ends, so a
// claim committed meanwhile is seen, never overwritten.
func (s *store) importDE(ctx context.Context, tx *sqlx.Tx, env sifen.Env, de sifen.DE, replace bool, now time.Time) (int64, error) {
	q := `SELECT ` + docColumns + ` FROM balde_documents WHERE env = ? AND cdc = ?`
	if tx.DriverName() == "pgx" {
		q += ` FOR UPDATE`
	}
	for range 2 {
		var existing []docRow
		if err := tx.SelectContext(ctx, &existing, tx.Rebind(q), string(env), de.CDC); err != nil {
			return 0, err
		}
		if len(existing) > 0 {
			return reimportDocument(ctx, tx, existing[0].document(), de, replace, now)
		}
		id, inserted, err := insertDocument(ctx, tx, env, de, now)
		if err != nil || inserted {
			return id, err
		}
	}
	// Inserted by another transaction, then gone before this one read it.
	return 0, fmt.Errorf("CDC %s of %s changed under the import twice", de.CDC, env)
}

// reimportDocument turns ex, the document holding de's CDC, into a draft of
// de when sifen.CheckReimport allows it, else returns its *sifen.CDCError.
func reimportDocument(ctx context.Context, tx *sqlx.Tx, ex sifen.Document, de sifen.DE, replace bool, now time.Time) (int64, error) {
	if err := sifen.CheckReimport(ex, de, replace, now); err != nil {
		return 0, rule{err}
	}
	note := "imported again (was " + string(ex.Status) + ")"
	if ex.Status.Sendable() && string(ex.XML) != string(de.XML) {
		note = "content replaced by an import (was " + string(ex.Status) + ")"
	}
	_, err := exec(ctx, tx, `
		UPDATE balde_documents SET
			ruc = ?, dv = ?, de_type = ?, xml = ?,
			status = 'draft', message = ?, version = version + 1,
			claim = NULL, lot_hash = NULL, lot_number = NULL, response_code = NULL, retry_at = NULL,
			result = NULL, auth_number = NULL,
			updated_at = ?, claimed_at = NULL, sent_at = NULL
		WHERE id = ?`,
		de.RUC.Number, de.RUC.DV, de.Type, string(de.XML),
		note, sqltime.Nanos(now), ex.ID)
	return ex.ID, err
}

// insertDocument inserts de as a new draft of env; inserted is false when
// another transaction committed its CDC first, and nothing was written.
func insertDocument(ctx context.Context, tx *sqlx.Tx, env sifen.Env, de sifen.DE, now time.Time) (id int64, inserted bool, err error) {
	err = tx.GetContext(ctx, &id, tx.Rebind(`
		INSERT INTO balde_documents (env, ruc, dv, cdc, de_type, xml, status, message, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, 'draft', '', ?, ?)
		ON CONFLICT (env, cdc) DO NOTHING
		RETURNING id`),
		string(env), de.RUC.Number, de.RUC.DV, de.CDC, de.Type, string(de.XML), sqltime.Nanos(now), sqltime.Nanos(now))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// Claim implements sifen.DocumentStore: one transaction registers the lot
// (a lot is never sent twice) and moves every document to sending, each
// conditional on the version read; any change meanwhile aborts it all.
func (s *store) Claim(ctx context.Context, c sifen.Claim) error {
	_, err := inTx(ctx, s, "claim documents", func(tx *sqlx.Tx) (int, error) {
		n, err := exec(ctx, tx, `
			INSERT INTO balde_document_lots (env, hash, ruc, status, created_at)
			VALUES (?, ?, ?, 'sending', ?)
			ON CONFLICT (env, hash) DO NOTHING`,
			string(c.Env), c.Lot.Hash, c.RUC.Number, sqltime.Nanos(c.Now))
		if err != nil {
			return 0, err
		} else if n == 0 {
			return 0, rule{fmt.Errorf("%w: lot %.16s of %s in %s", sifen.ErrLotAlreadySent, c.Lot.Hash, c.RUC, c.Env)}
		}
		for _, d := range c.Docs {
			n, err := exec(ctx, tx, `
				UPDATE balde_documents SET
					status = 'sending', claim = ?, claimed_at = ?, lot_hash = ?,
					message = '', retry_at = NULL, version = version + 1, updated_at = ?
				WHERE id = ? AND version = ? AND status IN ('draft', 'error')`,
				c.Token, sqltime.Nanos(c.Now), c.Lot.Hash, sqltime.Nanos(c.Now), d.ID, d.Version)
			if err != nil {
				return 0, err
			} else if n != 1 {
				return 0, rule{fmt.Errorf("%w: document %d changed or was claimed by another send", sifen.ErrNotSendable, d.ID)}
			}
		}
		return len(c.Docs), nil
	})
	return err
}

// Release implements sifen.DocumentStore: the settle goes to the documents
// still held by r.Token, and the lot is updated (updateLot).
func (s *store) Release(ctx context.Context, r sifen.Release) (int64, error) {
	var sentAt sql.NullInt64
	if r.St.Sent {
		sentAt = sqltime.NullNanos(r.Now)
	}
	return inTx(ctx, s, "record send", func(tx *sqlx.Tx) (int64, error) {
		n, err := exec(ctx, tx, `
			UPDATE balde_documents SET
				status = ?, message = ?, response_code = ?, lot_number = ?, retry_at = ?,
				result = ?, auth_number = ?,
				sent_at = COALESCE(?, sent_at),
				claim = NULL, version = version + 1, updated_at = ?
			WHERE id IN (?) AND status = 'sending' AND claim = ?`,
			string(r.St.Status), r.St.Message, nullString(r.St.ResponseCode), nullString(r.St.LotNumber), sqltime.NullNanos(r.St.RetryAt),
			nullString(r.St.Result), nullString(r.St.AuthNumber),
			sentAt, sqltime.Nanos(r.Now), r.IDs, r.Token)
		if err != nil {
			return 0, err
		}
		return n, updateLot(ctx, tx, r.Env, r.Hash, r.St)
	})
}

// updateLot records what is known of a lot after a send or a resolve.
func updateLot(ctx context.Context, tx *sqlx.Tx, env sifen.Env, hash string, st sifen.Settle) error {
	switch {
	case st.Status == sifen.StatusSent || st.Status.Final():
		_, err := exec(ctx, tx, `
			UPDATE balde_document_lots SET status = 'queued', lot_number = COALESCE(?, lot_number),
				next_query_at = COALESCE(?, next_query_at)
			WHERE env = ? AND hash = ?`, nullString(st.LotNumber), sqltime.NullNanos(st.NextQueryAt), string(env), hash)
		return err
	case st.Status == sifen.StatusSending:
		return nil
	default:
		// SIFEN does not have the lot, unless a document says so (Resolve).
		_, err := exec(ctx, tx, `
			DELETE FROM balde_document_lots
			WHERE env = ? AND hash = ? AND NOT EXISTS (
				SELECT 1 FROM balde_documents
				WHERE balde_documents.env = balde_document_lots.env AND balde_documents.lot_hash = balde_document_lots.hash
				AND balde_documents.status IN ('sending', 'sent', 'approved', 'rejected'))`,
			string(env), hash)
		return err
	}
}

// Note implements sifen.DocumentStore.
func (s *store) Note(ctx context.Context, ids []int64, claim, message string, now time.Time) error {
	return s.update(ctx, "record send", `UPDATE balde_documents SET message = ?, updated_at = ?, version = version + 1
		WHERE id IN (?) AND status = 'sending' AND claim = ?`, message, sqltime.Nanos(now), ids, claim)
}

// Hold implements sifen.DocumentStore. A document in error keeps the
// answer of its last send (SIFEN's 0301 with its words).
func (s *store) Hold(ctx context.Context, ids []int64, message string, retryAt, now time.Time) error {
	return s.update(ctx, "record refusal", `UPDATE balde_documents
		SET message = CASE WHEN status = 'error' THEN message ELSE ? END,
			retry_at = ?, updated_at = ?, version = version + 1
		WHERE id IN (?) AND status IN ('draft', 'error')`, message, sqltime.NullNanos(retryAt), sqltime.Nanos(now), ids)
}

// Fail implements sifen.DocumentStore.
func (s *store) Fail(ctx context.Context, ids []int64, message string, now time.Time) error {
	return s.update(ctx, "record failure", `UPDATE balde_documents SET status = 'error', message = ?, retry_at = NULL, updated_at = ?, version = version + 1
		WHERE id IN (?) AND status IN ('draft', 'error')`, message, sqltime.Nanos(now), ids)
}

// update runs one statement (its IN lists expanded) in a write transaction.
func (s *store) update(ctx context.Context, op, q string, args ...any) error {
	_, err := inTx(ctx, s, op, func(tx *sqlx.Tx) (int64, error) {
		return exec(ctx, tx, q, args...)
	})
	return err
}

// Stale implements sifen.DocumentStore.
func (s *store) Stale(ctx context.Context, cutoff time.Time) ([]sifen.Document, error) {
	return s.selectDocs(ctx, "find documents left sending", `SELECT `+listColumns+` FROM balde_documents
		WHERE status = 'sending' AND claimed_at <= ? ORDER BY id`, sqltime.Nanos(cutoff))
}

// lotRow is a lot with documents still sent, and its schedule.
type lotRow struct {
	Env         string        `db:"env"`
	LotNumber   string        `db:"lot_number"`
	RUC         string        `db:"ruc"`
	Documents   int           `db:"documents"`
	SentAt      sql.NullInt64 `db:"sent_at"`
	NextQueryAt sql.NullInt64 `db:"next_query_at"`
}

// SentLots implements sifen.DocumentStore.
func (s *store) SentLots(ctx context.Context) ([]sifen.LotRef, error) {
	rows, err := selectAll[lotRow](ctx, s, "find sent lots", `
		SELECT d.env, d.lot_number, MIN(d.ruc) AS ruc, COUNT(*) AS documents,
			MIN(COALESCE(d.sent_at, d.claimed_at)) AS sent_at, MAX(l.next_query_at) AS next_query_at
		FROM balde_documents AS d
		LEFT JOIN balde_document_lots AS l ON l.env = d.env AND l.hash = d.lot_hash
		WHERE d.status = 'sent' AND d.lot_number IS NOT NULL
		GROUP BY d.env, d.lot_number
		ORDER BY d.lot_number, d.env`)
	if err != nil {
		return nil, err
	}
	out := make([]sifen.LotRef, len(rows))
	for i, r := range rows {
		out[i] = sifen.LotRef{Env: sifen.Env(r.Env), LotNumber: r.LotNumber, RUC: r.RUC, Documents: r.Documents,
			SentAt: sqltime.NullTime(r.SentAt), NextQueryAt: sqltime.NullTime(r.NextQueryAt)}
	}
	return out, nil
}

// ScheduleLot implements sifen.DocumentStore with a compare-and-set on
// next_query_at: a concurrent writer's commit makes its condition false
// (SQLite: one writer; PostgreSQL READ COMMITTED rechecks the updated row).
func (s *store) ScheduleLot(ctx context.Context, env sifen.Env, lotNumber string, dueBy, at time.Time) (bool, error) {
	return inTx(ctx, s, "schedule lot query", func(tx *sqlx.Tx) (bool, error) {
		n, err := exec(ctx, tx, `
			UPDATE balde_document_lots SET next_query_at = ?
			WHERE env = ? AND lot_number = ? AND (next_query_at IS NULL OR next_query_at <= ?)`,
			sqltime.Nanos(at), string(env), lotNumber, sqltime.Nanos(dueBy))
		if err != nil || n > 0 {
			return n > 0, err
		}
		// Nothing moved: another process did, unless the lot has no row.
		err = tx.GetContext(ctx, &n, tx.Rebind(`
			SELECT CASE WHEN EXISTS (SELECT 1 FROM balde_document_lots WHERE env = ? AND lot_number = ?) THEN 0 ELSE 1 END`),
			string(env), lotNumber)
		return n > 0, err
	})
}

// LotDocuments implements sifen.DocumentStore.
func (s *store) LotDocuments(ctx context.Context, env sifen.Env, lotNumber string) ([]sifen.Document, error) {
	return s.selectDocs(ctx, "find documents of lot", `SELECT `+listColumns+` FROM balde_documents
		WHERE env = ? AND lot_number = ? AND status = 'sent' ORDER BY id`, string(env), lotNumber)
}

// Finish implements sifen.DocumentStore.
func (s *store) Finish(ctx context.Context, d sifen.Document, st sifen.Settle, now time.Time) (bool, error) {
	return inTx(ctx, s, "record lot result", func(tx *sqlx.Tx) (bool, error) {
		n, err := exec(ctx, tx, `
			UPDATE balde_documents SET status = ?, message = ?, response_code = ?, result = ?, auth_number = ?,
				version = version + 1, updated_at = ?
			WHERE id = ? AND version = ? AND status = 'sent'`,
			string(st.Status), st.Message, nullString(st.ResponseCode), nullString(st.Result), nullString(st.AuthNumber),
			sqltime.Nanos(now), d.ID, d.Version)
		if err != nil || n != 1 || d.LotHash == "" {
			return n == 1, err
		}
		return true, updateLot(ctx, tx, d.Env, d.LotHash, st)
	})
}

// ShareInterval implements sifen.DocumentStore: the stored interval only
// grows, in one statement; a process storing nothing only reads.
func (s *store) ShareInterval(ctx context.Context, env sifen.Env, d time.Duration, now time.Time) (time.Duration, error) {
	before, err := selectAll[int64](ctx, s, "read the SIFEN interval", `SELECT COALESCE(MAX(interval_ns), 0) FROM balde_sifen_settings WHERE env = ?`, string(env))
	if err != nil {
		return 0, err
	}
	stored := time.Duration(before[0])
	if d <= stored {
		return stored, nil
	}
	return stored, s.update(ctx, "store the SIFEN interval", `
		INSERT INTO balde_sifen_settings (env, interval_ns, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (env) DO UPDATE SET interval_ns = excluded.interval_ns, updated_at = excluded.updated_at
		WHERE excluded.interval_ns > balde_sifen_settings.interval_ns`, string(env), int64(d), sqltime.Nanos(now))
}
