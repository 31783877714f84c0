package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// migrateLockSuffix names the file beside a SQLite database that
// flockMigrations locks: "balde.db" is locked through
// "balde.db.migrate-lock".
const migrateLockSuffix = ".migrate-lock"

// flockMigrations takes the cross-process lock under which balde migrates the
// SQLite database at path, waiting for it until ctx ends, and returns the
// function that releases it.
//
// golang-migrate's SQLite driver locks within one process only, so
// processes started at once on a new file each applied 0001 and the loser
// left the version dirty. PostgreSQL's driver takes an advisory
// lock; this is its equivalent for SQLite: an exclusive flock(2) on a file
// beside the database, held from before the legacy adoption until the last
// migration is recorded. The kernel releases it when the process dies (a
// kill -9 leaves no stale lock). A lock on the database file itself, or an
// exclusive transaction on a lock table, would not do: golang-migrate runs
// each migration in a transaction of its own on the same file, which would
// wait on ours. See docs/decisions/0021.
func flockMigrations(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+migrateLockSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("migrations: lock %s: %w", path, err)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("migrations: lock %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("migrations: waiting for another process migrating %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
