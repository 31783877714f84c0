package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// SQLite checkpoints, off the commit path
// (docs/decisions/0112-sqlite-background-checkpoints.md).
//
// With wal_autocheckpoint, the transaction whose COMMIT takes the WAL past
// the threshold runs the checkpoint itself: it copies thousands of pages
// into the database file and syncs it while every other decision of the
// process waits behind it (p99.9 82 ms with 32 callers on 1M keys). A
// Store opened by Open on a SQLite file instead turns autocheckpoint off
// on its writer and runs the checkpoints on a connection of their own, in
// a goroutine: PASSIVE checkpoints, which never wait for a lock and never
// stop a writer (readers and writers go on while frames are copied), as
// every CheckpointEvery, and a TRUNCATE — which waits for the readers
// and holds the writers while it runs — only when the WAL has grown past
// the bound (readers holding old snapshots can keep PASSIVE checkpoints
// from ever catching up). Several processes on one file each run their
// own; SQLite lets one checkpoint run at a time, and a PASSIVE one that
// finds another running skips its turn.

// Checkpoint defaults.
const (
	// DefaultCheckpointEvery is how long the checkpointer sleeps when the
	// WAL had nothing to copy.
	DefaultCheckpointEvery = 20 * time.Millisecond
	// DefaultWALLimit is the WAL size past which the checkpointer runs a
	// TRUNCATE checkpoint (journal_size_limit's 64 MiB).
	DefaultWALLimit = 64 << 20
)

// baldeAutocheckpoint is balde's wal_autocheckpoint in the DSN
// (sqlitePragmas): when the DSN carries it, the user did not set their own
// and the store may take checkpoints over.
const baldeAutocheckpoint = "_pragma=wal_autocheckpoint(16000)"

// checkpointer runs a SQLite file's checkpoints in the background.
type checkpointer struct {
	db     *sql.DB // one connection, its own
	writer *sql.DB // the store's writer (one connection)
	driver Driver  // classifies its errors
	wal    string  // the WAL file's path
	every  time.Duration
	limit  int64 // bytes of WAL past which a TRUNCATE runs
	logger *slog.Logger
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// startCheckpointer opens the checkpoint connection on driverDSN (through
// d) and starts its goroutine.
func startCheckpointer(d Driver, driverDSN string, writer *sql.DB, opts Options, logger *slog.Logger) (*checkpointer, error) {
	db, err := sql.Open(d.SQLName(), driverDSN)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, writer: writer, driver: d, wal: SQLitePath(driverDSN) + "-wal", every: opts.CheckpointEvery, limit: opts.WALLimit, logger: logger, stop: make(chan struct{})}
	if c.every <= 0 {
		c.every = DefaultCheckpointEvery
	}
	if c.limit <= 0 {
		c.limit = DefaultWALLimit
	}
	c.wg.Go(c.run)
	return c, nil
}

// ownCheckpoints reports whether the writer's DSN leaves checkpoints to the
// store (balde's wal_autocheckpoint, not the user's), and returns the
// writer's DSN with autocheckpoint off when it does.
func ownCheckpoints(writerDSN string) (string, bool) {
	if !strings.Contains(writerDSN, baldeAutocheckpoint) {
		return writerDSN, false
	}
	return strings.Replace(writerDSN, baldeAutocheckpoint, "_pragma=wal_autocheckpoint(0)", 1), true
}

func (c *checkpointer) run() {
	var pageSize int64
	if err := c.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		pageSize = 4096
	}
	ctx := context.Background()
	var notBefore, logged time.Time // of the next TRUNCATE; of the last warning
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		_, frames, err := c.checkpoint(ctx, c.db, "PASSIVE")
		if err == nil && (frames*(pageSize+24) > c.limit || c.walSize() > c.limit) && !time.Now().Before(notBefore) {
			var busy bool
			if busy, err = c.truncate(ctx); busy {
				// A reader still holds an old snapshot (a long listing, a
				// backup): the WAL cannot be reset under it. Try again in
				// a second rather than hold the writers every 20 ms.
				notBefore = time.Now().Add(truncateBackoff)
			}
		}
		if err != nil && time.Since(logged) >= warnEvery {
			// A file that cannot be checkpointed now will fail the same
			// way 50 times a second: one warning per warnEvery.
			logged = time.Now()
			c.logger.Warn("WAL checkpoint", slog.Any("error", err))
		}
		select {
		case <-c.stop:
			return
		case <-time.After(c.every):
		}
	}
}

const (
	// truncateBusyTimeout bounds how long a TRUNCATE checkpoint holding
	// the writer waits for readers to leave old snapshots.
	truncateBusyTimeout = 100 * time.Millisecond
	// truncateBackoff is the pause after a TRUNCATE that readers kept
	// from resetting the WAL.
	truncateBackoff = time.Second
	// warnEvery bounds how often a failing checkpoint is logged.
	warnEvery = 10 * time.Second
)

// walSize returns the size of the WAL file, which stays at its largest
// until a TRUNCATE checkpoint (or journal_size_limit at a restart) cuts it.
func (c *checkpointer) walSize() int64 {
	fi, err := os.Stat(c.wal)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// truncate runs a TRUNCATE checkpoint on the store's own write
// connection, holding it: the process's writers wait in line behind it
// for as long as it copies what the last PASSIVE checkpoint left (the
// frames written since) and resets the WAL. Run from another connection,
// it would wait, in SQLite's busy handler, for a moment with no writer,
// which a busy process never leaves (it was measured waiting 1.5 s while
// the WAL grew to 60 MB).
//
// It waits at most truncateBusyTimeout for readers (the writer's own
// busy_timeout is set for it and put back), and reports busy when they
// kept it from resetting the WAL.
func (c *checkpointer) truncate(ctx context.Context) (busy bool, err error) {
	conn, err := c.writer.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var timeout int64
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, truncateBusyTimeout.Milliseconds())); err != nil {
		return false, err
	}
	busy, _, err = c.checkpoint(ctx, conn, "TRUNCATE")
	if _, rerr := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, timeout)); rerr != nil {
		// The writer must not keep the short timeout: drop the connection.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return busy, errors.Join(err, rerr)
	}
	return busy, err
}

// checkpoint runs PRAGMA wal_checkpoint(mode) on q and returns whether it
// was kept from completing (by readers, or another checkpoint running:
// not an error) and the frames in the WAL.
func (c *checkpointer) checkpoint(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, mode string) (busy bool, frames int64, err error) {
	var blocked, log, done int64
	err = q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&blocked, &log, &done)
	if err != nil {
		if c.driver.Classify(err)&ClassBusy != 0 {
			return true, 0, nil
		}
		return false, 0, err
	}
	return blocked != 0, max(log, 0), nil // log -1: not in WAL mode
}

// close stops the goroutine, runs a last PASSIVE checkpoint and closes the
// connection. Nil-safe.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
	_, _, err := c.checkpoint(context.Background(), c.db, "PASSIVE")
	return errors.Join(err, c.db.Close())
}
