package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
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

// Every example in every command's --help runs and exits 0 (issue 14: "a
// test runs every example in every --help against a temp database and the
// simulators"): in a temporary directory holding the files the examples
// name, against a seeded temporary database (every --db is replaced), the
// DICT and SIFEN simulators (--dict-url, --sifen-url) and, for serve, an
// address of 127.0.0.1:0; serve is stopped once it answers /healthz.
func TestHelpExamplesRun(t *testing.T) {
	clock := newFakeTime(testEpoch)
	dictSim := startDictSim(t, "A", true)
	sifenSim := startSifenSim(t, sifensim.Config{Clock: clock.Now})
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	seedBuckets(t, db, clock)

	// The files the examples name, in the directory they run in.
	dir := t.TempDir()
	for _, sub := range []string{"invoices/2026-01", "extra"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, sub), 0o755))
	}
	writeFile(t, filepath.Join(dir, "invoices", "2026-01"), "a.xml", sifentest.Doc{RUC: "88888801", Number: 1}.File())
	writeFile(t, filepath.Join(dir, "extra"), "lote-17.xml", sifentest.Lote(sifentest.Doc{RUC: "88888801", Number: 2}))
	writeFile(t, dir, "keys.csv", []byte("key\n"+strings.Join(foundKeys, "\n")+"\n"))
	t.Chdir(dir)

	// The DICT's URLs become the simulator's, and "$ISPB" the participant
	// whose bucket the buckets example resets.
	replace := map[string]string{"--db": db, "--dict-url": dictSim.URL(), "--dict-policies-url": dictSim.URL(), "--dict-participant": "12345678",
		"--sifen-url": sifenSim.URL, "--addr": "127.0.0.1:0"}
	for _, c := range commands() {
		if c.Summary == "" {
			continue // hidden (__complete)
		}
		t.Run(c.Name, func(t *testing.T) {
			if c.Name == "sifen-override" {
				// Document 1, left sending: run before sifen-send's example imports any.
				seedSendingDocument(t, db, sifenSim.URL, clock)
			}
			code, help, _ := runIn(context.Background(), clock, "", nil, c.Name, "--help")
			require.Equal(t, ExitOK, code)
			_, examples, ok := strings.Cut(help, "Example:\n")
			require.True(t, ok, "balde %s --help has no example", c.Name)
			n := 0
			for _, line := range strings.Split(strings.TrimSpace(examples), "\n") {
				env, args := exampleCommand(t, line)
				if args == nil {
					continue
				}
				for k := range env {
					if strings.HasPrefix(k, "BALDE_DICT_") {
						delete(env, k) // the real DICT's files: the simulator needs none
					}
				}
				for i := 0; i+1 < len(args); i++ {
					if v, ok := replace[args[i]]; ok {
						args[i+1] = v
					}
				}
				if slices.Contains(args, "--watch") {
					continue // runs until Ctrl-C
				}
				n++
				if args[0] == "serve" {
					sm := runServeMain(t, env, args[1:]...)
					resp, body := get(t, sm.url+"/healthz", "", "")
					require.Equal(t, 200, resp.StatusCode, body)
					require.Equal(t, ExitOK, sm.stop(t))
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				code, out, errOut := runIn(ctx, clock, "", env, args...)
				cancel()
				require.Equal(t, ExitOK, code, "%s\n%s%s", line, out, errOut)
				last := strings.TrimSpace(out)
				if i := strings.LastIndexByte(last, '\n'); i >= 0 {
					last = last[i+1:]
				}
				t.Logf("%s → %.100s", line, last)
			}
			require.Positive(t, n, "balde %s --help: no runnable example", c.Name)
		})
	}
}

// exampleCommand reads one line of a --help example: the environment it
// sets (BALDE_ADMIN_PASSWORD=... balde serve) and balde's arguments, also
// inside a shell's "source <(balde completion bash)". A line that runs no
// balde gives nil.
func exampleCommand(t *testing.T, line string) (map[string]string, []string) {
	t.Helper()
	line = strings.TrimSpace(line)
	i := strings.Index(line, "balde ")
	if i < 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, w := range strings.Fields(line[:i]) {
		if k, v, ok := strings.Cut(w, "="); ok {
			env[k] = v
		}
	}
	cmd := line[i+len("balde "):]
	if strings.HasSuffix(cmd, ")") && strings.Contains(line[:i], "<(") {
		cmd = strings.TrimSuffix(cmd, ")")
	}
	return env, strings.Fields(cmd)
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
	require.Equal(t, []string{"list", "show", "reset", "shadow"}, strings.Fields(out))
	code, out, _ = run(t, nil, "__complete", "prune", "flags")
	require.Equal(t, ExitOK, code)
	require.Contains(t, strings.Fields(out), "--dry-run")
	require.Contains(t, strings.Fields(out), "--db")
	// A flag's values, not file names, where there are few.
	code, out, _ = run(t, nil, "__complete", "sifen-send", "next", "--env")
	require.Equal(t, ExitOK, code)
	require.Equal(t, []string{"test", "prod"}, strings.Fields(out))
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

// The --watch header speaks LANG too.
func TestBucketsListWatchSpeaksLANG(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := newFakeTime(testEpoch, func(time.Duration) { cancel() })
	seedBuckets(t, db, clock)
	code, out, errOut := runIn(ctx, clock, "", map[string]string{"BALDE_DB": db, "LANG": "es_PY.UTF-8"}, "buckets", "list", "--watch", "5s")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "cada 5s, a las 2026-03-02 12:00:00 UTC (Ctrl-C para detener)")
}

// Issue 20: a subcommand's --help went to stderr ("balde buckets --help |
// less" showed nothing). It prints to stdout, exits 0 and writes nothing on
// stderr; a usage error still prints one line on stderr.
func TestSubcommandHelpGoesToStdout(t *testing.T) {
	for _, c := range commands() {
		if c.Summary == "" {
			continue // hidden (__complete)
		}
		t.Run(c.Name, func(t *testing.T) {
			for _, h := range []string{"--help", "-h"} {
				code, stdout, stderr := runIn(context.Background(), nil, "", nil, c.Name, h)
				require.Equal(t, ExitOK, code)
				require.True(t, strings.HasPrefix(stdout, "Usage: balde "+c.Name), "balde %s %s: %q", c.Name, h, stdout)
				require.Empty(t, stderr)
			}
		})
	}
	code, stdout, stderr := runIn(context.Background(), nil, "", nil, "buckets", "--bogus")
	require.Equal(t, ExitUsage, code)
	require.Empty(t, stdout)
	oneStderrLine(t, stderr, "see balde buckets --help")
}

// Issue 20: completion offered file names instead of actions and --sort
// values. What may follow each word, as the bash script asks for it.
func TestShellCompletionOffersActionsAndValues(t *testing.T) {
	for _, tt := range []struct {
		command, prev string
		want          []string
	}{
		{"buckets", "buckets", []string{"list", "show", "reset", "shadow"}},
		{"migrate", "migrate", []string{"up", "down", "version"}},
		{"buckets", "--sort", []string{"key", "severity", "last_send", "tokens"}},
		{"buckets", "-sort", []string{"key", "severity", "last_send", "tokens"}},
		{"buckets", "--severity", []string{"healthy", "medium", "high", "critical"}},
		{"buckets", "--state", []string{"blocked", "cooling", "negative"}},
		{"buckets", "-o", []string{"table", "wide", "json"}},
		{"buckets", "list", []string{}},  // after the action: no file names
		{"buckets", "--yes", []string{}}, // a boolean flag takes no value
		{"buckets", "--db", []string{completeFiles}},
		{"sifen-send", "sifen-send", []string{completeFiles}}, // its arguments are files
	} {
		t.Run(tt.command+" "+tt.prev, func(t *testing.T) {
			code, out, stderr := run(t, nil, "__complete", tt.command, "next", tt.prev)
			require.Equal(t, ExitOK, code, stderr)
			require.Equal(t, tt.want, strings.Fields(out))
		})
	}
	code, out, _ := run(t, nil, "completion", "bash")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, `balde __complete "${COMP_WORDS[1]}" next "$prev"`)
	require.NotContains(t, out, `$(compgen -W "$(balde __complete "${COMP_WORDS[1]}")" -- "$cur") $(compgen -f`, "files only when files are wanted")
}
