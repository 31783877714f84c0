package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// badFiles makes the SQLite files no command may use: an empty (0-byte)
// one, and copies of a database cut or garbled the ways a bad copy or a
// failing disk leaves one. want is in the one stderr line, with the path.
var badFiles = []struct {
	name string
	make func(t *testing.T) string
	want string
}{
	{"EmptyFile", func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "balde.db")
		require.NoError(t, os.WriteFile(path, nil, 0o644))
		return path
	}, "is empty (0 bytes)"},
	{"CorruptFile", sqlstoretest.CorruptSQLiteCopy, "fails SQLite's integrity check"},
	{"TruncatedHalf", badCopy(func(b []byte) []byte { return b[:len(b)/2] }), "fails SQLite's integrity check"},
	{"TruncatedInTheHeader", badCopy(func(b []byte) []byte { return b[:60] }), "fails SQLite's integrity check"},
	{"GarbageHeader", badCopy(func(b []byte) []byte { return sqlstoretest.Garble(b, 0, 100) }), "fails SQLite's integrity check"},
	{"GarbageSchemaPage", badCopy(func(b []byte) []byte { return sqlstoretest.Garble(b, 100, sqlstoretest.SQLitePage-100) }), "fails SQLite's integrity check"},
	{"GarbagePages", badCopy(func(b []byte) []byte {
		for p := 1; p < len(b)/sqlstoretest.SQLitePage; p += 7 {
			sqlstoretest.Garble(b, p*sqlstoretest.SQLitePage, sqlstoretest.SQLitePage)
		}
		return b
	}), "fails SQLite's integrity check"},
	{"NotSQLite", func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "balde.db")
		require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("balde is not this file\n", 400)), 0o644))
		return path
	}, "fails SQLite's integrity check"},
}

// badCopy makes a bad file out of a sound database's bytes.
func badCopy(spoil func([]byte) []byte) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "balde.db")
		require.NoError(t, os.WriteFile(path, spoil(sqlstoretest.SoundSQLiteFile(t)), 0o644))
		return path
	}
}

// TestEveryCommandRefusesABadFile runs every command that opens the
// database on an empty and on a corrupt SQLite file: each exits 3 with one
// line on stderr naming the file and saying what is wrong, and the file is
// left byte for byte as it was. Before issue 23 the empty file was migrated
// into a new, empty balde by serve, buckets list and migrate version, and
// the corrupt one was served as ready.
func TestEveryCommandRefusesABadFile(t *testing.T) {
	lots := t.TempDir()
	lot, _ := sifenLot("80002001", 1, 1)
	writeFile(t, lots, "lot.xml", lot)
	commands := [][]string{
		{"serve", "--addr", "127.0.0.1:0"},
		{"serve", "--addr", "127.0.0.1:0", "--create"},
		{"migrate", "up"},
		{"migrate", "version"},
		{"migrate", "down"},
		{"buckets", "list"},
		{"prune"},
		{"dict-lookup", "--dict-url", "http://127.0.0.1:1", "--payer", "11222333000181", "-"},
		{"sifen-send", "--env", "test", "--sifen-url", "http://127.0.0.1:1", lots},
	}
	for _, bad := range badFiles {
		t.Run(bad.name, func(t *testing.T) {
			t.Parallel()
			path := bad.make(t)
			sum := func() [32]byte {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				return sha256.Sum256(b)
			}
			before := sum()
			for _, args := range commands {
				env := map[string]string{"BALDE_DB": "sqlite://" + path, "BALDE_ADMIN_PASSWORD": "pw"}
				// A serve that starts on the file would run until this
				// deadline and exit 0: the test then fails, it does not hang.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				code, _, errOut := runIn(ctx, nil, "+5561988880000\n", env, args...)
				cancel()
				require.Equal(t, ExitUnavailable, code, "%v: %s", args, errOut)
				require.NoFileExists(t, path+".migrate-lock", "%v left a migration lock file beside the database it refused", args)
				oneStderrLine(t, errOut, path)
				require.Contains(t, errOut, bad.want, "%v", args)
				require.Equal(t, before, sum(), "%v changed the file", args)
			}
			for _, suffix := range []string{"-wal", "-shm", ".new"} {
				if fi, err := os.Stat(path + suffix); err == nil {
					require.Zero(t, fi.Size(), "%s%s was written", path, suffix)
				}
			}
		})
	}
}

// TestReadOnlyCommandsLeaveNoFileBesideAMissingDatabase: the commands that
// read or fix state refuse a SQLite file that does not exist (exit 2) and
// leave nothing where it should be: no database, no migration lock file.
func TestReadOnlyCommandsLeaveNoFileBesideAMissingDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{{"migrate", "version"}, {"migrate", "down"}, {"buckets", "list"}, {"prune"}, {"prune", "--dry-run"},
		{"serve", "--addr", "127.0.0.1:0"}} {
		code, _, errOut := run(t, map[string]string{"BALDE_DB": "sqlite://" + path, "BALDE_ADMIN_PASSWORD": "pw"}, args...)
		require.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "no database at "+path, "%v", args)
		entries, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		require.Empty(t, entries, "%v left files beside the missing database", args)
	}
}
