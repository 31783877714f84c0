package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// ErrDatabaseRefused means balde refuses a SQLite file that is not a sound
// balde database: an empty (0-byte) file, which would otherwise silently
// become a new, empty database, or a corrupt one (ErrDatabaseCorrupt). The
// error names the file and comes wrapped with throttle.ErrStoreUnavailable.
var ErrDatabaseRefused = errors.New("sqlstore: database refused")

// ErrDatabaseCorrupt means the SQLite file fails PRAGMA quick_check, or a
// statement reported SQLITE_CORRUPT or SQLITE_NOTADB; it wraps
// ErrDatabaseRefused. A store that saw it refuses every decision and Retry
// until it is reopened.
var ErrDatabaseCorrupt = fmt.Errorf("%w: it fails SQLite's integrity check", ErrDatabaseRefused)

// Integrity check defaults (Options.IntegrityTimeout, IntegrityEvery).
const (
	// defaultIntegrityTimeout bounds the check at open; one cut short is
	// logged and the store opens.
	defaultIntegrityTimeout = 10 * time.Second
	// DefaultIntegrityEvery is how old the last check may be when readiness
	// (CheckWrite) asks before it runs again in the background.
	DefaultIntegrityEvery = 5 * time.Minute
)

// checkSQLiteFile refuses an empty file at path, or one that is not a
// regular file; a missing one is os.Stat's error (fs.ErrNotExist), left to
// the caller.
func checkSQLiteFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.Size() == 0:
		return fmt.Errorf("%w: %s is empty (0 bytes): a truncated copy or a failed restore? "+
			"balde will not turn it into a new, empty database (penalties, blocks and documents in flight would be lost); "+
			"restore the file, or remove it and start anew with --create", ErrDatabaseRefused, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrDatabaseRefused, path)
	}
	return nil
}

// quickCheck runs PRAGMA quick_check on db (SQLite) until ctx ends: every
// page and B-tree, without integrity_check's cross-check of indexes. It
// returns an error wrapping ErrDatabaseCorrupt naming path when the check
// fails, ctx's error when it was cut short, and other errors as they come.
func quickCheck(ctx context.Context, d Driver, db *sql.DB, path string) error {
	var problems []string
	err := sqlx.SelectContext(ctx, sqlx.NewDb(db, d.SQLName()), &problems, `PRAGMA quick_check(10)`)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return namedCorrupt(d, path, err)
	case len(problems) == 1 && problems[0] == "ok":
		return nil
	}
	return fmt.Errorf("%w: %s: quick_check: %s", ErrDatabaseCorrupt, path, strings.Join(problems, "; "))
}

// isCorrupt reports whether err is SQLite's SQLITE_CORRUPT ("database disk
// image is malformed") or SQLITE_NOTADB ("file is not a database"), also
// when only its text is left (golang-migrate flattens driver errors).
func isCorrupt(d Driver, err error) bool {
	if d.Classify(err)&driverkit.ClassCorrupt != 0 {
		return true
	}
	if d.Engine() != SQLite || err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "database disk image is malformed") || strings.Contains(msg, "file is not a database")
}

// namedCorrupt returns err wrapped in ErrDatabaseCorrupt naming the SQLite
// file at path when it says the file is corrupt and does not name it yet;
// err itself otherwise.
func namedCorrupt(d Driver, path string, err error) error {
	if err == nil || d.Engine() != SQLite || errors.Is(err, ErrDatabaseCorrupt) || !isCorrupt(d, err) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrDatabaseCorrupt, path, err)
}

// checkAtOpen runs quickCheck bounded by timeout (0: the default,
// negative: not checked); one cut short by the timeout is logged and the
// store opens.
func checkAtOpen(ctx context.Context, d Driver, db *sql.DB, path string, timeout time.Duration, logger *slog.Logger) error {
	switch {
	case timeout < 0:
		return nil
	case timeout == 0:
		timeout = defaultIntegrityTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := quickCheck(cctx, d, db, path)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		var size int64
		if fi, serr := os.Stat(path); serr == nil {
			size = fi.Size()
		}
		logger.Warn("integrity check of the database cut short: not checked at start; readiness checks it in the background",
			slog.String("file", path), slog.Int64("bytes", size), slog.Duration("after", time.Since(start)))
		return nil
	}
	return err
}

// integrity is a store's cached integrity state (SQLite files only).
type integrity struct {
	path    string
	timeout time.Duration
	every   time.Duration

	corrupt atomic.Pointer[error] // sticky: set once the file is known corrupt
	checked atomic.Int64          // wall-clock UnixNano of the last finished check
	running atomic.Bool
	wg      sync.WaitGroup
	stop    context.CancelFunc
	ctx     context.Context
}

// corruptErr returns the store's sticky corruption error, nil while none
// was seen.
func (s *Store) corruptErr() error {
	if s.integrity == nil {
		return nil
	}
	if p := s.integrity.corrupt.Load(); p != nil {
		return *p
	}
	return nil
}

// noteCorrupt makes err sticky when it says the file is corrupt, and
// returns it.
func (s *Store) noteCorrupt(err error) error {
	if s.integrity == nil {
		return err
	}
	if err = namedCorrupt(s.driver, s.integrity.path, err); !errors.Is(err, ErrDatabaseCorrupt) {
		return err
	}
	if s.integrity.corrupt.CompareAndSwap(nil, &err) {
		s.logger.Error("THE DATABASE FILE IS CORRUPT: refusing every decision and record until balde is restarted on a sound file",
			slog.String("file", s.integrity.path), slog.Any("error", err))
	}
	return err
}

// CheckIntegrity runs PRAGMA quick_check on the store's SQLite file until
// ctx ends (nil on PostgreSQL and on a store of OpenDB). It returns an
// error wrapping ErrDatabaseCorrupt (and throttle.ErrStoreUnavailable) when
// the file fails it, after which the store refuses every decision, and
// ctx's error when it was cut short. It reads the whole file
// (docs/RELIABILITY.md).
func (s *Store) CheckIntegrity(ctx context.Context) error {
	if s.integrity == nil {
		return nil
	}
	if err := s.corruptErr(); err != nil {
		return formatError("check integrity", err)
	}
	err := quickCheck(ctx, s.driver, s.read.DB, s.integrity.path)
	if err == nil {
		s.integrity.checked.Store(time.Now().UnixNano())
	}
	return formatError("check integrity", s.noteCorrupt(err))
}

// integrityDue starts a background quick_check when the last one is older
// than the store's interval and none is running (see corruptErr).
func (s *Store) integrityDue() {
	in := s.integrity
	if in == nil || in.every <= 0 || time.Since(time.Unix(0, in.checked.Load())) < in.every {
		return
	}
	if !in.running.CompareAndSwap(false, true) {
		return
	}
	in.wg.Go(func() {
		defer in.running.Store(false)
		ctx, cancel := context.WithTimeout(in.ctx, in.timeout)
		defer cancel()
		err := s.CheckIntegrity(ctx)
		if err != nil && !errors.Is(err, ErrDatabaseCorrupt) && in.ctx.Err() == nil {
			s.logger.Warn("background integrity check of the database did not finish", slog.String("file", in.path), slog.Any("error", err))
			in.checked.Store(time.Now().UnixNano()) // not again at every probe
		}
	})
}

// newIntegrity returns the integrity state of a SQLite file at path.
func newIntegrity(path string, opts Options) *integrity {
	// A negative timeout skips only the check at open.
	in := &integrity{path: path, timeout: cmp.Or(max(opts.IntegrityTimeout, 0), defaultIntegrityTimeout),
		every: cmp.Or(opts.IntegrityEvery, DefaultIntegrityEvery)}
	in.ctx, in.stop = context.WithCancel(context.Background())
	in.checked.Store(time.Now().UnixNano())
	return in
}

// close stops a background check and waits for it.
func (in *integrity) close() {
	if in == nil {
		return
	}
	in.stop()
	in.wg.Wait()
}

// createSQLite creates a new balde database at path, migrated to the
// latest version, so that no process ever sees a partial one: it is built
// at path+".new", synced and linked to path, which must not exist. A
// process killed at any instant leaves no file at path or a complete
// database. The caller holds the migration lock (lockSQLite).
func createSQLite(ctx context.Context, d Driver, path, driverDSN string) error {
	tmp := path + ".new"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	dsn := "file:" + tmp + strings.TrimPrefix(driverDSN, "file:"+path)
	db, err := sql.Open(d.SQLName(), dsn)
	if err != nil {
		return err
	}
	var m *migrations.Migrator
	if err = db.PingContext(ctx); err == nil {
		m, err = migrations.New(db, d)
	}
	if err != nil {
		db.Close()
		return err
	}
	if err := errors.Join(m.Up(), m.Close()); err != nil {
		return err
	}
	// Closing the last connection checkpointed the WAL into the file and
	// removed it; a WAL left behind would hold part of the schema.
	if fi, err := os.Stat(tmp + "-wal"); err == nil && fi.Size() > 0 {
		return fmt.Errorf("create %s: the new database's WAL was not checkpointed", path)
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	_ = os.Remove(tmp + "-shm")
	return syncFile(filepath.Dir(path))
}

// syncFile fsyncs a file or a directory.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
