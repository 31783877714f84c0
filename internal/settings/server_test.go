package settings_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/settings"
)

func TestSQLiteFile(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlite://data/balde.db":         "data/balde.db",
		"balde.db":                       "balde.db",
		"file:/var/lib/balde.db?mode=rw": "/var/lib/balde.db",
	} {
		got, ok := settings.SQLiteFile(dsn)
		require.True(t, ok, dsn)
		require.Equal(t, want, got, dsn)
	}
	for _, dsn := range []string{"postgres://balde@db/balde", "sqlite://:memory:", "file:x?mode=memory", "mysql://nope"} {
		_, ok := settings.SQLiteFile(dsn)
		require.False(t, ok, dsn)
	}
}

// The admin is never open: a configured password is used as it is; else a
// password file's first line; else one is made up once, kept beside the
// SQLite database (0600) and found again at the next start.
func TestFindAdminLogin(t *testing.T) {
	t.Run("Configured", func(t *testing.T) {
		login, err := settings.Settings{AdminUser: "admin", AdminPassword: "s3cr3t"}.FindAdminLogin()
		require.NoError(t, err)
		require.Equal(t, settings.AdminLogin{Credentials: login.Credentials}, login)
		require.Equal(t, "s3cr3t", login.Password)
	})
	t.Run("FileFirstLine", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "pw")
		require.NoError(t, os.WriteFile(file, []byte("  hunter2 \nignored\n"), 0o600))
		login, err := settings.Settings{AdminPasswordFile: file}.FindAdminLogin()
		require.NoError(t, err)
		require.Equal(t, "hunter2", login.Password)
		require.Equal(t, file, login.File)
		require.False(t, login.Generated)
	})
	t.Run("ErrEmptyFile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "pw")
		require.NoError(t, os.WriteFile(file, []byte("\nsecond\n"), 0o600))
		_, err := settings.Settings{AdminPasswordFile: file}.FindAdminLogin()
		var se *settings.Error
		require.ErrorAs(t, err, &se)
		require.ErrorContains(t, err, "the first line is empty")
	})
	t.Run("GeneratedOnceBesideTheDatabase", func(t *testing.T) {
		dir := t.TempDir()
		s := settings.Settings{DB: "sqlite://" + filepath.Join(dir, "balde.db")}
		first, err := s.FindAdminLogin()
		require.NoError(t, err)
		require.True(t, first.Generated)
		require.NotEmpty(t, first.Password)
		require.Equal(t, filepath.Join(dir, "admin-password"), first.File)
		fi, err := os.Stat(first.File)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		again, err := s.FindAdminLogin()
		require.NoError(t, err)
		require.False(t, again.Generated, "kept, not made up again")
		require.Equal(t, first.Password, again.Password)
	})
}

func TestDefaultActor(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	require.Equal(t, "cli", settings.DefaultActor(func(string) string { return "" }))
	want := "ana@" + host
	if host == "" {
		want = "ana"
	}
	require.Equal(t, want, settings.DefaultActor(func(k string) string {
		if k == "USER" {
			return "ana"
		}
		return ""
	}))
}
