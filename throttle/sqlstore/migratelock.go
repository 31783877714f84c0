package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// migrateLockSuffix names the file beside a SQLite database that
// lockSQLite locks: "balde.db" is locked through
// "balde.db.migrate-lock".
const migrateLockSuffix = ".migrate-lock"

// lockSQLite takes the cross-process lock under which balde migrates the
// SQLite database at path, waiting for it until ctx ends. release(err)
// gives it back, and removes the lock file this call created when err
// refuses the database or none exists at path.
//
// golang-migrate's SQLite driver locks within one process only; this is the
// equivalent of PostgreSQL's advisory lock: an exclusive flock(2) on a file
// beside the database (not the database itself, on which each migration's
// own transaction would wait), released by the kernel when the process
// dies. See docs/decisions/0021.
func lockSQLite(ctx context.Context, path string) (release func(err error), err error) {
	lockFile := path + migrateLockSuffix
	_, statErr := os.Stat(lockFile)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
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
		if err := throttle.SleepContext(ctx, wait); err != nil {
			f.Close()
			return nil, fmt.Errorf("migrations: waiting for another process migrating %s: %w", path, err)
		}
	}
	return func(err error) {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		if !created {
			return
		}
		if _, dbErr := os.Stat(path); errors.Is(err, ErrDatabaseRefused) || errors.Is(dbErr, fs.ErrNotExist) {
			_ = os.Remove(lockFile)
		}
	}, nil
}
