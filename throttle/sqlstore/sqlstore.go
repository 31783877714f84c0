// Package sqlstore is the throttle.Store of balde on SQL: SQLite
// (modernc.org/sqlite, pure Go, the embedded default) and PostgreSQL (pgx).
// It imports neither driver: the caller chooses the engine's package, and
// links only that one (see Driver):
//
//	s, err := sqlitedriver.Open(ctx, "sqlite://balde.db", sqlstore.Options{Migrate: true})
//	s, err := pgxdriver.Open(ctx, "postgres://...", sqlstore.Options{Migrate: true})
//
// Every Update is one transaction. On SQLite it takes the write lock at
// BEGIN (BEGIN IMMEDIATE) and a process writes through one connection, so
// processes on one file serialize on the lock; on PostgreSQL the buckets
// are locked FOR UPDATE in key order, and a transaction that loses a race
// to create a bucket is retried from the start.
//
// The SQL that differs between the engines (how rows are locked and written
// in bulk) is in sqlite.go and postgres.go; everything else is shared.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// Options configure Open. Driver is required; the zero value of the rest
// is usable.
type Options struct {
	// Driver is the engine's (DriverOf, or set by the drivers' Open and
	// OpenDB); it must be the engine the DSN names.
	Driver Driver
	// Clock is read once per transaction, after its locks are taken.
	// Default throttle.SystemClock.
	Clock throttle.Clock
	// Migrate applies pending migrations before the store opens.
	Migrate bool
	// MaxConns bounds PostgreSQL connections (default 16). SQLite always
	// writes through one connection and reads through up to MaxConns.
	MaxConns int
	// Logger receives the store's warnings (retries, integrity checks,
	// checkpoints). Nil discards them (slog.Default() is never written to).
	Logger *slog.Logger
	// IntegrityTimeout bounds SQLite's PRAGMA quick_check at open (and in
	// Migrate) and in readiness's background checks; default
	// DefaultIntegrityTimeout, negative: no check at open. A file that fails
	// it is refused (ErrDatabaseCorrupt); a check cut short is logged.
	IntegrityTimeout time.Duration
	// IntegrityEvery is how often readiness (CheckWrite) has the check run
	// again, in the background; default DefaultIntegrityEvery, negative:
	// never.
	IntegrityEvery time.Duration
	// CheckpointEvery and WALLimit tune the background checkpoints of a
	// SQLite file opened by Open (checkpoint.go): a PASSIVE one every
	// CheckpointEvery (default 20 ms), the WAL started again in place at
	// half of WALLimit bytes (default 64 MiB), a TRUNCATE one past it. A DSN that sets wal_autocheckpoint
	// keeps SQLite's own checkpoints instead.
	CheckpointEvery time.Duration
	WALLimit        int64
}

// Store is a throttle.Store and an inspect.Store on SQLite or PostgreSQL. Safe for concurrent use.
type Store struct {
	engine      Engine
	driver      Driver
	write       *sqlx.DB // SQLite: one connection, BEGIN IMMEDIATE; PostgreSQL: the pool
	read        *sqlx.DB // SQLite: a read-only pool; PostgreSQL: the same pool
	rw          rowWriter
	now         throttle.Clock
	maxConns    int      // the size of the pool Open made (flushIdle); 0 for OpenDB's
	identity    Identity // which database Open opened (identity.go)
	logger      *slog.Logger
	shared      bool          // OpenDB's: the pool is the application's
	integrity   *integrity    // a SQLite file's (integrity.go); nil on PostgreSQL and OpenDB's
	checkpoints *checkpointer // a SQLite file's (checkpoint.go), when the store takes them over
	// fast is NonDurable's row cache on PostgreSQL (optimistic.go).
	fast atomic.Pointer[rowCache]

	mu          sync.RWMutex
	policyID    map[string]int64
	policyNames map[int64]string
}

var (
	_ throttle.Store = (*Store)(nil)
	_ inspect.Store  = (*Store)(nil)
)

// rowWriter is what differs between the engines inside an Update: loading
// rows with their locks, and writing a transaction's changes back.
type rowWriter interface {
	// loadBuckets locks and returns the rows of keys that exist.
	loadBuckets(ctx context.Context, tx *sql.Tx, keys []rowKey) ([]bucketRow, error)
	// headMinutes returns the minute of each row's latest ledger row that
	// aggregates takes, asked only when the transaction aggregates takes.
	headMinutes(ctx context.Context, tx *sql.Tx, rows []bucketRow) (map[rowKey]int64, error)
	// loadCredits returns the refs that are already in the ledger.
	loadCredits(ctx context.Context, tx *sql.Tx, refs []creditKey) ([]creditKey, error)
	// write applies a transaction's changes (see writeSet).
	write(ctx context.Context, tx *sql.Tx, w *writeSet) error
	close() error
}

// writeSet is what a transaction writes back; heads holds each bucket's
// latest ledger row before it, and merges the aggregated take rows to add
// to their bucket's head row (see link).
type writeSet struct {
	inserts, updates []bucketRow
	deletes          []rowKey
	ledger           []ledgerRow
	merges           []ledgerRow
	heads            map[rowKey]sql.NullInt64
}

// Open connects to the database named by dsn (see ParseDSN) through
// opts.Driver, optionally applying pending migrations first.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	engine, driverDSN, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	d := opts.Driver
	if err := checkDriver("open", d, engine); err != nil {
		return nil, err
	}
	if opts.Migrate && !postgresCurrent(ctx, d, driverDSN, opts.Logger) {
		// Up is idempotent: retried after a transient error (retry.go).
		if err := retryOpen(ctx, "migrate up", opts, func() error { return migrate(ctx, dsn, opts, opts.up) }); err != nil {
			return nil, err
		}
	}
	s := newStore(engine, opts)
	path := SQLitePath(driverDSN)
	// fail closes s; every refusal names the file: SQLite may first find
	// it corrupt anywhere (a pragma, the ping, the first read).
	fail := func(op string, err error) (*Store, error) {
		s.Close()
		return nil, formatError(op, namedCorrupt(d, path, err))
	}
	// PostgreSQL reads and writes through one pool, SQLite reads through
	// a read-only one.
	s.maxConns = cmp.Or(max(opts.MaxConns, 0), 16)
	readDSN := driverDSN
	if engine == SQLite {
		// The file must exist (Migrate creates it): a connection opened
		// again after the file was deleted must fail, not create an empty
		// database in its place (identity.go).
		if !strings.Contains(driverDSN, "mode=") {
			driverDSN += "&mode=rw"
		}
		if err := checkSQLiteFile(path); errors.Is(err, fs.ErrNotExist) {
			return fail("open (is the database migrated?)", err)
		} else if err != nil {
			return fail("open", err)
		}
		writerDSN, own := ownCheckpoints(dsn, driverDSN+"&_txlock=immediate")
		w, err := sql.Open(d.SQLName(), writerDSN)
		if err != nil {
			return fail("open", err)
		}
		w.SetMaxOpenConns(1)
		w.SetConnMaxIdleTime(0)
		s.write = sqlx.NewDb(w, d.SQLName())
		if own {
			if s.checkpoints, err = startCheckpointer(d, driverDSN, w, opts, s.logger); err != nil {
				return fail("open", err)
			}
		}
		readDSN = driverDSN + "&_pragma=query_only(1)"
	}
	r, err := sql.Open(d.SQLName(), readDSN)
	if err != nil {
		return fail("open", err)
	}
	r.SetMaxOpenConns(s.maxConns)
	r.SetMaxIdleConns(s.maxConns)
	s.read = sqlx.NewDb(r, d.SQLName())
	if s.write == nil {
		s.write = s.read
	}
	// The first round trips are retried like any other (retry.go).
	if err := s.withRetry(ctx, "open", func() error { return s.write.PingContext(ctx) }); err != nil {
		return fail("open", err)
	}
	s.rw = postgresWriter{}
	if engine == SQLite {
		if !opts.Migrate { // migrate checked it already
			if err := checkAtOpen(ctx, d, s.read.DB, path, opts.IntegrityTimeout, s.logger); err != nil {
				return fail("open", err)
			}
		}
		s.integrity = newIntegrity(path, opts)
		// Assigned only on success: a nil *sqliteWriter in the interface
		// would not be nil for Close.
		w, err := newSQLiteWriter(ctx, s.write.DB)
		if err != nil {
			return fail("open (is the database migrated?)", err)
		}
		s.rw = w
	}
	if err := s.withRetry(ctx, "open: identity", func() error { return s.loadIdentity(ctx, driverDSN) }); err != nil {
		return fail("open: identity", err)
	}
	return s, nil
}

// Now reads the store's clock: the instant a transaction starting now would
// run at. Give it to the Limiter and to anything deciding with the store.
func (s *Store) Now() time.Time { return s.now() }

// SchemaVersion returns the migration version the database is at and
// whether the last migration failed half-way (dirty); 0 for a database
// never migrated.
func (s *Store) SchemaVersion(ctx context.Context) (version uint, dirty bool, err error) {
	v, dirty, err := migrations.ReadVersion(ctx, s.read, migrations.VersionTable)
	if err != nil {
		return 0, false, formatError("schema version", err)
	}
	return uint(v), dirty, nil
}

// Engine tells which database the store is on.
func (s *Store) Engine() Engine { return s.engine }

// DB returns the store's write handle, for packages that keep their own
// tables in the same database (their migrations live in migrations/).
func (s *Store) DB() *sqlx.DB { return s.write }

// ReadDB returns a handle for reads only (on SQLite a read-only pool that
// does not wait behind writers).
func (s *Store) ReadDB() *sqlx.DB { return s.read }

// Close closes the connections; on a store of OpenDB, only what the store
// prepared (the application's pool stays open).
func (s *Store) Close() error {
	s.integrity.close()
	errs := []error{s.checkpoints.close()}
	if s.rw != nil {
		errs = append(errs, s.rw.close())
	}
	if s.read != nil && s.read != s.write && !s.shared {
		errs = append(errs, s.read.Close())
	}
	if s.write != nil && !s.shared {
		errs = append(errs, s.write.Close())
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers (after transient errors, again
// with backoff).
func (s *Store) Ping(ctx context.Context) error {
	return formatError("ping", s.withRetry(ctx, "ping", func() error { return s.read.PingContext(ctx) }))
}

// Migrate opens a dedicated connection to dsn through d and runs fn with a
// Migrator (golang-migrate closes the connection it is given).
//
// SQLite: under the migration lock, a missing file is created whole (see
// createSQLite: no process ever sees a partial or empty one), an empty
// (0-byte) file is refused with ErrDatabaseRefused, and an existing file
// must pass PRAGMA quick_check (bounded by DefaultIntegrityTimeout) or is
// refused with ErrDatabaseCorrupt. The errors name the file and wrap
// throttle.ErrStoreUnavailable.
func Migrate(ctx context.Context, dsn string, d Driver, fn func(*migrations.Migrator) error) error {
	return migrate(ctx, dsn, Options{Driver: d}, fn)
}

// migrate is Migrate with Open's options (the integrity check's bound, the
// logger).
func migrate(ctx context.Context, dsn string, opts Options, fn func(*migrations.Migrator) error) (err error) {
	engine, driverDSN, err := ParseDSN(dsn)
	if err != nil {
		return err
	}
	d := opts.Driver
	if err := checkDriver("migrate", d, engine); err != nil {
		return err
	}
	path := SQLitePath(driverDSN)
	formatError := func(op string, err error) error { return formatError(op, namedCorrupt(d, path, err)) }
	inMemory := path == ":memory:" || strings.Contains(driverDSN, "mode=memory")
	check := false // a SQLite file that existed: quick_check it
	if engine == Postgres {
		if driverDSN, err = postgresDSN(dsn, "0"); err != nil {
			return err
		}
	} else {
		if !inMemory {
			// Other processes migrating the same file wait (lockSQLite).
			release, lockErr := lockSQLite(ctx, path)
			if lockErr != nil {
				return formatError("migrate", lockErr)
			}
			defer func() { release(err) }()
		}
		switch err := checkSQLiteFile(path); {
		case errors.Is(err, fs.ErrNotExist) && !inMemory:
			if err := createSQLite(ctx, d, path, driverDSN); err != nil {
				return formatError("migrate: create "+path, err)
			}
		case err == nil:
			check = !inMemory
		case !errors.Is(err, fs.ErrNotExist):
			return formatError("migrate", err)
		}
		driverDSN += "&_txlock=immediate"
	}
	db, err := sql.Open(d.SQLName(), driverDSN)
	if err != nil {
		return formatError("migrate", err)
	}
	err = db.PingContext(ctx)
	if err == nil && check {
		err = checkAtOpen(ctx, d, db, path, opts.IntegrityTimeout, cmp.Or(opts.Logger, discard))
	}
	var m *migrations.Migrator
	if err == nil {
		m, err = migrations.New(db, d)
	}
	if err != nil {
		db.Close()
		return formatError("migrate", err)
	}
	defer m.Close()
	if err := fn(m); err != nil {
		if engine == SQLite && !errors.Is(err, ErrDatabaseCorrupt) && isCorrupt(d, err) {
			return formatError("migrate", err)
		}
		return err
	}
	return nil
}

// postgresCurrent reports whether a PostgreSQL database is at the latest
// migration, clean: then Open skips golang-migrate's dozen round trips for
// one retried query. Any doubt answers false.
func postgresCurrent(ctx context.Context, d Driver, driverDSN string, logger *slog.Logger) bool {
	if d.Engine() != Postgres {
		return false
	}
	latest, err := migrations.Latest(Postgres)
	if err != nil {
		return false
	}
	db, err := sql.Open(d.SQLName(), driverDSN)
	if err != nil {
		return false
	}
	defer db.Close()
	var version int64
	var dirty bool
	err = retryOpen(ctx, "schema version", Options{Driver: d, Logger: logger}, func() (err error) {
		version, dirty, err = migrations.ReadVersion(ctx, db, migrations.VersionTable)
		return err
	})
	return err == nil && version == int64(latest) && !dirty
}

// discard is the logger of a store given none.
var discard = slog.New(slog.DiscardHandler)

// newStore is a store of opts on engine, before its pools.
func newStore(engine Engine, opts Options) *Store {
	s := &Store{engine: engine, driver: opts.Driver, now: opts.Clock, logger: cmp.Or(opts.Logger, discard),
		policyID: make(map[string]int64), policyNames: make(map[int64]string)}
	if s.now == nil {
		s.now = throttle.SystemClock
	}
	return s
}

// up runs m's pending migrations, logging to o.Logger when set.
func (o Options) up(m *migrations.Migrator) error {
	if o.Logger != nil {
		m.Logger = o.Logger
	}
	return m.Up()
}

// retryOpen runs fn, a step of opening a store, again after transient
// errors (retrier.again), logging to opts.Logger.
func retryOpen(ctx context.Context, op string, opts Options, fn func() error) error {
	// A store without pools: no pool to flush, no file found corrupt.
	return newStore("", opts).withRetry(ctx, op, fn)
}

// rowKey is a Key as stored: the policy name interned.
type rowKey struct {
	policyID   int64
	env        string
	identifier string
}

type creditKey struct {
	rowKey
	ref string
}

// applyError marks an error returned by the apply function, which Update
// returns unchanged.
type applyError struct{ err error }

func (e applyError) Error() string { return e.err.Error() }

// Update implements throttle.Store.
func (s *Store) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	return s.updateRetried(ctx, keys, credits, apply, true)
}

// NonDurable returns s as a throttle.Store whose write transactions do not
// wait for their commit to reach the disk: on PostgreSQL each runs with
// synchronous_commit off (SET LOCAL), so a crash of the server may lose the
// last fraction of a second of whole commits, and batches of rows this
// process wrote last are written optimistically in one round trip
// (optimistic.go, decision 0116). On SQLite it is s itself (decision 0008).
// Exactness is the same. It is for decisions whose loss costs nothing, the
// inbound limiter's (docs/decisions/0111-non-durable-inbound-commits.md).
func (s *Store) NonDurable() throttle.Store {
	if s.engine != Postgres {
		return s
	}
	s.fast.CompareAndSwap(nil, newRowCache(optimisticRows))
	return nonDurable{s}
}

// nonDurable is Store.NonDurable on PostgreSQL.
type nonDurable struct{ *Store }

func (n nonDurable) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	return n.updateRetried(ctx, keys, credits, apply, false)
}

// asyncCommitSQL makes the transaction it runs in commit without waiting
// for its WAL to be flushed (PostgreSQL).
const asyncCommitSQL = "SET LOCAL synchronous_commit TO OFF"

// updateRetried is Update, durable or not (see NonDurable).
func (s *Store) updateRetried(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error, durable bool) error {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, throttle.Key.Compare)
	keys = slices.Compact(keys)
	names := make([]string, 0, len(keys)+len(credits))
	for _, k := range keys {
		names = append(names, k.Policy)
	}
	for _, c := range credits {
		names = append(names, c.Key.Policy)
	}
	// Registering policy names is idempotent: retried like a read.
	if err := s.withRetry(ctx, "ensure policies", func() error { return s.ensurePolicies(ctx, names) }); err != nil {
		return err
	}
	transient := newRetrier(s, "update")
	for attempt := 1; ; attempt++ {
		err := s.noteCorrupt(s.update(ctx, keys, credits, apply, durable))
		var ae applyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ae):
			return ae.err
		case errors.Is(err, ErrCommitInDoubt):
			// Never re-run: it may have been applied (decision 0020).
		case s.driver.Classify(err)&driverkit.ClassLostRace != 0 && attempt < maxAttempts && ctx.Err() == nil:
			// A serialization failure, a deadlock, or a unique violation
			// from two transactions inserting the same new bucket.
			s.logger.Debug("retrying a transaction that lost a race", slog.Int("attempt", attempt), slog.Any("error", err))
			continue
		case transient.again(ctx, err):
			// A broken connection, an administrator's shutdown, SQLITE_BUSY
			// past the busy timeout: the transaction did not commit.
			continue
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
			s.driver.Classify(err)&(driverkit.ClassTimeout|driverkit.ClassBusy) != 0 {
			// A wait the engine bounds and gave up (57014, 55P03, SQLite's
			// write lock still busy once the retries' time was spent):
			// overloaded or locked, not unreachable (docs/decisions/0220).
			err = fmt.Errorf("%w: %w", throttle.ErrStoreTimeout, err)
		}
		return formatError("update", err)
	}
}

// maxAttempts bounds the retries of a PostgreSQL transaction that lost a race.
const maxAttempts = 20

func (s *Store) update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error, durable bool) error {
	if p, ok := s.driver.(driverkit.Pipeliner); ok && s.engine == Postgres {
		// Two round trips instead of four when the driver pipelines (pgx
		// does, on its own connections).
		if err := s.updatePipelined(ctx, p, keys, credits, apply, durable); !errors.Is(err, driverkit.ErrNoPipeline) {
			return err
		}
	}
	// SQLite's BEGIN IMMEDIATE (the DSN's _txlock) or PostgreSQL's
	// loadBuckets takes the locks; the clock is read once they are held.
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if !durable && s.engine == Postgres {
		if _, err := tx.ExecContext(ctx, asyncCommitSQL); err != nil {
			return err
		}
	}

	byRow, rowKeys, refs := s.rowKeys(keys, credits)
	rows, err := s.rw.loadBuckets(ctx, tx, rowKeys)
	if err != nil {
		return fmt.Errorf("load buckets: %w", err)
	}
	var found []creditKey
	if len(refs) > 0 {
		if found, err = s.rw.loadCredits(ctx, tx, refs); err != nil {
			return fmt.Errorf("load credits: %w", err)
		}
	}
	ws, err := s.decide(rows, found, byRow, apply, func() (map[rowKey]int64, error) { return s.rw.headMinutes(ctx, tx, rows) })
	if err != nil {
		return err
	}
	if err := s.rw.write(ctx, tx, ws); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return s.CommitError(tx.Commit())
}

// rowKeys interns keys and credits' keys, and maps each back to its Key.
func (s *Store) rowKeys(keys []throttle.Key, credits []throttle.CreditRef) (map[rowKey]throttle.Key, []rowKey, []creditKey) {
	byRow := make(map[rowKey]throttle.Key, len(keys)+len(credits))
	rowKeys := make([]rowKey, len(keys))
	for i, k := range keys {
		rowKeys[i] = s.rowKey(k)
		byRow[rowKeys[i]] = k
	}
	refs := make([]creditKey, len(credits))
	for i, c := range credits {
		refs[i] = creditKey{rowKey: s.rowKey(c.Key), ref: c.Ref}
		byRow[refs[i].rowKey] = c.Key
	}
	return byRow, rowKeys, refs
}

// decide reads the clock (the locks are held), builds the Tx of the loaded
// rows and credits, with each bucket's latest ledger row (head), runs apply
// on it and returns what it writes back. The aggregated take rows of the
// minute a bucket's head row already aggregates are added to that row
// (merges); headMinutes, asked only when the transaction aggregates takes,
// returns those minutes.
func (s *Store) decide(rows []bucketRow, found []creditKey, byRow map[rowKey]throttle.Key, apply func(*throttle.Tx) error,
	headMinutes func() (map[rowKey]int64, error)) (*writeSet, error) {
	t := throttle.NewTx(s.now())
	ws := &writeSet{heads: make(map[rowKey]sql.NullInt64, len(rows))}
	for _, r := range rows {
		b, err := r.bucket(byRow[r.key])
		if err != nil {
			return nil, err
		}
		t.Load(b)
		ws.heads[r.key] = r.lastEntry
	}
	for _, f := range found {
		t.LoadCredit(throttle.CreditRef{Key: byRow[f.rowKey], Ref: f.ref})
	}
	if err := apply(t); err != nil {
		return nil, applyError{err}
	}
	entries, aggregated := t.LedgerRows()
	ws.ledger = s.toLedgerRows(entries, false)
	if len(aggregated) > 0 {
		headMinute, err := headMinutes()
		if err != nil {
			return nil, fmt.Errorf("load head rows: %w", err)
		}
		for _, r := range s.toLedgerRows(aggregated, true) {
			if m, ok := headMinute[r.key]; ok && m == r.at {
				r.id = ws.heads[r.key].Int64
				ws.merges = append(ws.merges, r)
			} else {
				ws.ledger = append(ws.ledger, r)
			}
		}
	}
	for _, w := range t.BucketWrites() {
		row := s.toBucketRow(w.Bucket)
		row.lastEntry = ws.heads[row.key] // the writer advances it past new rows
		switch {
		case w.Delete:
			ws.deletes = append(ws.deletes, row.key)
		case w.Insert:
			ws.inserts = append(ws.inserts, row)
		default:
			ws.updates = append(ws.updates, row)
		}
	}
	return ws, nil
}

// link gives rows the ids, in order, links each to the previous row of its
// bucket and advances heads to each bucket's latest row.
func (w *writeSet) link(ids []int64) {
	for i := range w.ledger {
		r := &w.ledger[i]
		r.id = ids[i]
		r.prev = w.heads[r.key]
		w.heads[r.key] = sql.NullInt64{Int64: ids[i], Valid: true}
	}
	for _, rows := range [][]bucketRow{w.inserts, w.updates} {
		for i := range rows {
			rows[i].lastEntry = w.heads[rows[i].key]
		}
	}
}

// ensurePolicies interns policy names, each in its own small transaction
// the first time this process sees it.
func (s *Store) ensurePolicies(ctx context.Context, names []string) error {
	for _, name := range names {
		s.mu.RLock()
		_, ok := s.policyID[name]
		s.mu.RUnlock()
		if ok {
			continue
		}
		if _, err := s.write.ExecContext(ctx, s.write.Rebind(`INSERT INTO balde_policies (name) VALUES (?) ON CONFLICT (name) DO NOTHING`), name); err != nil {
			return formatError("intern policy "+name, err)
		}
		if err := s.loadPolicies(ctx, s.write); err != nil {
			return err
		}
	}
	return nil
}

// loadPolicies refreshes the cache of interned policy names.
func (s *Store) loadPolicies(ctx context.Context, db *sqlx.DB) error {
	var rows []struct {
		ID   int64  `db:"id"`
		Name string `db:"name"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT id, name FROM balde_policies`); err != nil {
		return formatError("load policies", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		s.policyID[r.Name] = r.ID
		s.policyNames[r.ID] = r.Name
	}
	return nil
}

// lookupPolicy returns the id of an interned policy name, refreshing the
// cache once (another process may have interned it); ok is false for a name
// never stored.
func (s *Store) lookupPolicy(ctx context.Context, name string) (int64, bool, error) {
	return interned(ctx, s, s.policyID, name)
}

// nameOf returns the name of an interned policy id, refreshing the cache
// once when the id is new to this process.
func (s *Store) nameOf(ctx context.Context, id int64) (string, error) {
	name, ok, err := interned(ctx, s, s.policyNames, id)
	if err == nil && !ok {
		err = formatError("load policies", fmt.Errorf("unknown policy id %d", id))
	}
	return name, err
}

// interned reads k in m, one of the policy caches, under s.mu, refreshing
// the caches once when k is not there.
func interned[K comparable, V any](ctx context.Context, s *Store, m map[K]V, k K) (v V, ok bool, err error) {
	for refreshed := false; ; refreshed = true {
		s.mu.RLock()
		v, ok = m[k]
		s.mu.RUnlock()
		if ok || refreshed {
			return v, ok, nil
		}
		if err := s.loadPolicies(ctx, s.read); err != nil {
			return v, false, err
		}
	}
}

func (s *Store) rowKey(k throttle.Key) rowKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return rowKey{policyID: s.policyID[k.Policy], env: k.Env, identifier: k.Identifier}
}
