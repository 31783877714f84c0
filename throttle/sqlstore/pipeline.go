package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// updatePipelined is update on PostgreSQL through the driver's own
// interface, in two round trips instead of four: BEGIN and the locking
// reads in one pipeline, then, after apply, the write and COMMIT. The
// statements, locks and clock reading are update's. It returns
// ErrNoPipeline, having done nothing, when the pool's connections are not
// the driver's. A non-durable transaction (Store.NonDurable) sets
// synchronous_commit off in the first round trip, is first tried on
// remembered rows (updateOptimistic), and remembers the rows it wrote.
func (s *Store) updatePipelined(ctx context.Context, p driverkit.Pipeliner, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error, durable bool) error {
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

	var cache *rowCache // nil when NonDurable never made one
	if !durable {
		cache = s.fast.Load()
	}
	if cache != nil && len(credits) == 0 {
		if done, err := s.updateOptimistic(ctx, p, conn, cache, keys, apply); done {
			return err
		}
	}

	byRow, rowKeys, refs := s.rowKeys(keys, credits)
	var load []driverkit.Query
	var rows []bucketRow
	var found []creditKey
	if !durable {
		load = append(load, driverkit.Query{SQL: asyncCommitSQL})
	}
	if len(rowKeys) > 0 {
		load = append(load, driverkit.Query{SQL: pgLoadSQL, Args: keyArrays(rowKeys),
			Scan: func(r driverkit.Rows) error { return collect(r, &rows, scanLockedBucketRow) }})
	}
	if len(refs) > 0 {
		load = append(load, driverkit.Query{SQL: pgCreditsSQL, Args: creditArrays(refs),
			Scan: func(r driverkit.Rows) error { return collect(r, &found, scanCredit) }})
	}
	loaded := false
	var written *writeSet
	err = p.Pipeline(ctx, conn, &driverkit.Pipeline{
		Load: load,
		Write: func() ([]driverkit.Query, error) {
			loaded = true
			ws, err := s.decide(rows, found, byRow, apply, func() (map[rowKey]int64, error) { return headMinutesOf(rows), nil })
			written = ws
			if err != nil || ws.empty() {
				return nil, err
			}
			return []driverkit.Query{{SQL: writeSQL, Args: writeArgs(ws)}}, nil
		},
		Outcome: func(writeErr, commitErr, closeErr error) error {
			return pipelineOutcome(s.driver, writeErr, commitErr, closeErr)
		},
	})
	if cache != nil && !errors.Is(err, driverkit.ErrNoPipeline) {
		cache.locked.Add(1)
		if err == nil && written != nil {
			cache.remember(rows, written, rowKeys)
		} else {
			cache.forget(rowKeys)
		}
	}
	switch {
	case errors.Is(err, driverkit.ErrNoPipeline):
		return err
	case err != nil && !loaded:
		return fmt.Errorf("load buckets: %w", err)
	case errors.Is(err, ErrCommitInDoubt):
		s.logger.Warn("commit outcome unknown", slog.Any("error", err))
	}
	return err
}

// pipelineOutcome tells what became of a pipelined write and COMMIT from
// the errors of the write's result, the COMMIT's and closing the batch: an
// answered COMMIT committed; a write the server refused, or a COMMIT it
// answered with a rollback (class 40), applied nothing and is returned as
// is; anything else may have applied and is ErrCommitInDoubt (decision
// 0020).
func pipelineOutcome(d Driver, writeErr, commitErr, closeErr error) error {
	switch {
	case writeErr == nil && commitErr == nil:
		return nil
	case writeErr != nil && d.Classify(writeErr)&driverkit.ClassServer != 0:
		return fmt.Errorf("write: %w", writeErr)
	case writeErr != nil:
		return fmt.Errorf("%w: write: %w", ErrCommitInDoubt, writeErr)
	case definiteCommitFailure(d, commitErr):
		return commitErr
	}
	return fmt.Errorf("%w: %w", ErrCommitInDoubt, errors.Join(commitErr, closeErr))
}
