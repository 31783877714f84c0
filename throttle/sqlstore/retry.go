package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/balde-throttle/balde/internal/storebound"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
)

// ErrCommitInDoubt means a transaction's COMMIT was sent but its answer was
// lost: it may or may not have been applied, and the store never re-runs it
// (docs/decisions/0020). It comes wrapped with throttle.ErrStoreUnavailable
// and wraps throttle.ErrOutcomeUnknown, for packages that must not import
// sqlstore.
var ErrCommitInDoubt = fmt.Errorf("sqlstore: commit outcome unknown: %w", throttle.ErrOutcomeUnknown)

// Transient-error retries: the first after transientBackoff, each next one
// after twice the previous (±50 % jitter, capped at transientMaxBackoff),
// until transientMaxAttempts attempts, transientBudget of waiting (longer
// than a 3 s storm of terminated sessions or a PostgreSQL restart) or
// transientElapsedBudget since the first attempt (bounding a call facing a
// stopped SQLite lock holder: each attempt waits out busy_timeout),
// whichever comes first, never past the caller's context (decision 0020).
const (
	transientMaxAttempts = 12
	transientBackoff     = 20 * time.Millisecond
	transientMaxBackoff  = 800 * time.Millisecond
	transientBudget      = 4500 * time.Millisecond

	transientElapsedBudget = 5 * time.Second
)

// transient reports whether err is a failure of the database or of the
// connection that is likely to pass and after which the statement did NOT
// take effect: what d classifies as ClassTransient, or a connection reset,
// refused or closed. Errors of a COMMIT are classified by the caller (see
// ErrCommitInDoubt).
func transient(d Driver, err error) bool {
	if err == nil || errors.Is(err, ErrCommitInDoubt) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	c := d.Classify(err)
	if c&driverkit.ClassServer != 0 {
		return c&driverkit.ClassTransient != 0
	}
	var ne net.Error
	switch {
	case c&driverkit.ClassTransient != 0,
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return true
	}
	// pgx reports a connection it closed after a fatal error as "conn
	// closed"; golang-migrate flattens driver errors into its own text.
	msg := err.Error()
	for _, s := range []string{"conn closed", "driver: bad connection", "(SQLSTATE 57P01)", "(SQLSTATE 57P02)", "(SQLSTATE 57P03)", "(SQLSTATE 08"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// brokenConn reports whether err says the connection itself is gone, and
// likely the pool's idle ones with it.
func brokenConn(d Driver, err error) bool {
	if c := d.Classify(err); c&driverkit.ClassServer != 0 {
		return c&driverkit.ClassBrokenConn != 0
	}
	return transient(d, err)
}

// definiteCommitFailure reports whether a failed COMMIT certainly did not
// apply (ClassCommitFailed: a PostgreSQL rollback, any SQLite failure).
func definiteCommitFailure(d Driver, err error) bool {
	c := d.Classify(err)
	return c&driverkit.ClassServer != 0 && c&driverkit.ClassCommitFailed != 0
}

// backoff is the wait before retry number n (1 for the first).
func backoff(n int) time.Duration {
	d := transientBackoff << (n - 1)
	if d > transientMaxBackoff || d <= 0 {
		d = transientMaxBackoff
	}
	return d/2 + rand.N(d) // ±50 %
}

// retrier counts the transient failures of one operation and waits between
// its attempts.
type retrier struct {
	op      string
	s       *Store // its driver classifies errors, its logger logs retries
	attempt int
	waited  time.Duration
	start   time.Time // of the first attempt
}

// newRetrier returns the retrier of an operation of s starting now.
func newRetrier(s *Store, op string) retrier {
	return retrier{op: op, s: s, start: time.Now()}
}

// again reports whether the operation should run again after err, having
// waited the backoff: false when err is not transient, the attempts or the
// budget are spent, or ctx ends. After a broken connection it flushes the
// pool's idle connections first.
func (r *retrier) again(ctx context.Context, err error) bool {
	r.attempt++
	if !transient(r.s.driver, err) || r.attempt >= transientMaxAttempts || ctx.Err() != nil {
		return false
	}
	d := backoff(r.attempt)
	if r.waited+d > transientBudget || time.Since(r.start)+d > transientElapsedBudget {
		return false
	}
	if brokenConn(r.s.driver, err) {
		r.s.flushIdle()
	}
	r.s.logger.Warn("retrying after a transient store error", slog.String("op", r.op),
		slog.Int("attempt", r.attempt), slog.Duration("backoff", d), slog.Any("error", err))
	if throttle.SleepContext(ctx, d) != nil {
		return false
	}
	r.waited += d
	return true
}

// flushIdle closes the idle connections of the store's own PostgreSQL
// pool, all dead after a server restart or pg_terminate_backend.
func (s *Store) flushIdle() {
	if s.engine != Postgres || s.shared || s.maxConns == 0 {
		return // an application's pool (OpenDB) keeps its own settings
	}
	s.write.SetMaxIdleConns(0)
	s.write.SetMaxIdleConns(s.maxConns)
}

// CommitError returns the error of a transaction's COMMIT as Retry must see
// it: nil, or a commit that certainly did not apply (a PostgreSQL rollback,
// class 40, or any SQLite failure), as is, so that Retry may run the
// transaction again; anything else wrapped in ErrCommitInDoubt, which Retry
// never re-runs (decision 0020). For packages that run their own
// transactions on DB() inside Retry.
func (s *Store) CommitError(err error) error {
	if err == nil || definiteCommitFailure(s.driver, err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCommitInDoubt, err)
}

// withRetry runs fn, a read or a statement that takes effect only if it
// returns nil, again after transient errors (retrier.again), and returns
// fn's last error as is. A store that found its SQLite file corrupt runs
// nothing and returns that error, wrapped with throttle.ErrStoreUnavailable.
func (s *Store) withRetry(ctx context.Context, op string, fn func() error) error {
	if err := s.corruptErr(); err != nil {
		return formatError(op, err)
	}
	r := newRetrier(s, op)
	for {
		err := s.noteCorrupt(fn())
		if err == nil || !r.again(ctx, err) {
			return err
		}
	}
}

// Retry runs fn again after transient store errors, as the store's own
// reads and decisions are (about 4.5 s at most, never past ctx), for
// packages that query DB() or ReadDB() themselves. fn must be safe to run
// twice: a read, or a whole transaction whose COMMIT error goes through
// CommitError. It returns fn's last error unchanged; on a store that found
// its SQLite file corrupt it does not run fn and returns an error wrapping
// ErrDatabaseCorrupt and throttle.ErrStoreUnavailable. fn's time counts
// against ctx's request bound (internal/storebound): once spent, Retry
// fails with throttle.ErrStoreUnavailable.
func (s *Store) Retry(ctx context.Context, op string, fn func() error) error {
	exit := storebound.Enter(ctx)
	err := s.withRetry(ctx, op, fn)
	exit()
	if err != nil && storebound.Spent(ctx) {
		return formatError(op, storebound.ErrSpent)
	}
	return err
}
