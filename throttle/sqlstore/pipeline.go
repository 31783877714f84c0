package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/balde-throttle/balde/throttle"
)

// errNotPgx says the pool's connections are not pgx's: updatePipelined
// cannot run and update takes the database/sql path.
var errNotPgx = errors.New("sqlstore: not a pgx connection")

// updatePipelined is update on PostgreSQL through pgx's own interface, in
// two round trips instead of four: BEGIN, the locking read of the buckets
// (and of the credits) in one pipeline; then, after apply, the write and
// COMMIT in another. The transaction is the same as update's (same
// statements, same locks, the clock read once the locks are held), so
// exactness and the ledger are unchanged; only the waiting between
// statements is gone. It returns errNotPgx, having done nothing, when the
// pool is not pgx's.
func (s *Store) updatePipelined(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error, durable bool) error {
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		pc := sc.Conn()
		err := s.pipelined(ctx, pc, keys, credits, apply, durable)
		if err != nil && !pc.PgConn().IsClosed() && pc.PgConn().TxStatus() != 'I' {
			// Leave the connection as the pool expects it: outside a
			// transaction, or discarded.
			if _, rerr := pc.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
				return errors.Join(err, fmt.Errorf("rollback: %w", rerr), driver.ErrBadConn)
			}
		}
		return err
	})
}

func (s *Store) pipelined(ctx context.Context, pc *pgx.Conn, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error, durable bool) error {
	byRow, rowKeys, refs := s.rowKeys(keys, credits)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if !durable {
		b.Queue(asyncCommitSQL)
	}
	if len(rowKeys) > 0 {
		ids, envs, identifiers := keyArrays(rowKeys)
		b.Queue(pgLoadSQL, ids, envs, identifiers)
	}
	if len(refs) > 0 {
		b.Queue(pgCreditsSQL, creditArrays(refs)...)
	}
	br := pc.SendBatch(ctx, b)
	rows, found, err := readLoads(br, !durable, len(rowKeys) > 0, len(refs) > 0)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("load buckets: %w", err)
	}

	t, head, err := s.newTx(rows, found, byRow)
	if err != nil {
		return err
	}
	if err := apply(t); err != nil {
		return applyError{err}
	}
	var headMinute map[rowKey]int64
	if _, aggregated := t.LedgerRows(); len(aggregated) > 0 {
		headMinute, _ = postgresWriter{}.headMinutes(ctx, nil, rows)
	}
	ws := s.writeSet(t, head, headMinute)

	b = &pgx.Batch{}
	if !ws.empty() {
		b.Queue(writeSQL, writeArgs(ws)...)
	}
	b.Queue("COMMIT")
	br = pc.SendBatch(ctx, b)
	var writeErr, commitErr error
	if !ws.empty() {
		_, writeErr = br.Exec()
	}
	if writeErr == nil {
		_, commitErr = br.Exec()
	}
	err = pipelineOutcome(writeErr, commitErr, br.Close())
	if errors.Is(err, ErrCommitInDoubt) {
		s.logger.Warn("commit outcome unknown", slog.Any("error", err))
	}
	return err
}

// pipelineOutcome tells what became of a pipelined write and COMMIT from
// the errors of reading the write's result, the COMMIT's result and
// closing the batch (the trailing ReadyForQuery):
//   - COMMIT answered: committed, whatever closing says (a session
//     terminated just after its commit reports FATAL 57P01 there);
//   - the server refused the write with an error of its own: the COMMIT
//     behind it in the pipeline was skipped, nothing applied, and the
//     error is returned as is (retried when transient);
//   - the server answered the COMMIT with a rollback (class 40): nothing
//     applied, returned as is;
//   - anything else (no answer: the connection broke, the context ended;
//     or a FATAL in answer to COMMIT): the COMMIT was sent and may have
//     applied. Running it again could apply its decisions twice, so it is
//     ErrCommitInDoubt, never retried (decision 0020).
func pipelineOutcome(writeErr, commitErr, closeErr error) error {
	var pe *pgconn.PgError
	switch {
	case writeErr == nil && commitErr == nil:
		return nil
	case writeErr != nil && errors.As(writeErr, &pe):
		return fmt.Errorf("write: %w", writeErr)
	case writeErr != nil:
		return fmt.Errorf("%w: write: %w", ErrCommitInDoubt, writeErr)
	case definiteCommitFailure(commitErr):
		return commitErr
	}
	return fmt.Errorf("%w: %w", ErrCommitInDoubt, errors.Join(commitErr, closeErr))
}

// readLoads reads the results of BEGIN, of the SET LOCAL after it when
// set, and of the load queries of a batch.
func readLoads(br pgx.BatchResults, set, buckets, credits bool) ([]bucketRow, []creditKey, error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, err
	}
	if set {
		if _, err := br.Exec(); err != nil {
			return nil, nil, err
		}
	}
	var out []bucketRow
	if buckets {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			r, err := scanLockedBucketRow(rows)
			if err != nil {
				rows.Close()
				return nil, nil, err
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	var found []creditKey
	if credits {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var c creditKey
			if err := rows.Scan(&c.policyID, &c.env, &c.identifier, &c.ref); err != nil {
				rows.Close()
				return nil, nil, err
			}
			found = append(found, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return out, found, nil
}
