// Package dictsql keeps the DICT adapter's own tables (migration 0004) in
// balde's SQL database: the SQL side of dict.Records, kept out of package
// dict so that importing dict pulls in no database library.
package dictsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/sqlkit"
	"github.com/balde-throttle/balde/internal/sqltime"
)

// Records keeps the lookups, one row per EndToEndId, and the participants'
// categories in the store's database. Safe for concurrent use.
type Records struct {
	db, read *sqlx.DB
	// Retry, when set, runs each statement and runs it again after a
	// transient failure of the database (sqlstore.Store.Retry); every
	// statement here is idempotent. Nil runs it once.
	Retry func(ctx context.Context, op string, fn func() error) error
}

var _ dict.Records = (*Records)(nil)

// NewRecords returns Records over the store's write and read handles
// (sqlstore.Store.DB and ReadDB); the database must be migrated.
func NewRecords(db, read *sqlx.DB) *Records {
	return &Records{db: db, read: read}
}

type lookupRow struct {
	EndToEndID  string        `db:"end_to_end_id"`
	Env         string        `db:"env"`
	PayerID     string        `db:"payer_id"`
	KeyType     string        `db:"key_type"`
	Policy      string        `db:"policy"`
	Participant string        `db:"participant"`
	Status      int           `db:"status"`
	LookedUpAt  int64         `db:"looked_up_at"`
	PaidAt      sql.NullInt64 `db:"paid_at"`
}

// RecordLookup implements dict.Records.
func (r *Records) RecordLookup(ctx context.Context, l dict.Lookup) error {
	_, err := r.exec(ctx, r.db.Rebind(`
		INSERT INTO balde_dict_lookups (end_to_end_id, env, payer_id, key_type, policy, participant, status, looked_up_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (end_to_end_id) DO UPDATE SET
			env = excluded.env, payer_id = excluded.payer_id, key_type = excluded.key_type, policy = excluded.policy,
			participant = excluded.participant, status = excluded.status, looked_up_at = excluded.looked_up_at`),
		l.EndToEndID, l.Env, l.PayerID, string(l.KeyType), l.Policy, l.Participant, l.Status, l.LookedUpAt.UnixNano())
	return sqlkit.StoreError("dict", "record lookup "+l.EndToEndID, err)
}

// FindLookup implements dict.Records.
func (r *Records) FindLookup(ctx context.Context, e2e string) (dict.Lookup, error) {
	var row lookupRow
	err := r.get(ctx, &row, r.read.Rebind(`
		SELECT end_to_end_id, env, payer_id, key_type, policy, participant, status, looked_up_at, paid_at
		FROM balde_dict_lookups
		WHERE end_to_end_id = ?`), e2e)
	if errors.Is(err, sql.ErrNoRows) {
		return dict.Lookup{}, fmt.Errorf("%w: %s", dict.ErrUnknownEndToEndID, e2e)
	}
	if err != nil {
		return dict.Lookup{}, sqlkit.StoreError("dict", "find lookup "+e2e, err)
	}
	return dict.Lookup{
		EndToEndID: row.EndToEndID, Env: row.Env, PayerID: row.PayerID, KeyType: dict.KeyType(row.KeyType),
		Policy: row.Policy, Participant: row.Participant, Status: row.Status,
		LookedUpAt: sqltime.Time(row.LookedUpAt), PaidAt: sqltime.NullTime(row.PaidAt),
	}, nil
}

// MarkPaid implements dict.Records.
func (r *Records) MarkPaid(ctx context.Context, e2e string, at time.Time) error {
	_, err := r.exec(ctx, r.db.Rebind(`
		UPDATE balde_dict_lookups
		SET paid_at = ?
		WHERE end_to_end_id = ? AND paid_at IS NULL`), at.UnixNano(), e2e)
	return sqlkit.StoreError("dict", "mark "+e2e+" paid", err)
}

// LearnedCategory implements dict.Records.
func (r *Records) LearnedCategory(ctx context.Context, env, participant string) (category string, at time.Time, ok bool, err error) {
	var row struct {
		Category  string `db:"category"`
		UpdatedAt int64  `db:"updated_at"`
	}
	err = r.get(ctx, &row, r.read.Rebind(`
		SELECT category, updated_at
		FROM balde_dict_participants
		WHERE env = ? AND participant = ?`), env, participant)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, sqlkit.StoreError("dictsql", "load category of "+participant, err)
	}
	return row.Category, sqltime.Time(row.UpdatedAt), true, nil
}

// LearnedCategories returns the category recorded for each participant in env.
func (r *Records) LearnedCategories(ctx context.Context, env string) (map[string]string, error) {
	var rows []struct {
		Participant string `db:"participant"`
		Category    string `db:"category"`
	}
	err := r.selectAll(ctx, &rows, r.read.Rebind(`
		SELECT participant, category
		FROM balde_dict_participants
		WHERE env = ?`), env)
	if err != nil {
		return nil, sqlkit.StoreError("dictsql", "load categories", err)
	}
	out := make(map[string]string, len(rows))
	for _, row := range rows {
		out[row.Participant] = row.Category
	}
	return out, nil
}

// SaveCategory implements dict.Records.
func (r *Records) SaveCategory(ctx context.Context, env, participant, category string, at time.Time) error {
	_, err := r.exec(ctx, r.db.Rebind(`
		INSERT INTO balde_dict_participants (env, participant, category, updated_at)
		VALUES (?, ?, ?, ?)
		ON CONFLICT (env, participant) DO UPDATE SET
			category = excluded.category,
			updated_at = excluded.updated_at`),
		env, participant, category, at.UnixNano())
	return sqlkit.StoreError("dict", "save category of "+participant, err)
}

// PruneLookups deletes up to limit lookups made before before, oldest first,
// and returns how many it deleted.
func (r *Records) PruneLookups(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	res, err := r.exec(ctx, r.db.Rebind(`
		DELETE FROM balde_dict_lookups
		WHERE end_to_end_id IN (
			SELECT end_to_end_id
			FROM balde_dict_lookups
			WHERE looked_up_at < ?
			ORDER BY looked_up_at
			LIMIT ?
		)`), before.UnixNano(), limit)
	if err == nil {
		n, err = res.RowsAffected()
	}
	return n, sqlkit.StoreError("dict", "prune lookups", err)
}

// run runs fn through r.Retry, or once without it.
func (r *Records) run(ctx context.Context, op string, fn func() error) error {
	if r.Retry == nil {
		return fn()
	}
	return r.Retry(ctx, op, fn)
}

func (r *Records) exec(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = r.run(ctx, "dict records", func() (err error) { res, err = r.db.ExecContext(ctx, query, args...); return err })
	return res, err
}

func (r *Records) get(ctx context.Context, dest any, query string, args ...any) error {
	return r.run(ctx, "dict records", func() error { return r.read.GetContext(ctx, dest, query, args...) })
}

// selectAll is SelectContext, retried (sqlx empties dest before each try).
func (r *Records) selectAll(ctx context.Context, dest any, query string, args ...any) error {
	return r.run(ctx, "dict records", func() error { return r.read.SelectContext(ctx, dest, query, args...) })
}
