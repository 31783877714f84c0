package sqlstore

import (
	"cmp"
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

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// SQLite checkpoints, off the commit path
// (docs/decisions/0112-sqlite-background-checkpoints.md and
// 0114-sqlite-wal-restarts-in-place.md). A Store opened by Open on a SQLite
// file turns wal_autocheckpoint off on its writer and runs PASSIVE
// checkpoints on a connection of its own, in a goroutine. When the WAL
// holds half of WALLimit it has the writer catch up (onWriter) so that the
// WAL starts again in place; a TRUNCATE runs only past the limit. Several
// processes on one file each run their own; SQLite runs one at a time.

// Checkpoint defaults.
const (
	// defaultCheckpointEvery is how long the checkpointer sleeps when the
	// WAL had nothing to copy.
	defaultCheckpointEvery = 20 * time.Millisecond
	// defaultWALLimit is the WAL size past which a TRUNCATE runs
	// (journal_size_limit's 64 MiB).
	defaultWALLimit = 64 << 20
)

// baldeAutocheckpoint is balde's wal_autocheckpoint in the DSN
// (sqlitePragmas): a DSN that carries it leaves checkpoints to the store.
const baldeAutocheckpoint = "_pragma=wal_autocheckpoint(16000)"

// checkpointer runs a SQLite file's checkpoints in the background.
type checkpointer struct {
	db     *sql.DB // one connection, its own
	writer *sql.DB // the store's writer (one connection)
	driver Driver  // classifies its errors
	path   string  // the database file's path
	every  time.Duration
	limit  int64 // bytes of WAL past which a TRUNCATE runs
	logger *slog.Logger
	done   context.Context // ends at close
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// startCheckpointer opens the checkpoint connection and starts its goroutine.
func startCheckpointer(d Driver, driverDSN string, writer *sql.DB, opts Options, logger *slog.Logger) (*checkpointer, error) {
	db, err := sql.Open(d.SQLName(), driverDSN)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, writer: writer, driver: d, path: SQLitePath(driverDSN), logger: logger,
		every: cmp.Or(max(opts.CheckpointEvery, 0), defaultCheckpointEvery), limit: cmp.Or(max(opts.WALLimit, 0), defaultWALLimit)}
	c.done, c.stop = context.WithCancel(context.Background())
	c.wg.Go(c.run)
	return c, nil
}

// ownCheckpoints reports whether the store takes the checkpoints over (the
// user's dsn does not set wal_autocheckpoint, even to balde's value, and
// the writer's DSN carries balde's), and returns the writer's DSN for it.
func ownCheckpoints(dsn, writerDSN string) (string, bool) {
	if strings.Contains(strings.ToLower(dsn), "wal_autocheckpoint") || !strings.Contains(writerDSN, baldeAutocheckpoint) {
		return writerDSN, false
	}
	return strings.Replace(writerDSN, baldeAutocheckpoint, "_pragma=wal_autocheckpoint(0)", 1), true
}

func (c *checkpointer) run() {
	var pageSize int64
	if err := c.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		pageSize = 4096
	}
	frameSize := pageSize + walFrameHeader
	// Past restartFrames (half the limit) the WAL is made to start again;
	// past forceFrames (three quarters) the writer catches up at once.
	restartFrames := max(c.limit/2/frameSize, 1)
	forceFrames := max(c.limit*3/4/frameSize, 1)
	ctx := context.Background()
	var (
		notBefore, logged time.Time      // of the next TRUNCATE; of the last warning
		catchUpNotBefore  time.Time      // of the next catch-up
		caughtUp          int64          // frames in the WAL at the last catch-up; 0: none pending
		copied            int64     = -1 // frames copied by the last pass in a row; -1: none
	)
	for c.done.Err() == nil {
		busy, frames, done, err := c.checkpoint(ctx, c.db, "PASSIVE")
		if caughtUp > 0 && err == nil {
			if frames >= caughtUp {
				// A reader kept the WAL from restarting: wait a while.
				catchUpNotBefore = time.Now().Add(truncateBackoff)
			}
			caughtUp = 0
		}
		again := false
		switch {
		case err != nil:
		case (frames*frameSize > c.limit || c.walSize() > c.limit) && !time.Now().Before(notBefore):
			flushFile(c.path) // as before a catch-up
			if busy, err = c.onWriter(ctx, "TRUNCATE"); busy {
				// A reader holds an old snapshot: try again in a second.
				notBefore = time.Now().Add(truncateBackoff)
			}
			copied = -1
		case !busy && frames >= restartFrames && !time.Now().Before(catchUpNotBefore):
			// Passes without a pause until one finds few new frames.
			if frames < forceFrames && (copied < 0 || done-copied > catchUpFrames) {
				copied, again = done, true
				break
			}
			// The copied pages are flushed before the writer waits.
			flushFile(c.path)
			if busy, err = c.onWriter(ctx, "PASSIVE"); err == nil && !busy {
				caughtUp = frames
			}
			copied = -1
		default:
			copied = -1
		}
		if err != nil && time.Since(logged) >= warnEvery {
			// One warning per warnEvery, not 50 a second.
			logged = time.Now()
			c.logger.Warn("WAL checkpoint", slog.Any("error", err))
		}
		if again {
			continue
		}
		_ = throttle.SleepContext(c.done, c.every)
	}
}

const (
	// walFrameHeader is the size of a WAL frame's header, before its page.
	walFrameHeader = 24
	// catchUpFrames is how few frames a background pass must find new
	// before the writer catches up.
	catchUpFrames = 64
)

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
	fi, err := os.Stat(c.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// onWriter runs a checkpoint of mode on the store's write connection,
// holding it, and reports busy when another checkpoint or readers kept it
// from completing. A PASSIVE one is the writer catching up: the WAL ends
// fully copied and the writer's next transaction starts it again in place
// (decision 0114). A TRUNCATE one (from another connection it would wait
// for a moment with no writer, which a busy process never leaves) waits at
// most truncateBusyTimeout for readers.
func (c *checkpointer) onWriter(ctx context.Context, mode string) (busy bool, err error) {
	conn, err := c.writer.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if mode == "PASSIVE" {
		busy, _, _, err = c.checkpoint(ctx, conn, mode)
		return busy, err
	}
	var timeout int64
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, truncateBusyTimeout.Milliseconds())); err != nil {
		return false, err
	}
	busy, _, _, err = c.checkpoint(ctx, conn, "TRUNCATE")
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
}, mode string) (busy bool, frames, done int64, err error) {
	var blocked, log, copied int64
	err = q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&blocked, &log, &copied)
	if err != nil {
		if c.driver.Classify(err)&driverkit.ClassBusy != 0 {
			return true, 0, 0, nil
		}
		return false, 0, 0, err
	}
	return blocked != 0, max(log, 0), max(copied, 0), nil // log -1: not in WAL mode
}

// close stops the goroutine, runs a last PASSIVE checkpoint and closes the
// connection. Nil-safe.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.stop()
	c.wg.Wait()
	_, _, _, err := c.checkpoint(context.Background(), c.db, "PASSIVE")
	return errors.Join(err, c.db.Close())
}
