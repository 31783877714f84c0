package sqlitedriver_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

// TestClassify: SQLite's own errors, as the database returns them, are
// the server's answer and a failed commit; busy is transient and busy,
// a file that is not a database is corrupt; other errors are not SQLite's.
func TestClassify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	open := func(t *testing.T, path string) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	}
	busy := func(t *testing.T) error {
		path := filepath.Join(dir, "busy.db")
		a, b := open(t, path), open(t, path)
		a.SetMaxOpenConns(1)
		b.SetMaxOpenConns(1)
		_, err := a.ExecContext(ctx, `BEGIN IMMEDIATE`)
		require.NoError(t, err)
		defer a.ExecContext(ctx, `ROLLBACK`)
		_, err = b.ExecContext(ctx, `BEGIN IMMEDIATE`)
		require.Error(t, err)
		return err
	}
	notADB := func(t *testing.T) error {
		path := filepath.Join(dir, "garbage.db")
		require.NoError(t, os.WriteFile(path, []byte("this is not a SQLite database, only text long enough....................................................................................."), 0o600))
		_, err := open(t, path).ExecContext(ctx, `SELECT * FROM sqlite_master`)
		require.Error(t, err)
		return err
	}
	syntax := func(t *testing.T) error {
		_, err := open(t, filepath.Join(dir, "syntax.db")).ExecContext(ctx, `SELEC 1`)
		require.Error(t, err)
		return err
	}
	const base = driverkit.ClassServer | driverkit.ClassCommitFailed
	for _, tc := range []struct {
		name string
		err  func(t *testing.T) error
		want driverkit.ErrorClass
	}{
		{"Busy", busy, base | driverkit.ClassTransient | driverkit.ClassBusy},
		{"NotADatabase", notADB, base | driverkit.ClassCorrupt},
		{"SyntaxError", syntax, base},
		{"NotSQLite", func(*testing.T) error { return errors.New("connection reset") }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sqlitedriver.Driver.Classify(tc.err(t)))
		})
	}
}
