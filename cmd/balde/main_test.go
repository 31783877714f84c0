package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// run executes balde with args and an environment, returning the exit code
// and both streams (runIn with no stdin, on the system clock).
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runIn(context.Background(), nil, "", env, args...)
}

func TestMigrateUpDownVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db := "sqlite://" + path
	// version reads, it does not create (issue 23); up creates.
	code, _, errOut := run(t, nil, "migrate", "--db", db, "version")
	require.Equal(t, ExitUsage, code, errOut)
	require.Contains(t, errOut, "no database at "+path)
	require.NoFileExists(t, path)

	code, out, _ := run(t, nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "(current)")

	code, out, _ = run(t, map[string]string{"BALDE_DB": db}, "migrate", "down")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "1 pending")
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"UnknownCommand", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"MigrateNoAction", []string{"migrate"}, "want exactly one of up, down, version"},
		{"MigrateBadAction", []string{"migrate", "sideways"}, `unknown action "sideways"`},
		{"MigrateBadDSN", []string{"migrate", "--db", "mysql://x", "up"}, "unsupported DSN scheme"},
		{"MigrateBadFlag", []string{"migrate", "--nope", "up"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, nil, tt.args...)
			require.Equal(t, ExitUsage, code)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			require.Contains(t, lines[len(lines)-1], tt.want)
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	code, out, _ := run(t, nil, "help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "migrate")
	code, helpOut, _ := run(t, nil, "migrate", "--help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, helpOut, "Example:")
	require.Contains(t, helpOut, "  -db ", "the flags are listed")
}
