package pgxdriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// Pipeline runs p on conn's pgx connection in two batches: BEGIN and
// p.Load, then p.Write's statements and COMMIT (decision 0035). It returns
// driverkit.ErrNoPipeline when conn is not pgx's. After an error it rolls
// the transaction back, or has the pool discard the connection when even
// that fails.
func (pgDriver) Pipeline(ctx context.Context, conn *sql.Conn, p *driverkit.Pipeline) error {
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return driverkit.ErrNoPipeline
		}
		pc := sc.Conn()
		err := pipeline(ctx, pc, p)
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

// pipeline sends BEGIN and p.Load, and, with p.Write, reads them before
// sending Write's statements and COMMIT; without it COMMIT goes in the same
// batch, which the server skips after a failed statement (one Sync), so a
// failed Load leaves the transaction aborted, never committed.
func pipeline(ctx context.Context, pc *pgx.Conn, p *driverkit.Pipeline) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for _, q := range p.Load {
		b.Queue(q.SQL, q.Args...)
	}
	var writes []driverkit.Query
	if p.Write != nil {
		br := pc.SendBatch(ctx, b)
		err := readLoads(br, p)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if writes, err = p.Write(); err != nil {
			return err
		}
		b = &pgx.Batch{}
		for _, q := range writes {
			b.Queue(q.SQL, q.Args...)
		}
	}
	b.Queue("COMMIT")
	br := pc.SendBatch(ctx, b)
	var writeErr, commitErr error
	if p.Write == nil {
		writeErr = readLoads(br, p)
	}
	for i := 0; i < len(writes) && writeErr == nil; i++ {
		_, writeErr = br.Exec()
	}
	if writeErr == nil {
		_, commitErr = br.Exec()
	}
	return p.Outcome(writeErr, commitErr, br.Close())
}

// readLoads reads the results of BEGIN and of the load queries of a batch.
func readLoads(br pgx.BatchResults, p *driverkit.Pipeline) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	for _, q := range p.Load {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if q.Scan != nil {
			err = q.Scan(rows)
		}
		rows.Close()
		if err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}
