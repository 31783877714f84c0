package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
)

// A test that needs balde in another OS process re-executes the test
// binary with these variables; TestMain then runs Main.Run instead of the
// tests. The lead's serve + sifen-send test can start either command this
// way.
const (
	envChildArgs  = "BALDE_TEST_CHILD_ARGS"  // JSON array: the balde command line
	envChildClock = "BALDE_TEST_CHILD_CLOCK" // optional RFC 3339 instant: a fake clock standing still there
)

func TestMain(m *testing.M) {
	if args := os.Getenv(envChildArgs); args != "" {
		os.Exit(runChild(args))
	}
	os.Exit(m.Run())
}

// runChild is the body of a child process: balde with the given command
// line, on the system clock or a fixed fake one.
func runChild(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 99
	}
	m := NewMain(os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	if at := os.Getenv(envChildClock); at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 99
		}
		m.Clock = throttle.NewManualClock(t).Now
	}
	// Signals as balde's main takes them: a test may press Ctrl-C.
	ctx, stop := signalContext()
	defer stop()
	return m.Run(ctx, args)
}

// childCommand returns balde running args in a child process; at, when
// not zero, fixes its clock.
func childCommand(t *testing.T, at time.Time, args ...string) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildArgs+"="+string(b))
	if !at.IsZero() {
		cmd.Env = append(cmd.Env, envChildClock+"="+at.Format(time.RFC3339Nano))
	}
	return cmd
}

// runIn runs balde in the test process with ctx, stdin and an environment,
// on clock when it is not nil (its sleeps only advance it), on the system
// clock otherwise.
func runIn(ctx context.Context, clock *fakeTime, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	m := NewMain(strings.NewReader(stdin), &out, &errOut, func(k string) string { return env[k] })
	if clock != nil {
		m.Clock, m.Sleep = clock.Now, clock.sleep
	}
	code = m.Run(ctx, args)
	return code, out.String(), errOut.String()
}

// oneStderrLine asserts that stderr is exactly one line containing want.
func oneStderrLine(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	require.Len(t, lines, 1, "stderr: %q", stderr)
	require.Contains(t, lines[0], want)
}

// fakeTime is a fake clock whose sleeps only advance it (and whatever else
// must move with it: a simulator's clock), recording each requested sleep.
type fakeTime struct {
	*throttle.ManualClock
	mu     sync.Mutex
	sleeps []time.Duration
	also   []func(time.Duration)
	// interruptible makes a sleep whose also cancelled its context return
	// the context's error, as a real sleep cut by Ctrl-C does; otherwise
	// the sleep completes and the cancellation is seen at the next check.
	interruptible bool
	// settle, if set, runs before each sleep advances the clock: a test
	// whose runs wait on each other's real-time work holds the clock
	// there until that work is done.
	settle func()
}

func newFakeTime(at time.Time, also ...func(time.Duration)) *fakeTime {
	return &fakeTime{ManualClock: throttle.NewManualClock(at), also: also}
}

func (f *fakeTime) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.settle != nil {
		f.settle()
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.mu.Unlock()
	f.Advance(d)
	for _, fn := range f.also {
		fn(d)
	}
	if f.interruptible {
		return ctx.Err() // an also that cancelled is a Ctrl-C during the sleep
	}
	return nil
}

func (f *fakeTime) slept() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// testEpoch is where the fake clocks of these tests start.
var testEpoch = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// sifenSim is a SIFEN simulator on 127.0.0.1 that counts, per CDC, the
// lots SIFEN queued with it.
type sifenSim struct {
	*sifensim.Server
	URL string // with "{env}"

	mu     sync.Mutex
	queued map[string]int // CDC → lots queued (0300) holding it
}

// startSifenSim starts a simulator; cfg's AfterRecepcion, if set, runs
// after the count.
func startSifenSim(t *testing.T, cfg sifensim.Config) *sifenSim {
	t.Helper()
	s := &sifenSim{queued: make(map[string]int)}
	after := cfg.AfterRecepcion
	cfg.AfterRecepcion = func(ctx context.Context, r sifensim.Recepcion) {
		if r.Code == sifensim.CodeLotQueued {
			s.mu.Lock()
			for _, cdc := range r.CDCs {
				s.queued[cdc]++
			}
			s.mu.Unlock()
		}
		if after != nil {
			after(ctx, r)
		}
	}
	if cfg.Processing == 0 {
		cfg.Processing = -1 // processed at once: siConsDE finds what was queued
	}
	cfg.Logger = discardLogger
	var err error
	s.Server, err = sifensim.NewServer(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(s.Server)
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/{env}"
	return s
}

// queuedCounts returns a copy of the per-CDC counts.
func (s *sifenSim) queuedCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.queued))
	for k, v := range s.queued {
		out[k] = v
	}
	return out
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// startDictSim starts a DICT simulator of category on 127.0.0.1 with the
// entries of dict/testdata/entries.csv; a fake clock when clock is set.
func startDictSim(t *testing.T, category string, fake bool) *dictsim.Server {
	t.Helper()
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
		Category:    category,
		EntriesFile: filepath.Join("..", "..", "dict", "testdata", "entries.csv"),
		FakeClock:   fake,
		Start:       testEpoch,
		Logger:      discardLogger,
	})
	require.NoError(t, err)
	require.NoError(t, sim.Open("127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	return sim
}

// jsonLines splits --json output into item objects and the summary.
func jsonLines[T any](t *testing.T, stdout string) ([]T, report.Summary) {
	t.Helper()
	var items []T
	var sum *report.Summary
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		line := sc.Bytes()
		require.Nil(t, sum, "a line after the summary: %s", line)
		var probe struct {
			Summary *report.Summary `json:"summary"`
		}
		require.NoError(t, json.Unmarshal(line, &probe), "line %q", line)
		if probe.Summary != nil {
			sum = probe.Summary
			continue
		}
		var it T
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&it), "line %q", line)
		items = append(items, it)
	}
	require.NotNil(t, sum, "no summary object in %q", stdout)
	return items, *sum
}

// sifenDocs returns n invoices of ruc numbered from first, as a lot file.
func sifenLot(ruc string, first, n int) ([]byte, []string) {
	docs := sifentest.Docs(ruc, first, n)
	cdcs := make([]string, n)
	for i, d := range docs {
		cdcs[i] = d.CDC()
	}
	return sifentest.Lote(docs...), cdcs
}
