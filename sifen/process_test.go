package sifen_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// The multi-process tests re-execute the test binary: the child runs
// TestHelperProcess, which sends documents with its own Sender on the
// parent's database (standing for the web handler or the batch command).
const (
	envChild  = "BALDE_SIFEN_CHILD"      // "send"
	envDSN    = "BALDE_SIFEN_CHILD_DSN"  // the database
	envSim    = "BALDE_SIFEN_CHILD_SIM"  // the simulator's URL
	envIDs    = "BALDE_SIFEN_CHILD_IDS"  // documents to send, one Send each: "1,2,3"
	envClock  = "BALDE_SIFEN_CHILD_AT"   // the child's fixed fake time (RFC 3339)
	envWaitGo = "BALDE_SIFEN_CHILD_WAIT" // "1": print READY, then wait for a line on stdin
)

// childResult is what a child prints for each Send, on a line "RESULT {json}".
type childResult struct {
	ID     int64               `json:"id"`
	Status sifen.LotSendStatus `json:"status"`
	Reason string              `json:"reason"`
	Wait   time.Duration       `json:"wait"`
	Err    string              `json:"err"`
	RUC    string              `json:"ruc"`
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv(envChild) != "send" {
		t.Skip("the child of the multi-process tests")
	}
	at, err := time.Parse(time.RFC3339Nano, os.Getenv(envClock))
	require.NoError(t, err)
	clock := throttle.NewManualClock(at)
	store, err := alldrivers.Open(context.Background(), os.Getenv(envDSN), sqlstore.Options{Clock: clock.Now})
	require.NoError(t, err)
	defer store.Close()
	_, sender := newSender(t, store, store, os.Getenv(envSim), sifen.PolicyConfig{}, clock.Now, sifen.SenderConfig{})
	if os.Getenv(envWaitGo) == "1" {
		fmt.Println("READY")
		_, err := bufio.NewReader(os.Stdin).ReadString('\n')
		require.NoError(t, err)
	}
	for _, s := range strings.Split(os.Getenv(envIDs), ",") {
		id, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		out, err := sender.Send(context.Background(), id)
		r := childResult{ID: id, Status: out.Status, RUC: out.RUC.Number}
		if out.Blocked() != nil {
			r.Reason, r.Wait = out.Blocked().Reason.String(), out.Blocked().Wait
		}
		if err != nil {
			r.Err = err.Error()
		}
		b, err := json.Marshal(r)
		require.NoError(t, err)
		fmt.Printf("RESULT %s\n", b)
	}
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *bytes.Buffer
}

func startChild(t *testing.T, w *world, ids []int64, waitGo bool) *child {
	t.Helper()
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = strconv.FormatInt(id, 10)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envChild+"=send", envDSN+"="+w.dsn, envSim+"="+w.simURL,
		envIDs+"="+strings.Join(strs, ","), envClock+"="+w.clock.Now().Format(time.RFC3339Nano))
	if waitGo {
		cmd.Env = append(cmd.Env, envWaitGo+"=1")
	}
	c := &child{cmd: cmd, lines: make(chan string, 100), stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// A child still running when the test ends is killed, by its pid.
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = waitfor.Cmd(t, cmd, 10*time.Second, "killed child at cleanup")
		}
	})
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// expect returns the next output line starting with prefix (without it).
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended before printing %q; stderr:\n%s", prefix, c.stderr)
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
		case <-deadline:
			t.Fatalf("child did not print %q within 60 s", prefix)
		}
	}
}

// results reads n RESULT lines and waits for the child to exit.
func (c *child) results(t *testing.T, n int) []childResult {
	t.Helper()
	var out []childResult
	for range n {
		var r childResult
		require.NoError(t, json.Unmarshal([]byte(c.expect(t, "RESULT ")), &r))
		out = append(out, r)
	}
	require.NoError(t, waitfor.Cmd(t, c.cmd, 60*time.Second, "child after its results; stderr:\n%s", c.stderr), "stderr:\n%s", c.stderr)
	return out
}

// TestTwoProcessesShareTheCooldown: two processes (the web handler and the
// batch command) send, at the same instant, one document each for the same
// four RUCs on one database. For each RUC exactly one lot goes and the
// other is refused locally with the exact wait; the simulator sees one
// request per RUC and never two within its interval.
func TestTwoProcessesShareTheCooldown(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Interval: time.Hour}})
		rucs := []string{"80069563", "88888801", "800695", "3437941"}
		var idsA, idsB []int64
		for _, ruc := range rucs {
			ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{RUC: ruc, Number: 1}.File(), sifentest.Doc{RUC: ruc, Number: 2}.File())
			idsA, idsB = append(idsA, ids[0]), append(idsB, ids[1])
		}
		a, b := startChild(t, w, idsA, true), startChild(t, w, idsB, true)
		a.expect(t, "READY")
		b.expect(t, "READY")
		for _, c := range []*child{a, b} {
			_, err := io.WriteString(c.stdin, "go\n")
			require.NoError(t, err)
		}
		results := append(a.results(t, len(rucs)), b.results(t, len(rucs))...)

		sent, blocked := map[string]int{}, map[string]int{}
		for _, r := range results {
			require.Empty(t, r.Err)
			switch r.Status {
			case sifen.OutcomeSent:
				sent[r.RUC]++
			case sifen.OutcomeBlocked:
				blocked[r.RUC]++
				require.Equal(t, "cooldown", r.Reason)
				require.Equal(t, sifen.DefaultInterval, r.Wait, "both children stand at the same instant")
			default:
				t.Fatalf("unexpected outcome %+v", r)
			}
		}
		st := w.stats(t)
		for _, ruc := range rucs {
			require.Equal(t, 1, sent[ruc], ruc)
			require.Equal(t, 1, blocked[ruc], ruc)
			require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "test", ruc, sifen.CodeLotQueued), ruc)
			docs, err := w.sender.List(context.Background(), sifen.Filter{RUC: ruc})
			require.NoError(t, err)
			statuses := map[sifen.Status]int{}
			for _, d := range docs {
				statuses[d.Status]++
			}
			require.Equal(t, map[sifen.Status]int{sifen.StatusSent: 1, sifen.StatusDraft: 1}, statuses, ruc)
		}
		require.Equal(t, int64(0), st.ByCode[sifen.CodeLotNotQueued])
		require.Equal(t, int64(len(rucs)), st.Total)
	})
}

// TestCrashBetweenSendingAndAnswer kills (SIGKILL) a child process while its
// request is held by the simulator: after the answer was recorded by SIFEN
// but before the child read it, or before SIFEN recorded anything. Resolve
// then settles the document from siConsDE, and it is never sent twice.
func TestCrashBetweenSendingAndAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lost       string // "answer" or "request"
		wantStatus sifen.Status
		wantCode   string
	}{
		{"AnswerLost", "answer", sifen.StatusApproved, sifen.CodeDEFound},
		{"RequestLost", "request", sifen.StatusDraft, sifen.CodeDENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
				arrived, release := make(chan struct{}, 1), make(chan struct{})
				var held atomic.Bool
				// hold holds the first request until its sender is gone, and
				// reports whether it did.
				hold := func(ctx context.Context) bool {
					if !held.CompareAndSwap(false, true) {
						return false
					}
					arrived <- struct{}{}
					select {
					case <-ctx.Done(): // the child's connection died with it
					case <-release:
					}
					return true
				}
				cfg := worldConfig{sim: sifensim.Config{Processing: time.Minute}}
				if tc.lost == "answer" {
					cfg.sim.AfterRecepcion = func(ctx context.Context, _ sifensim.Recepcion) { hold(ctx) }
				} else {
					cfg.sim.BeforeRecepcion = func(ctx context.Context, _ sifensim.Recepcion) error {
						if hold(ctx) {
							return errors.New("lost with the sender")
						}
						return nil
					}
				}
				w := newWorld(t, engine, cfg)
				t.Cleanup(func() { close(release) })
				ctx := context.Background()
				doc := sifentest.Doc{Number: 42}
				ids := w.importDocs(t, sifen.EnvTest, doc.File())

				c := startChild(t, w, ids, false)
				select {
				case <-arrived:
				case <-time.After(60 * time.Second):
					t.Fatalf("the child's request never arrived; stderr:\n%s", c.stderr)
				}
				require.Equal(t, sifen.StatusSending, w.doc(t, ids[0]).Status)
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
				err := waitfor.Cmd(t, c.cmd, 10*time.Second, "child killed with SIGKILL")
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())

				// The document is still "sending": no one can resend it until
				// Resolve settles it, which it does once the claim is stale.
				_, err = w.sender.Send(ctx, ids[0])
				require.ErrorIs(t, err, sifen.ErrNotSendable)
				w.requireResolvedOnceStale(t, sifen.Resolved{DocumentID: ids[0], CDC: doc.CDC(), Code: tc.wantCode, Status: tc.wantStatus})

				out, err := w.sender.Send(ctx, ids[0])
				if tc.wantStatus == sifen.StatusApproved {
					require.ErrorIs(t, err, sifen.ErrNotSendable)
				} else {
					require.NoError(t, err)
					require.Equal(t, sifen.OutcomeSent, out.Status)
				}
				st := w.stats(t)
				require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "test", "80069563", sifen.CodeLotQueued), "queued exactly once")
				require.Equal(t, int64(0), st.ByCode[sifen.CodeLotNotQueued])

				// The throttle saw the child's take: the ledger says so.
				n, err := inspect.New(w.limiter, w.store).CountLedger(ctx, inspect.LedgerQuery{Reasons: []throttle.LedgerReason{throttle.LedgerTake}})
				require.NoError(t, err)
				if tc.wantStatus == sifen.StatusApproved {
					require.Equal(t, int64(1), n)
				} else {
					require.Equal(t, int64(2), n)
				}
			})
		})
	}
}
