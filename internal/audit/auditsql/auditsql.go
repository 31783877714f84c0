// Package auditsql keeps the operators' audit trail (package audit) in
// table balde_audit, on SQLite and PostgreSQL with the same literal SQL.
package auditsql

import (
	"context"
	"fmt"
	"time"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/sqlkit"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Store is audit.Store over the store's database. Safe for concurrent use.
type Store struct {
	store *sqlstore.Store
}

var _ audit.Store = (*Store)(nil)

// New returns a Store over store's migrated database (its write and read
// handles), stamping entries with its clock. Each statement is run again
// after a transient failure (sqlstore.Store.Retry): an insert whose answer
// was lost may record an entry twice, as a trail with a duplicate beats
// one with a gap.
func New(store *sqlstore.Store) *Store {
	return &Store{store: store}
}

type row struct {
	ID      int64  `db:"id"`
	At      int64  `db:"at"`
	User    string `db:"user_name"`
	Action  string `db:"action"`
	Target  string `db:"target"`
	Reason  string `db:"reason"`
	Outcome string `db:"outcome"`
}

// Record implements audit.Store.
func (s *Store) Record(ctx context.Context, e audit.Entry) (audit.Entry, error) {
	if err := e.Validate(); err != nil {
		return e, err
	}
	if e.At.IsZero() {
		e.At = s.store.Now()
	}
	e.At = e.At.UTC()
	e.Target, e.Outcome = audit.Clip(e.Target), audit.Clip(e.Outcome)
	err := s.store.Retry(ctx, "audit", func() error {
		return s.store.DB().GetContext(ctx, &e.ID, s.store.DB().Rebind(`
			INSERT INTO balde_audit (at, user_name, action, target, reason, outcome)
			VALUES (?, ?, ?, ?, ?, ?)
			RETURNING id`),
			e.At.UnixNano(), e.User, string(e.Action), e.Target, e.Reason, e.Outcome)
	})
	return e, sqlkit.StoreError("audit", fmt.Sprintf("record %s by %s", e.Action, e.User), err)
}

// List implements audit.Store. Each filter reads its own index (user,
// id) or (action, id) backwards from Before.
func (s *Store) List(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	var c sqlkit.Conds
	c.And(q.User != "", "user_name = ?", q.User)
	c.And(q.Action != "", "action = ?", string(q.Action))
	c.And(q.Before > 0, "id < ?", q.Before)
	query := `
		SELECT id, at, user_name, action, target, reason, outcome
		FROM balde_audit
		` + c.Where() + `
		ORDER BY id DESC
		LIMIT ?`
	args := append(c.Args, q.Limit)
	var rows []row
	read := s.store.ReadDB()
	if err := s.store.Retry(ctx, "audit", func() error { return read.SelectContext(ctx, &rows, read.Rebind(query), args...) }); err != nil {
		return nil, sqlkit.StoreError("audit", "list", err)
	}
	out := make([]audit.Entry, len(rows))
	for i, r := range rows {
		out[i] = audit.Entry{
			ID: r.ID, At: time.Unix(0, r.At).UTC(), User: r.User, Action: audit.Action(r.Action),
			Target: r.Target, Reason: r.Reason, Outcome: r.Outcome,
		}
	}
	return out, nil
}

// Prune implements audit.Store: the oldest rows by their own time, through
// the index on at.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.store.Retry(ctx, "audit", func() error {
		res, err := s.store.DB().ExecContext(ctx, s.store.DB().Rebind(`
			DELETE FROM balde_audit
			WHERE id IN (SELECT id FROM balde_audit WHERE at < ? ORDER BY at LIMIT ?)`), before.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, sqlkit.StoreError("audit", "prune", err)
}
