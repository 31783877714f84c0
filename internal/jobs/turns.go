package jobs

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/balde-throttle/balde/internal/sqltime"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Turns share Run's periodic jobs among every process on the database, so
// that each runs once per period (docs/decisions/0171). A job's row in
// balde_job_turns holds lease_until, when its next turn is due: the
// processes race a compare-and-set on it, and the winner runs the job,
// extending its lease every half period, so that a process killed during a
// turn hands the next one on when the lease ends. A clock skew of s between
// machines shortens a period that changes hands by at most s.
type Turns struct {
	store  *sqlstore.Store
	log    *slog.Logger
	holder string // this process: host/pid/random
}

// NewTurns returns the turns of this process on store's database.
func NewTurns(store *sqlstore.Store, log *slog.Logger) *Turns {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Turns{store: store, log: log, holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))}
}

// Every runs fn at each of job's turns this process takes until ctx ends;
// a job's first turn is due one period after the first process looked. A
// turn that cannot be read or taken is logged and looked at a period later.
func (t *Turns) Every(ctx context.Context, job string, period time.Duration, fn func()) {
	for {
		wait, err := t.turn(ctx, job, period, fn)
		if err != nil && ctx.Err() == nil {
			t.log.Warn("the turn of a job could not be taken: trying again in one period", slog.String("job", job), slog.Any("error", err))
			wait = period
		}
		if wait <= 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if throttle.SleepContext(ctx, wait) != nil {
			return
		}
	}
}

// turn runs fn when job's turn is due and this process wins it, and
// returns how long to wait before looking again (0: look again now).
func (t *Turns) turn(ctx context.Context, job string, period time.Duration, fn func()) (time.Duration, error) {
	now := t.store.Now()
	due, err := t.due(ctx, job, now, period)
	if err != nil {
		return 0, err
	}
	if wait := time.Duration(due - sqltime.Nanos(now)); wait > 0 {
		return min(wait, period), nil // at most a period: another process may shorten it
	}
	won, err := t.take(ctx, job, due, now, period)
	if err != nil || !won {
		return 0, err // lost: the winner's lease is the next due
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { t.extendWhile(ctx, done, job, now, period) })
	fn()
	close(done)
	wg.Wait()
	return 0, nil
}

// due returns when job's next turn is due (nanoseconds since the epoch),
// creating its row, due one period from now, when there is none.
func (t *Turns) due(ctx context.Context, job string, now time.Time, period time.Duration) (int64, error) {
	const get = `SELECT lease_until FROM balde_job_turns WHERE job = ?`
	db, read := t.store.DB(), t.store.ReadDB()
	var until int64
	err := t.store.Retry(ctx, "read a job's turn", func() error {
		err := read.GetContext(ctx, &until, read.Rebind(get), job)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := db.ExecContext(ctx, db.Rebind(`
			INSERT INTO balde_job_turns (job, holder, last_run, lease_until) VALUES (?, '', 0, ?)
			ON CONFLICT (job) DO NOTHING`), job, sqltime.Nanos(now.Add(period))); err != nil {
			return err
		}
		return db.GetContext(ctx, &until, db.Rebind(get), job)
	})
	return until, err
}

// take takes job's turn that fell due at due, with a compare-and-set on
// lease_until; false when another process took it first.
func (t *Turns) take(ctx context.Context, job string, due int64, now time.Time, period time.Duration) (bool, error) {
	db := t.store.DB()
	var n int64
	err := t.store.Retry(ctx, "take a job's turn", func() error {
		res, err := db.ExecContext(ctx, db.Rebind(`
			UPDATE balde_job_turns SET holder = ?, last_run = ?, lease_until = ?
			WHERE job = ? AND lease_until = ?`),
			t.holder, sqltime.Nanos(now), sqltime.Nanos(now.Add(period)), job, due)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// extendWhile extends this process's lease on job's turn taken at taken
// to one period from now, every half period until done is closed.
func (t *Turns) extendWhile(ctx context.Context, done <-chan struct{}, job string, taken time.Time, period time.Duration) {
	tk := time.NewTicker(period / 2)
	defer tk.Stop()
	db := t.store.DB()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		err := t.store.Retry(ctx, "extend a job's turn", func() error {
			_, err := db.ExecContext(ctx, db.Rebind(`
				UPDATE balde_job_turns SET lease_until = ?
				WHERE job = ? AND holder = ? AND last_run = ?`),
				sqltime.Nanos(t.store.Now().Add(period)), job, t.holder, sqltime.Nanos(taken))
			return err
		})
		if err != nil && ctx.Err() == nil {
			t.log.Warn("a long turn of a job could not be extended: another process may start the next one", slog.String("job", job), slog.Any("error", err))
		}
	}
}
