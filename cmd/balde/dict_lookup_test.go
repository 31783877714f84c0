package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict/dictsim"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/jobs"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// foundKeys are keys the simulator's directory holds (dict/testdata/entries.csv).
var foundKeys = []string{"+5561988880000", "maria.souza@example.com", "11144477735", "11222333000181"}

const payerCPF = "52998224725"

// keysFile writes n lookups of foundKeys, as "key,payer" CSV with a header.
func keysFile(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("key,payer\n")
	for i := range n {
		b.WriteString(foundKeys[i%len(foundKeys)] + "," + payerCPF + "\n")
	}
	return writeFile(t, t.TempDir(), "keys.csv", []byte(b.String()))
}

// participantPolicy is the category H participant anti-scan policy, as the
// catalog defines it.
func participantPolicy(t *testing.T) throttle.Policy {
	t.Helper()
	c := dict.NewCatalog("prod")
	require.NoError(t, c.SetCategory("H"))
	p, err := c.Resolve(c.Key(dict.PolicyEntriesReadParticipantAntiscan, "12345678"))
	require.NoError(t, err)
	return p
}

// TestDictLookupTwoProcesses runs two dict-lookup processes at once over
// one category H participant on one SQLite file: together they send
// exactly the bucket's allowance, and the DICT answers no 429.
func TestDictLookupTwoProcesses(t *testing.T) {
	p := participantPolicy(t)
	sim := startDictSim(t, "H", true)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	code, _, stderr := runIn(context.Background(), nil, "", nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)

	// Each process alone would take 40: more than half the bucket.
	perChild := int(p.Capacity)*4/5 + 1
	keys := keysFile(t, perChild)
	var children []*childProc
	for range 2 {
		c := childCommand(t, testEpoch, "dict-lookup", "--db", db, "--dict-url", sim.URL(), "--dict-participant", "12345678",
			"--dict-category", "H", "--no-wait", "--json", keys)
		ch := &childProc{cmd: c}
		c.Stdout, c.Stderr = &ch.stdout, &ch.stderr
		require.NoError(t, c.Start())
		children = append(children, ch)
	}
	var sent, refused int
	for _, ch := range children {
		err := waitfor.Cmd(t, ch.cmd, 2*time.Minute, "dict-lookup child; stderr:\n%s", &ch.stderr)
		items, sum := jsonLines[dictlookup.LookupRecord](t, ch.stdout.String())
		require.Len(t, items, perChild)
		for _, it := range items {
			switch it.Status {
			case http.StatusOK:
				sent++
			case 0:
				require.Equal(t, dictlookup.LookupBlocked, it.Result)
				require.Equal(t, "empty", it.Reason)
				require.Positive(t, it.RetryAfterS)
				refused++
			default:
				t.Fatalf("status %d: %+v", it.Status, it)
			}
		}
		if sum.Blocked > 0 {
			require.ErrorContains(t, err, "exit status 1", ch.stderr.String())
		} else {
			require.NoError(t, err, ch.stderr.String())
		}
	}
	require.Equal(t, int(p.Capacity), sent, "together exactly the allowance")
	require.Equal(t, 2*perChild-int(p.Capacity), refused)
	stats := sim.Stats()
	require.Equal(t, p.Capacity, stats.Count(dict.OpGetEntry, http.StatusOK))
	require.Equal(t, int64(0), stats.Total(http.StatusTooManyRequests))
}

// TestDictLookupSixProcessesOnePayer: six dict-lookup processes scan one
// PF payer (100 tokens; a 404 costs 20) with unknown keys against a DICT
// whose answers take 0.25 s to arrive after it charged them. Each lookup in
// flight holds the worst case, so the mirror is never more generous than
// the DICT: no remote 429, and exactly the 5 lookups the payer can afford
// are answered. (With the old 1-token reservation the lookups in flight
// were admitted on credit and drew remote 429s.)
func TestDictLookupSixProcessesOnePayer(t *testing.T) {
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
		Category: "A", Latency: 250 * time.Millisecond, FakeClock: true, Start: testEpoch, Logger: discardLogger,
	})
	require.NoError(t, err)
	require.NoError(t, sim.Open("127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	code, _, stderr := runIn(context.Background(), nil, "", nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)

	const procs, perProc = 6, 8
	var children []*childProc
	for p := range procs {
		var b strings.Builder
		b.WriteString("key,payer\n")
		for i := range perProc {
			fmt.Fprintf(&b, "naoexiste-%d-%d@example.com,%s\n", p, i, payerCPF)
		}
		keys := writeFile(t, t.TempDir(), "keys.csv", []byte(b.String()))
		c := childCommand(t, testEpoch, "dict-lookup", "--db", db, "--dict-url", sim.URL(), "--no-wait", "--json", keys)
		ch := &childProc{cmd: c}
		c.Stdout, c.Stderr = &ch.stdout, &ch.stderr
		require.NoError(t, c.Start())
		children = append(children, ch)
	}
	var answered, refused int
	for _, ch := range children {
		done := make(chan error, 1)
		go func() { done <- ch.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = ch.cmd.Process.Kill()
			t.Fatalf("a dict-lookup process did not finish within 60 s: %s", ch.stderr.String())
		}
		items, _ := jsonLines[dictlookup.LookupRecord](t, ch.stdout.String())
		require.Len(t, items, perProc, ch.stderr.String())
		for _, it := range items {
			switch it.Status {
			case http.StatusNotFound:
				answered++
			case 0:
				require.Equal(t, dictlookup.LookupBlocked, it.Result, "%+v", it)
				refused++
			default:
				t.Fatalf("status %d: %+v", it.Status, it)
			}
		}
	}
	stats := sim.Stats()
	t.Logf("6 processes x 8 lookups: %d answered, %d refused locally, remote 429s: %d", answered, refused, stats.Total(http.StatusTooManyRequests))
	require.Equal(t, int64(0), stats.Total(http.StatusTooManyRequests), "no remote 429")
	require.GreaterOrEqual(t, answered, 5)
	require.Equal(t, int64(answered), stats.Count(dict.OpGetEntry, http.StatusNotFound))
	require.Equal(t, procs*perProc, answered+refused)
}

// childProc is a child process and its output.
type childProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

// TestDictLookupWait: once the participant's bucket is empty, --wait
// sleeps exactly until the next refill step, then the lookups go on.
func TestDictLookupWait(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		p := participantPolicy(t)
		require.Equal(t, throttle.RefillStepwise, p.Refill)
		sim := startDictSim(t, "H", true)
		clock := newFakeTime(testEpoch, func(d time.Duration) {
			_, err := sim.Advance(d)
			require.NoError(t, err)
		})
		n := int(p.Capacity + p.RefillTokens) // one refill step beyond the bucket
		out := filepath.Join(t.TempDir(), "results.json")
		env := map[string]string{"BALDE_DB": sqlstoretest.DSN(t, engine), "BALDE_DICT_URL": sim.URL(), "BALDE_DICT_CATEGORY": "H"}

		code, stdout, stderr := runIn(context.Background(), clock, "", env, "dict-lookup", "--json", "--out", out, keysFile(t, n))
		require.Equal(t, ExitOK, code, stderr)
		require.Equal(t, []time.Duration{p.RefillPeriod}, clock.slept())

		items, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
		require.Equal(t, report.Summary{Total: n, Sent: n, WaitS: p.RefillPeriod.Seconds(), ElapsedS: p.RefillPeriod.Seconds()}, sum)
		for i, it := range items {
			require.Equal(t, http.StatusOK, it.Status, "lookup %d", i)
			wantWait := 0.0
			if i == int(p.Capacity) {
				wantWait = p.RefillPeriod.Seconds()
			}
			require.Equal(t, wantWait, it.WaitS, "lookup %d", i)
		}
		require.Equal(t, int64(n), sim.Stats().Count(dict.OpGetEntry, http.StatusOK))
		require.Equal(t, int64(0), sim.Stats().Total(http.StatusTooManyRequests))

		// --out holds the same results as one JSON array, with the entries.
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		var written []dictlookup.LookupRecord
		require.NoError(t, json.Unmarshal(data, &written))
		require.Equal(t, items, written)
		require.Equal(t, "João Silva", written[0].OwnerName)
		require.Equal(t, "PHONE", written[0].KeyType)
		require.Equal(t, "12345678", written[0].Participant)
	})
}

// TestDictLookupDrainedPayerDoesNotHoldBackOthers: with --wait, one payer
// whose bucket is empty and three full ones: the full payers' lines are all
// answered while the drained payer's wait is held (the sleep returns only
// once they were, or fails after 30 s), and the output keeps the input's
// order. Before, lines went one at a time and the file waited behind the
// drained payer.
func TestDictLookupDrainedPayerDoesNotHoldBackOthers(t *testing.T) {
	sim := startDictSim(t, "A", true)
	// The command runs in this process: the connections its concurrent
	// lookups dialled stay in the default transport's pool, and the
	// simulator's graceful Close waits 5 s for one that never carried a
	// request. A process that exits closes them; so does this, before Close.
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	clock := newFakeTime(testEpoch, func(d time.Duration) {
		_, err := sim.Advance(d)
		require.NoError(t, err)
	})
	env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "BALDE_DICT_URL": sim.URL(), "BALDE_DICT_CATEGORY": "A"}

	// Five unknown keys at 20 tokens each empty the PF payer's 100.
	var drain strings.Builder
	for i := range 5 {
		fmt.Fprintf(&drain, "naoexiste-%d@example.com,%s\n", i, payerCPF)
	}
	code, stdout, stderr := runIn(context.Background(), clock, "", env, "dict-lookup", "--no-wait", writeFile(t, t.TempDir(), "drain.csv", []byte(drain.String())))
	require.Equal(t, ExitOK, code, "drain: stdout %q, stderr %q", stdout, stderr)

	full := []string{validCNPJ(112_223_330_000), validCNPJ(112_223_330_000 + 7919), validCNPJ(112_223_330_000 + 2*7919)}
	var file strings.Builder
	var want [][2]string
	for range 3 {
		want = append(want, [2]string{foundKeys[0], payerCPF})
		for _, p := range full {
			want = append(want, [2]string{foundKeys[1], p})
		}
	}
	file.WriteString("key,payer\n")
	for _, w := range want {
		file.WriteString(w[0] + "," + w[1] + "\n")
	}
	fullLines := int64(len(want) - 3)
	answeredBefore := sim.Stats().Count(dict.OpGetEntry, http.StatusOK)

	var out, errOut bytes.Buffer
	m := NewMain(strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	m.Clock = clock.Now
	m.Sleep = func(ctx context.Context, d time.Duration) error {
		deadline := time.Now().Add(30 * time.Second)
		for sim.Stats().Count(dict.OpGetEntry, http.StatusOK)-answeredBefore < fullLines {
			if time.Now().After(deadline) {
				t.Errorf("the drained payer's wait of %s was held 30 s: the full payers' lines waited behind it", d)
				return context.DeadlineExceeded
			}
			time.Sleep(5 * time.Millisecond)
		}
		return clock.sleep(ctx, d)
	}
	code = m.Run(context.Background(), []string{"dict-lookup", "--wait", "--json", writeFile(t, t.TempDir(), "keys.csv", []byte(file.String()))})
	require.Equal(t, ExitOK, code, "stdout %q, stderr %q", out.String(), errOut.String())

	items, sum := jsonLines[dictlookup.LookupRecord](t, out.String())
	require.Len(t, items, len(want), "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	require.Equal(t, len(want), sum.Sent, "stdout:\n%s", out.String())
	for i, it := range items {
		require.Equal(t, want[i], [2]string{it.Key, it.Payer}, "line %d in input order", i)
		require.Equal(t, http.StatusOK, it.Status, "line %d", i)
		if it.Payer != payerCPF {
			require.Zero(t, it.WaitS, "line %d: a full payer never waits", i)
		}
	}
	require.Positive(t, items[0].WaitS, "the drained payer waited")
	require.NotEmpty(t, clock.slept(), "the drained payer slept")
}

func TestDictLookupNoWait(t *testing.T) {
	p := participantPolicy(t)
	sim := startDictSim(t, "H", true)
	clock := newFakeTime(testEpoch)
	out := filepath.Join(t.TempDir(), "results.csv")
	n := int(p.Capacity) + 3
	env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "BALDE_DICT_URL": sim.URL(), "BALDE_DICT_CATEGORY": "H"}

	code, stdout, stderr := runIn(context.Background(), clock, "", env, "dict-lookup", "--no-wait", "--out", out, keysFile(t, n))
	require.Equal(t, ExitFailed, code)
	oneStderrLine(t, stderr, "dict-lookup: 3 of 53 not done: 3 blocked")
	require.Empty(t, clock.slept())
	require.Contains(t, stdout, "blocked +5561988880000 payer="+payerCPF+" status=0 reason=empty retry_after="+p.RefillPeriod.String()+" \"refused locally by ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/12345678, not sent\"")
	require.Contains(t, stdout, "50 sent, 3 blocked, 0 skipped, 0 failed of 53")

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, dictlookup.LookupColumns, rows[0])
	require.Len(t, rows, n+1)
	require.Equal(t, []string{"11144477735", payerCPF, "200"}, rows[3][:3])
	firstRefused := rows[1+p.Capacity] // after the header and the allowance
	require.Equal(t, []string{foundKeys[p.Capacity%4], payerCPF, "0", "empty", strconv.Itoa(int(p.RefillPeriod.Seconds())), "blocked"}, firstRefused[:6])
	require.Equal(t, p.Capacity, sim.Stats().Count(dict.OpGetEntry, http.StatusOK))
}

func TestDictLookupNotFoundAndPlainKeys(t *testing.T) {
	sim := startDictSim(t, "A", true)
	clock := newFakeTime(testEpoch)
	// One key per line, the payer from --payer; a comment; a key the
	// directory does not hold.
	// They come from stdin ("-").
	keys := "# to check\n+5561988880000\n+5561900000000\n"
	code, stdout, stderr := runIn(context.Background(), clock, keys, nil, "dict-lookup", "--db", "sqlite://"+filepath.Join(t.TempDir(), "b.db"),
		"--dict-url", sim.URL(), "--payer", "11222333000181", "--json", "-")
	require.Equal(t, ExitOK, code, stderr)
	items, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
	require.Equal(t, 2, sum.Sent)
	require.Equal(t, http.StatusOK, items[0].Status)
	require.Equal(t, "11222333000181", items[0].Payer)
	require.Equal(t, http.StatusNotFound, items[1].Status)
	require.Equal(t, "EntryNotFound", items[1].Reason)
	require.Equal(t, "no entry for this key", items[1].Message)
}

func TestDictLookupInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := startDictSim(t, "A", false)
	// Ctrl-C arrives while the first lookup is answered (after the
	// category was learned from GET /policies/).
	var once sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sim.ServeHTTP(w, r)
		if strings.Contains(r.URL.Path, "/entries/") {
			once.Do(cancel)
		}
	}))
	defer hs.Close()
	code, stdout, stderr := runIn(ctx, nil, "", nil, "dict-lookup", "--db", "sqlite://"+filepath.Join(t.TempDir(), "b.db"),
		"--dict-url", hs.URL, "--json", keysFile(t, 3))
	require.Equal(t, ExitFailed, code)
	oneStderrLine(t, stderr, "dict-lookup: 2 of 3 not done: 2 not processed (interrupted)")
	items, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
	require.Len(t, items, 1)
	require.Equal(t, http.StatusOK, items[0].Status)
	require.Equal(t, report.Summary{Total: 3, Sent: 1, NotProcessed: 2, Interrupted: true, ElapsedS: sum.ElapsedS}, sum)
	require.Equal(t, int64(1), sim.Stats().Count(dict.OpGetEntry, http.StatusOK))
}

// TestDictLookupInterruptedWhileWaiting: Ctrl-C while a lookup waits for
// its payer's empty bucket (--wait). The lookup was never sent and nothing
// refused it for good, so it is reported interrupted, not blocked (an
// operator reads "blocked" as the DICT refusing it), and counted with the
// lookup never reached as not processed, as sifen-send counts the documents
// it did not get to (decision 0097): the same summary line, stderr line and
// exit code.
func TestDictLookupInterruptedWhileWaiting(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"JSON", []string{"--json"}},
		{"Plain", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := startDictSim(t, "A", true)
			env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "BALDE_DICT_URL": sim.URL(), "BALDE_DICT_CATEGORY": "A"}
			// Five unknown keys at 20 tokens each empty the PF payer's 100.
			var drain strings.Builder
			for i := range 5 {
				fmt.Fprintf(&drain, "naoexiste-%d@example.com,%s\n", i, payerCPF)
			}
			code, stdout, stderr := runIn(context.Background(), newFakeTime(testEpoch), "", env, "dict-lookup", "--no-wait", writeFile(t, t.TempDir(), "drain.csv", []byte(drain.String())))
			require.Equal(t, ExitOK, code, "drain: stdout %q, stderr %q", stdout, stderr)
			sentBefore := sim.Stats()[dict.OpGetEntry]

			// Ctrl-C during the first lookup's wait: the sleep ends with
			// the context, as a real one does.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clock := newFakeTime(testEpoch, func(time.Duration) { cancel() })
			clock.interruptible = true
			out := filepath.Join(t.TempDir(), "results.csv")
			args := append([]string{"dict-lookup", "--wait", "--out", out}, tt.args...)
			code, stdout, stderr = runIn(ctx, clock, "", env, append(args, keysFile(t, 2))...)
			require.Equal(t, ExitFailed, code, "stdout %q", stdout)
			oneStderrLine(t, stderr, "dict-lookup: 2 of 2 not done: 2 not processed (interrupted)")
			require.Len(t, clock.slept(), 1, "the wait that was interrupted")

			if tt.name == "JSON" {
				items, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
				require.Len(t, items, 1, "the lookup that waited; the second was never reached")
				require.Equal(t, dictlookup.LookupInterrupted, items[0].Result)
				require.Equal(t, dictlookup.MsgLookupInterrupted, items[0].Message)
				require.Equal(t, 0, items[0].Status, "nothing answered")
				// The wait Ctrl-C cut (the whole 60 s the fake clock moved)
				// is time waited, not 0.
				require.Equal(t, report.Summary{Total: 2, NotProcessed: 2, Interrupted: true, WaitS: 60, ElapsedS: 60}, sum)
			} else {
				require.Contains(t, stdout, "interrupted "+foundKeys[0]+" payer="+payerCPF+" status=0 reason=empty")
				require.NotContains(t, stdout, "blocked "+foundKeys[0])
				require.Contains(t, stdout, "0 sent, 0 blocked, 0 skipped, 0 failed of 2 in ")
				require.Contains(t, stdout, "; interrupted, 2 not processed")
			}
			// The results file says the same: one row, for the lookup that waited.
			f, err := os.Open(out)
			require.NoError(t, err)
			defer f.Close()
			rows, err := csv.NewReader(f).ReadAll()
			require.NoError(t, err)
			require.Len(t, rows, 2)
			require.Equal(t, []string{foundKeys[0], payerCPF, "0", "empty"}, rows[1][:4])
			require.Equal(t, dictlookup.LookupInterrupted, rows[1][5])

			require.Equal(t, sentBefore, sim.Stats()[dict.OpGetEntry], "nothing sent to the DICT")
		})
	}
}

func TestDictLookupBadInput(t *testing.T) {
	sim := startDictSim(t, "A", true)
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", []byte("+5561988880000,"+payerCPF+"\n"))
	tests := []struct {
		name  string
		input string // the file's content; "" means the argument names no file
		env   map[string]string
		args  []string
		want  string
	}{
		{"MissingFile", "", nil, []string{filepath.Join(dir, "nope.csv")}, "nope.csv: no such file or directory"},
		{"MalformedLine", "+5561988880000," + payerCPF + "\nmaria.souza@example.com," + payerCPF + ",extra\n", nil, nil, "line 2: 3 fields, want key or key,payer"},
		{"BareQuote", "key,payer\n\"+5561988880000," + payerCPF + "\n", nil, nil, "extraneous or missing \" in quoted-field"},
		{"InvalidCPFKey", "11144477700," + payerCPF + "\n", nil, nil, "line 1: dict: invalid key"},
		{"InvalidPayer", "+5561988880000,11144477700\n", nil, nil, "line 1: dict: invalid payer id"},
		{"InvalidPayerFlag", "", nil, []string{"--payer", "123", good}, "--payer: dict: invalid payer id"},
		{"NoPayer", "+5561988880000\n", nil, nil, "line 1: no payer (add a payer column or --payer)"},
		{"NoKey", "key,payer\n", nil, nil, "no key to look up"},
		{"LineTooLong", "+5561988880000," + payerCPF + "\n" + strings.Repeat("a", 5000) + "@example.com," + payerCPF + "\n", nil, nil,
			"keys.csv line 2: longer than 4096 bytes"},
		{"BadSenders", "", nil, []string{"--senders", "0", good}, "--senders 0: want 1 or more"},
		{"NoDictURL", "", map[string]string{"BALDE_DICT_URL": ""}, []string{good}, "no DICT URL configured (set --dict-url or BALDE_DICT_URL)"},
		{"BadFormat", "", nil, []string{"--format", "xml", "--out", filepath.Join(dir, "r.xml"), good}, `--format "xml": want csv or json`},
		{"BadParticipant", "", nil, []string{"--dict-participant", "1234", good}, "--dict-participant"},
		{"DictURLNotHTTP", "", nil, []string{"--dict-url", "ftp://dict.example", good}, `BALDE_DICT_URL (--dict-url) "ftp://dict.example" is not an http(s) URL with a host`},
		{"PoliciesURLNotHTTP", "", map[string]string{"BALDE_DICT_POLICIES_URL": "dict-ratelimit.example"}, []string{good},
			`BALDE_DICT_POLICIES_URL (--dict-policies-url) "dict-ratelimit.example" is not an http(s) URL with a host`},
		{"TwoFiles", "", nil, []string{good, good}, "want exactly one FILE.csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BALDE_DICT_URL": sim.URL(), "BALDE_DB": "sqlite://" + filepath.Join(dir, "b.db")}
			for k, v := range tt.env {
				env[k] = v
			}
			args := append([]string{"dict-lookup"}, tt.args...)
			if tt.input != "" {
				args = append(args, writeFile(t, t.TempDir(), "keys.csv", []byte(tt.input)))
			}
			code, stdout, stderr := runIn(context.Background(), nil, "", env, args...)
			require.Equal(t, ExitUsage, code, stdout)
			oneStderrLine(t, stderr, tt.want)
		})
	}
	require.Empty(t, sim.Stats(), "nothing sent")
	_, err := os.Stat(filepath.Join(dir, "b.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "the database was not even opened")
	_, err = os.Stat(filepath.Join(dir, "r.xml"))
	require.ErrorIs(t, err, os.ErrNotExist)

	code, stdout, _ := runIn(context.Background(), nil, "", nil, "dict-lookup", "--help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, stdout, "balde dict-lookup --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url")
}

// TestDictCategoryLearnedAtStart: until the DICT says otherwise the
// participant is in the strictest category (H); dict-lookup and serve ask
// GET /policies/ when they start, keep the answer in the database and reuse
// it while fresh (POLICIES_LIST allows 6 a minute). Before, the CLI
// defaulted to A (50,000 tokens) and never asked.
func TestDictCategoryLearnedAtStart(t *testing.T) {
	ctx := context.Background()
	require.Equal(t, "", settings.Default().DictCategory, "no category until learned")
	participantCapacity := func(eng *balde.Engine) int64 {
		p, err := eng.DictCatalog().Resolve(eng.DictCatalog().Key(dict.PolicyEntriesReadParticipantAntiscan, "12345678"))
		require.NoError(t, err)
		return p.Capacity
	}
	open := func(t *testing.T, db, url string) *balde.Engine {
		cfg := settings.Default()
		cfg.DB = db
		dc := cfg.DictConfig(url)
		eng, err := openEngine(ctx, cfg, balde.Config{Clock: throttle.NewManualClock(testEpoch).Now, Dict: &dc})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(ctx)) })
		require.NoError(t, jobs.LearnCategory(ctx, eng.Dict(), eng.Logger()))
		return eng
	}

	t.Run("LearnedAndReused", func(t *testing.T) {
		sim := startDictSim(t, "C", true)
		db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
		eng := open(t, db, sim.URL())
		require.Equal(t, "C", eng.DictCatalog().Category())
		require.Equal(t, int64(30000), participantCapacity(eng))
		require.Equal(t, int64(1), sim.Stats().Count(dict.OpListBucketStates, http.StatusOK))

		// A second process on the same database reuses what was learned.
		eng = open(t, db, sim.URL())
		require.Equal(t, "C", eng.DictCatalog().Category())
		require.Equal(t, int64(1), sim.Stats().Count(dict.OpListBucketStates, http.StatusOK), "not asked again while fresh")
	})
	t.Run("StrictestUntilKnown", func(t *testing.T) {
		sim := startDictSim(t, "A", true)
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/policies/") {
				http.Error(w, "maintenance", http.StatusServiceUnavailable)
				return
			}
			sim.ServeHTTP(w, r)
		}))
		t.Cleanup(down.Close)
		eng := open(t, "sqlite://"+filepath.Join(t.TempDir(), "balde.db"), down.URL)
		require.Equal(t, "", eng.DictCatalog().Category())
		require.Equal(t, int64(50), participantCapacity(eng), "category H")
	})
}

// TestDictLookupKilledMidRequest: a dict-lookup killed (kill -9) while the
// DICT has charged its 404 but before the answer arrived leaves the mirror
// no more generous than the DICT: the hold already counted the worst case.
// (With the old 1-token reservation the mirror kept 99 tokens where the
// DICT had 80.) A gate in front of the simulator lets the lookup be charged
// and keeps its answer until the connection closes, so the kill always
// lands mid-request however slow the machine.
func TestDictLookupKilledMidRequest(t *testing.T) {
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
		Category: "A", FakeClock: true, Start: testEpoch, Logger: discardLogger,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	charged := make(chan struct{}, 1)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/entries/") {
			sim.ServeHTTP(w, r)
			return
		}
		sim.ServeHTTP(httptest.NewRecorder(), r) // charged; the answer is held back
		charged <- struct{}{}
		select { // until the killed client's connection closes
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(gate.Close)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	code, _, stderr := runIn(context.Background(), nil, "", nil, "migrate", "--db", db, "up")
	require.Equal(t, ExitOK, code, stderr)

	keys := writeFile(t, t.TempDir(), "keys.csv", []byte("key,payer\nnaoexiste@example.com,"+payerCPF+"\n"))
	child := childCommand(t, testEpoch, "dict-lookup", "--db", db, "--dict-url", gate.URL, "--no-wait", "--json", keys)
	require.NoError(t, child.Start())
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case <-charged:
	case err := <-done:
		t.Fatalf("dict-lookup exited (%v) before its lookup was charged", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the DICT did not charge the lookup within 30 s")
	}
	n, _ := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payerCPF)
	require.Equal(t, int64(80), n, "the DICT charged the 404")
	require.NoError(t, child.Process.Kill())
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed process did not exit within 10 s")
	}

	cfg := settings.Default()
	cfg.DB = db
	ctx := context.Background()
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: throttle.NewManualClock(testEpoch).Now})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(ctx)) }()
	st, err := eng.Limiter().State(ctx, eng.DictCatalog().Key(dict.PolicyEntriesReadUserAntiscan, payerCPF))
	require.NoError(t, err)
	remote, _ := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payerCPF)
	require.LessOrEqual(t, st.Tokens, remote, "the mirror is never more generous than the DICT")
	require.Equal(t, int64(80), st.Tokens)
}
