package sqlstore

import (
	"context"
	"database/sql"
	"errors"
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
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		frames, err := c.checkpoint(ctx, c.db, "PASSIVE")
		if err == nil && (frames*(pageSize+24) > c.limit || c.walSize() > c.limit) {
			err = c.truncate(ctx)
		}
		if err != nil {
			c.logger.Warn("WAL checkpoint", slog.Any("error", err))
		}
		select {
		case <-c.stop:
			return
		case <-time.After(c.every):
		}
	}
}

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
func (c *checkpointer) truncate(ctx context.Context) error {
	conn, err := c.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = c.checkpoint(ctx, conn, "TRUNCATE")
	return err
}

// checkpoint runs PRAGMA wal_checkpoint(mode) on q and returns the frames
// in the WAL; a checkpoint that found another running (busy) is not an
// error.
func (c *checkpointer) checkpoint(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, mode string) (frames int64, err error) {
	var busy, log, done int64
	err = q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &log, &done)
	if err != nil {
		if c.driver.Classify(err)&ClassBusy != 0 {
			return 0, nil
		}
		return 0, err
	}
	return max(log, 0), nil // -1: not in WAL mode
}

// close stops the goroutine, runs a last PASSIVE checkpoint and closes the
// connection. Nil-safe.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
	_, err := c.checkpoint(context.Background(), c.db, "PASSIVE")
	return errors.Join(err, c.db.Close())
}
