package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// migrateKillTrials is how many times TestKillDuringMigrateUp kills
// "migrate up" per engine: 10 in make test, 100 under make reliability
// (BALDE_MIGRATE_KILLS overrides).
func migrateKillTrials(t *testing.T) int {
	if v := os.Getenv("BALDE_MIGRATE_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	if reliabilityLong() {
		return 100
	}
	return 10
}

// TestKillDuringMigrateUp starts "balde migrate up" on a new database (a
// new SQLite path, a new PostgreSQL schema) and kills it with SIGKILL at a
// random instant between its start and the time a whole run takes, then
// checks that the database is not left unopenable: "migrate up" completes
// it and it is at the latest version, not dirty. Issue 23: 3 of 40 SQLite
// and 2 of 39 PostgreSQL first starts killed in their first 50 ms were left
// "Dirty database version N", refused by every command until a migrate
// force, and a 0-byte SQLite file would now be refused as well.
func TestKillDuringMigrateUp(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		trials := migrateKillTrials(t)
		latest, err := migrations.Latest(engine)
		require.NoError(t, err)
		newDB := func(i int) string {
			if engine == sqlstore.SQLite {
				return "sqlite://" + filepath.Join(t.TempDir(), fmt.Sprintf("k%03d.db", i))
			}
			return sqlstoretest.PostgresSchema(t)
		}
		runChild := func(db string, killAfter time.Duration) (killed bool, took time.Duration) {
			child := childCommand(t, time.Time{}, "migrate", "--db", db, "up")
			var out, errOut strings.Builder
			child.Stdout, child.Stderr = &out, &errOut
			start := time.Now()
			require.NoError(t, child.Start())
			done := make(chan error, 1)
			go func() { done <- child.Wait() }()
			var kill <-chan time.Time
			if killAfter >= 0 {
				kill = time.After(killAfter)
			}
			deadline := time.After(30 * time.Second)
			for {
				select {
				case <-kill:
					_ = child.Process.Signal(syscall.SIGKILL)
					killed, kill = true, nil
				case err := <-done:
					if !killed {
						require.NoError(t, err, "migrate up: %s", errOut.String())
					}
					return killed, time.Since(start)
				case <-deadline:
					_ = child.Process.Kill()
					t.Fatalf("migrate up did not end within 30 s: %s", errOut.String())
				}
			}
		}
		// How long a whole run takes: the kills fall anywhere in it.
		_, full := runChild(newDB(-1), -1)
		states := map[string]int{}
		for i := range trials {
			db := newDB(i)
			at := time.Duration(rand.Int64N(int64(full)))
			runChild(db, at)
			states[stateAfterKill(t, engine, db)]++
			// The next start (any command migrates) completes it.
			code, out, errOut := run(t, nil, "migrate", "--db", db, "up")
			require.Equal(t, ExitOK, code, "trial %d (killed after %s): %s", i, at, errOut)
			require.Contains(t, out, fmt.Sprintf("version %d of %d (current)", latest, latest), "trial %d", i)
		}
		keys := make([]string, 0, len(states))
		for k := range states {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var summary []string
		for _, k := range keys {
			summary = append(summary, fmt.Sprintf("%s: %d", k, states[k]))
		}
		t.Logf("%s: %d kills of migrate up within its %s run; left %s; 0 unopenable (each completed by the next migrate up)",
			engine, trials, full.Round(time.Millisecond), strings.Join(summary, ", "))
	})
}

// stateAfterKill says what a killed migrate up left: no file, or the
// version and dirty flag.
func stateAfterKill(t *testing.T, engine sqlstore.Engine, db string) string {
	t.Helper()
	if engine == sqlstore.SQLite {
		path := strings.TrimPrefix(db, "sqlite://")
		fi, err := os.Stat(path)
		if os.IsNotExist(err) {
			return "no file"
		}
		require.NoError(t, err)
		if fi.Size() == 0 {
			return "0-byte file"
		}
	}
	code, out, errOut := run(t, nil, "migrate", "--db", db, "version")
	if code != ExitOK {
		return "refused: " + errOut
	}
	if strings.Contains(out, "dirty") {
		return "dirty"
	}
	f := strings.Fields(out)
	if len(f) >= 3 {
		return "version " + f[2]
	}
	return out
}
