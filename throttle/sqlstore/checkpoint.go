package sqlstore

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"
)

// checkpointer runs passive WAL checkpoints on a connection of its own, so
// that no decision pays for one. A passive checkpoint copies what it can
// from the WAL into the database without waiting for, or blocking, readers
// and writers; the WAL restarts from its beginning once a checkpoint has
// caught up, and journal_size_limit truncates a WAL that grew under a burst.
type checkpointer struct {
	db     *sql.DB
	stopCh chan struct{}
	wg     sync.WaitGroup
}

// restartFrames is the WAL length (in pages) beyond which the background
// checkpointer restarts the WAL: 4096 pages, 16 MiB with 4 KiB pages.
const restartFrames = 4096

func startCheckpointer(dsn string, every time.Duration, logger *slog.Logger) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, stopCh: make(chan struct{})}
	c.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-c.stopCh:
				return
			case <-t.C:
			}
			var busy, log, done int64
			err := db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done)
			if err == nil && log > restartFrames {
				// Writers that never pause keep the WAL from restarting
				// after a passive checkpoint: once it is this long, a
				// RESTART checkpoint makes the next writer wait for it and
				// start the WAL over.
				err = db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &log, &done)
			}
			if err != nil {
				logger.Warn("WAL checkpoint failed", slog.Any("error", err))
			}
		}
	})
	return c, nil
}

func (c *checkpointer) stop() error {
	close(c.stopCh)
	c.wg.Wait()
	return c.db.Close()
}
