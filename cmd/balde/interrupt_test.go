package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// Issue 20: after Ctrl-C, sifen-send --json must say "interrupted": true
// and count the documents it did not get to as not processed (still
// drafts, not sent), never as blocked. A real SIGINT to a balde process,
// pressed while it waits 30 s for its RUC's interval: the --progress line
// of that wait tells the test when.
func TestSifenSendCtrlCDuringWaitJSON(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{Interval: 10 * time.Millisecond})
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	dir := t.TempDir()
	// Three types of one RUC: three lots, 30 s apart.
	writeFile(t, dir, "a.xml", sifentest.Lote(sifentest.Doc{Number: 1}))
	writeFile(t, dir, "b.xml", sifentest.Lote(sifentest.Doc{Number: 2, Type: 5}))
	writeFile(t, dir, "c.xml", sifentest.Lote(sifentest.Doc{Number: 3, Type: 4}))

	cmd := childCommand(t, time.Time{}, "sifen-send", "--json", "--progress", "--db", db, "--sifen-url", sim.URL, "--sifen-throttle", "30", dir)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 16)
	var errLines []string
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The first progress line is the wait for the second lot.
	for {
		line := waitfor.Recv(t, lines, 30*time.Second, "a progress line from sifen-send")
		require.NotEmpty(t, line, "stderr ended without a progress line: %q", errLines)
		errLines = append(errLines, line)
		if strings.HasPrefix(line, `{"progress"`) {
			break
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for line := range lines { // closed when the process ends (bounded by waitfor.Cmd below)
		errLines = append(errLines, line)
	}
	err = waitfor.Cmd(t, cmd, 30*time.Second, "sifen-send after Ctrl-C")
	require.Error(t, err, "exit 1: documents not processed")
	require.Equal(t, ExitFailed, cmd.ProcessState.ExitCode())

	items, sum := jsonLines[report.SifenRecord](t, stdout.String())
	require.Len(t, items, 1, "only the lot sent before Ctrl-C has a line")
	require.Equal(t, report.Sent, items[0].Result)
	require.Equal(t, report.Summary{Total: 3, Sent: 1, NotProcessed: 2, Interrupted: true, WaitS: sum.WaitS, ElapsedS: sum.ElapsedS}, sum)
	require.Less(t, sum.WaitS, 30.0, "the wait was cut short")
	require.Contains(t, errLines[len(errLines)-1], "2 of 3 not done: 2 not processed (interrupted)")
	require.Equal(t, map[string]int{"sent": 1, "draft": 2}, documentStatuses(t, db), "nothing half-sent, nothing marked")
}

// Issue 20: with --json a wait of minutes was silent. --progress writes a
// JSON line on stderr when the wait starts and every 10 s of it; stdout
// keeps its item lines and summary only. Without --progress (and stderr
// not a terminal) stderr stays as it was.
func TestSifenSendJSONProgress(t *testing.T) {
	run := func(progress bool) (string, string) {
		clock := newFakeTime(testEpoch)
		sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: -1})
		dir := t.TempDir()
		writeFile(t, dir, "a.xml", sifentest.Lote(sifentest.Doc{Number: 1}))
		writeFile(t, dir, "b.xml", sifentest.Lote(sifentest.Doc{Number: 2, Type: 5}))
		env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "SIFEN_THROTTLE_SECONDS": "25"}
		args := []string{"sifen-send", "--json", dir}
		if progress {
			args = append(args, "--progress")
		}
		code, stdout, stderr := runIn(context.Background(), clock, "", env, args...)
		require.Equal(t, ExitOK, code, stderr)
		_, sum := jsonLines[report.SifenRecord](t, stdout) // stdout: items and the summary, nothing else
		require.Equal(t, 2, sum.Sent)
		return stdout, stderr
	}

	_, stderr := run(true)
	var events []report.ProgressEvent
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var ev map[string]report.ProgressEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev), "stderr line %q", line)
		require.Contains(t, ev, "progress")
		events = append(events, ev["progress"])
	}
	require.Len(t, events, 3, stderr)
	for i, left := range []float64{25, 15, 5} {
		require.Equal(t, "waiting", events[i].Event)
		require.Equal(t, 25.0, events[i].WaitS)
		require.Equal(t, left, events[i].LeftS, "event %d", i)
		require.Equal(t, 1, events[i].Done)
		require.Equal(t, 2, events[i].Total)
		require.Contains(t, events[i].Why, "80069563")
	}

	_, stderr = run(false)
	require.Empty(t, stderr)
}

// dict-lookup --json --progress: the wait for the participant's next
// refill step is announced on stderr as a JSON line (its lookups wait side
// by side, so only the start of each wait is told); stdout is unchanged.
func TestDictLookupJSONProgress(t *testing.T) {
	p := participantPolicy(t)
	sim := startDictSim(t, "H", true)
	clock := newFakeTime(testEpoch, func(d time.Duration) {
		_, err := sim.Advance(d)
		require.NoError(t, err)
	})
	n := int(p.Capacity + p.RefillTokens)
	env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "BALDE_DICT_URL": sim.URL(), "BALDE_DICT_CATEGORY": "H"}
	code, stdout, stderr := runIn(context.Background(), clock, "", env, "dict-lookup", "--json", "--progress", keysFile(t, n))
	require.Equal(t, ExitOK, code, stderr)
	_, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
	require.Equal(t, n, sum.Sent)
	var ev map[string]report.ProgressEvent
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(stderr)), &ev), "one progress line: %q", stderr)
	// Done is what was delivered when the wait began: lookups in flight
	// may be delivered after it.
	got := ev["progress"]
	require.LessOrEqual(t, got.Done, int(p.Capacity))
	require.Equal(t, report.ProgressEvent{Event: "waiting", Why: got.Why, WaitS: p.RefillPeriod.Seconds(), LeftS: p.RefillPeriod.Seconds(),
		Done: got.Done, Total: n}, got)
	require.Contains(t, ev["progress"].Why, "ENTRIES_READ_PARTICIPANT_ANTISCAN")
}
