package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
)

// What was seen: "balde migrate up --db X", the help's own example, exited 2.
func TestFlagsAfterArguments(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "m.db")
	code, out, errOut := run(t, nil, "migrate", "up", "--db", db)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "(current)")

	// "--" ends the flags: what follows is an argument even if it looks
	// like a flag.
	code, _, errOut = run(t, nil, "migrate", "--db", db, "--", "--up")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, `unknown action "--up"`)

	code, _, errOut = run(t, nil, "migrate", "version", "--nope")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, "flag provided but not defined: -nope")
}

// What was seen: "balde buckets list" in the wrong directory created and
// migrated balde.db and said "no stored bucket matches", exit 0.
func TestReadOnlyCommandsRefuseAMissingDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "balde.db")
	for _, args := range [][]string{
		{"buckets", "list"},
		{"buckets", "show", "SIFEN_RECEPCION_LOTE/test/80069563"},
		{"prune", "--dry-run"},
	} {
		code, out, errOut := run(t, nil, append(args, "--db", "sqlite://"+path)...)
		require.Equal(t, ExitUsage, code, "%v: %s%s", args, out, errOut)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		require.Len(t, lines, 1, errOut)
		require.Contains(t, lines[0], "no database at "+path)
		_, err := os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "%v created the database", args)
	}
}

// What was seen: "sqlstore: migrate: throttle: ..." in a user's error line.
func TestErrorLinesHaveNoInternalPrefixes(t *testing.T) {
	var stderr strings.Builder
	m := NewMain(nil, &strings.Builder{}, &stderr, func(string) string { return "" })
	code := m.exit(fmt.Errorf("sqlstore: migrate: %w", fmt.Errorf("throttle: %w: dial tcp 127.0.0.1:5432: connection refused", throttle.ErrStoreUnavailable)))
	require.Equal(t, ExitUnavailable, code)
	require.Equal(t, "balde: store unavailable: dial tcp 127.0.0.1:5432: connection refused\n", stderr.String())
}

// What was seen: "buckets list --policy NOPE" said nothing was wrong.
func TestBucketsListUnknownPolicy(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	code, _, errOut := run(t, nil, "migrate", "up", "--db", db)
	require.Equal(t, ExitOK, code, errOut)
	code, _, errOut = run(t, nil, "buckets", "list", "--policy", "NOPE", "--db", db)
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, errOut, `unknown policy "NOPE"`)
}

// The operator commands speak the language of LANG.
func TestBucketsAndPruneSpeakLANG(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	env := map[string]string{"BALDE_DB": db, "LANG": "pt_BR.UTF-8"}
	code, out, errOut := runIn(context.Background(), clock, "", env, "buckets", "list")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "POLÍTICA")
	require.Contains(t, out, "Saudável")
	code, out, errOut = runIn(context.Background(), clock, "", map[string]string{"BALDE_DB": db, "LANG": "es_PY.UTF-8"}, "prune", "--dry-run")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "simulación: eliminaría 0 filas del registro")
}

// The examples in the --help of the operator commands run (against a
// seeded temporary database: --db is replaced, BALDE_DB set).
func TestOperatorHelpExamplesRun(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	env := map[string]string{"BALDE_DB": db}
	dbFlag := regexp.MustCompile(`--db \S+`)
	for _, cmd := range []string{"buckets", "prune"} {
		code, _, help := runIn(context.Background(), clock, "", env, cmd, "--help")
		require.Equal(t, ExitOK, code)
		_, examples, ok := strings.Cut(help, "Example:\n")
		require.True(t, ok, "%s --help has no example", cmd)
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(examples), "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "balde ") {
				continue
			}
			line = dbFlag.ReplaceAllString(line, "--db "+db)
			args := strings.Fields(strings.TrimPrefix(line, "balde "))
			if slices.Contains(args, "--watch") {
				continue // runs until Ctrl-C
			}
			code, out, errOut := runIn(context.Background(), clock, "", env, args...)
			require.Equal(t, ExitOK, code, "%s\n%s%s", line, out, errOut)
			n++
		}
		require.Positive(t, n, "%s: no runnable example", cmd)
	}
}

func TestShellCompletion(t *testing.T) {
	code, out, _ := run(t, nil, "completion", "bash")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "complete -F _balde balde")
	code, out, _ = run(t, nil, "__complete")
	require.Equal(t, ExitOK, code)
	require.Contains(t, strings.Fields(out), "buckets")
	require.NotContains(t, out, "__complete")
	code, out, _ = run(t, nil, "__complete", "buckets")
	require.Equal(t, ExitOK, code)
	require.Equal(t, []string{"list", "show", "reset"}, strings.Fields(out))
	code, out, _ = run(t, nil, "__complete", "prune", "flags")
	require.Equal(t, ExitOK, code)
	require.Contains(t, strings.Fields(out), "--dry-run")
	require.Contains(t, strings.Fields(out), "--db")
	code, _, errOut := run(t, nil, "completion", "fish")
	require.Equal(t, ExitUsage, code)
	oneStderrLine(t, errOut, "want bash or zsh")
}

// buckets list --watch redraws every period until Ctrl-C, then exits 0.
func TestBucketsListWatch(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleeps := 0
	clock := newFakeTime(testEpoch, func(time.Duration) {
		if sleeps++; sleeps == 2 {
			cancel() // Ctrl-C during the second wait
		}
	})
	seedBuckets(t, db, clock)
	code, out, errOut := runIn(ctx, clock, "", map[string]string{"BALDE_DB": db}, "buckets", "list", "--watch", "5s", "--state", "cooling")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, 3, strings.Count(out, "(Ctrl-C to stop)"), out)
	require.Contains(t, out, "every 5s, at 2026-03-02 12:00:10 UTC")
	require.Equal(t, 2, strings.Count(out, "cooldown"), "the RUC cools down at 0 s and 5 s; Ctrl-C ends the third draw: %s", out)
}
