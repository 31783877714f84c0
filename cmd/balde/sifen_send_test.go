package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// threeLotsOfOneRUC writes three DEs of RUC 80069563 of three types: three
// lots, each waiting for the RUC's cooldown after the previous one.
func threeLotsOfOneRUC(t *testing.T) (dir string, cdcs []string) {
	t.Helper()
	dir = t.TempDir()
	for i, typ := range []int{1, 5, 4} {
		d := sifentest.Doc{RUC: "80069563", Type: typ, Number: i + 1}
		writeFile(t, dir, []string{"a.xml", "b.xml", "c.xml"}[i], d.File())
		cdcs = append(cdcs, d.CDC())
	}
	return dir, cdcs
}

func documentStatuses(t *testing.T, db string) map[string]int {
	t.Helper()
	store, err := alldrivers.Open(context.Background(), db, sqlstore.Options{})
	require.NoError(t, err)
	defer store.Close()
	var rows []struct {
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	require.NoError(t, store.ReadDB().Select(&rows, `SELECT status, COUNT(*) AS n FROM balde_documents GROUP BY status`))
	out := make(map[string]int)
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out
}

// waitNothingSending waits (at most a minute) until no document of db is
// in "sending": every lot claimed has its answer recorded.
func waitNothingSending(t *testing.T, db string) {
	store, err := alldrivers.Open(context.Background(), db, sqlstore.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	defer store.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Millisecond) {
		var n int
		if err := store.ReadDB().Get(&n, `SELECT COUNT(*) FROM balde_documents WHERE status = 'sending'`); err != nil {
			t.Error(err)
			return
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d document(s) still sending after a minute", n)
			return
		}
	}
}

func TestSifenSendWait(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := newFakeTime(testEpoch)
		sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: 5 * time.Second})
		dir, cdcs := threeLotsOfOneRUC(t)
		db := sqlstoretest.DSN(t, engine)
		env := map[string]string{"SIFEN_THROTTLE_SECONDS": "7", "BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}

		code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--json", dir)
		require.Equal(t, ExitOK, code, stderr)

		// Each lot after the first waited exactly the configured cooldown.
		require.Equal(t, []time.Duration{7 * time.Second, 7 * time.Second}, clock.slept())
		items, sum := jsonLines[report.SifenRecord](t, stdout)
		require.Len(t, items, 3)
		var waits []float64
		for i, it := range items {
			require.Equal(t, report.Sent, it.Result, it.Message)
			require.Equal(t, cdcs[i], it.CDC)
			require.Equal(t, "80069563-1", it.RUC)
			require.Equal(t, "test", it.Env)
			require.Equal(t, sifensim.CodeLotQueued, it.Code)
			require.NotEmpty(t, it.Lot)
			require.Equal(t, filepath.Join(dir, []string{"a.xml", "b.xml", "c.xml"}[i]), it.File)
			waits = append(waits, it.WaitS)
		}
		require.Equal(t, []float64{0, 7, 7}, waits)
		require.Equal(t, report.Summary{Total: 3, Sent: 3, WaitS: 14, ElapsedS: 14}, sum)
		require.Equal(t, map[string]int{cdcs[0]: 1, cdcs[1]: 1, cdcs[2]: 1}, sim.queuedCounts())
		require.Equal(t, int64(0), sim.Stats().Count("siRecepLoteDE", "", "", "0301"))

		// A second run finds every document sent: nothing goes out again.
		clock.Advance(time.Hour)
		code, stdout, stderr = runIn(context.Background(), clock, "", env, "sifen-send", dir)
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "0 sent, 0 blocked, 3 skipped, 0 failed of 3")
		require.Equal(t, 3, strings.Count(stdout, "CDC already sent"))
		require.Equal(t, int64(3), sim.Stats().Count("siRecepLoteDE", "", "", ""))
	})
}

func TestSifenSendNoWait(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: 5 * time.Second})
	dir, _ := threeLotsOfOneRUC(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"SIFEN_THROTTLE_SECONDS": "7", "BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}

	t.Run("NoWait", func(t *testing.T) {
		code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--no-wait", "--json", dir)
		require.Equal(t, ExitFailed, code)
		oneStderrLine(t, stderr, "sifen-send: 2 of 3 not done: 2 blocked")
		require.Empty(t, clock.slept())
		items, sum := jsonLines[report.SifenRecord](t, stdout)
		require.Equal(t, []report.Result{report.Sent, report.Blocked, report.Blocked}, []report.Result{items[0].Result, items[1].Result, items[2].Result})
		require.Equal(t, 7.0, items[1].WaitS)
		require.Contains(t, items[1].Message, "blocked: cooldown on SIFEN_RECEPCION_LOTE/test/80069563, retry in 7s")
		require.Equal(t, report.Summary{Total: 3, Sent: 1, Blocked: 2}, sum)
		require.Equal(t, map[string]int{"draft": 2, "error": 0, "sent": 1}, withZero(documentStatuses(t, db), "error"))
	})
	t.Run("BeyondMaxWait", func(t *testing.T) {
		// The blocked documents are sent on this run: one now, one after
		// the cooldown would be needed, beyond --max-wait.
		clock.Advance(time.Minute)
		code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--max-wait", "5s", dir)
		require.Equal(t, ExitFailed, code)
		oneStderrLine(t, stderr, "1 blocked")
		require.Empty(t, clock.slept())
		require.Contains(t, stdout, "(beyond --max-wait 5s)")
		require.Contains(t, stdout, "1 sent, 1 blocked, 1 skipped, 0 failed of 3")
	})
	require.Equal(t, int64(2), sim.Stats().Count("siRecepLoteDE", "", "", "0300"))
}

// withZero adds key with 0 when missing.
func withZero(m map[string]int, keys ...string) map[string]int {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			m[k] = 0
		}
	}
	return m
}

func TestSifenSendInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ctrl-C arrives while the first lot is at SIFEN, before its answer.
	sim := startSifenSim(t, sifensim.Config{AfterRecepcion: func(context.Context, sifensim.Recepcion) { cancel() }})
	dir := t.TempDir()
	for i, ruc := range []string{"80069563", "88888801", "80000005"} {
		lot, _ := sifenLot(ruc, 1, 2)
		writeFile(t, dir, ruc+".xml", lot)
		_ = i
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")

	code, stdout, stderr := runIn(ctx, nil, "", nil, "sifen-send", "--db", db, "--sifen-url", sim.URL, "--json", dir)
	require.Equal(t, ExitFailed, code)
	oneStderrLine(t, stderr, "4 not processed (interrupted)")
	items, sum := jsonLines[report.SifenRecord](t, stdout)
	require.Len(t, items, 2)
	require.Equal(t, report.Sent, items[0].Result)
	require.Equal(t, report.Sent, items[1].Result)
	require.Equal(t, report.Summary{Total: 6, Sent: 2, NotProcessed: 4, Interrupted: true, ElapsedS: sum.ElapsedS}, sum)
	require.Equal(t, int64(1), sim.Stats().Count("siRecepLoteDE", "", "", ""))
	// Nothing half-sent: the lot's answer was recorded.
	require.Equal(t, map[string]int{"sent": 2, "draft": 4}, documentStatuses(t, db))
}

func TestSifenSendSplitsALotTooBig(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{Interval: -1})
	dir := t.TempDir()
	// Two DEs of 700 KB that does not compress: together over 1000 KB.
	writeFile(t, dir, "big.xml", sifentest.Lote(
		sifentest.Doc{RUC: "80069563", Number: 1, Filler: 700 << 10},
		sifentest.Doc{RUC: "80069563", Number: 2, Filler: 700 << 10}))
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(time.Now())
	code, stdout, stderr := runIn(context.Background(), clock, "", nil, "sifen-send", "--db", db, "--sifen-url", sim.URL, "--sifen-throttle", "1", "--json", dir)
	require.Equal(t, ExitOK, code, stderr)
	items, sum := jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, 2, sum.Sent)
	require.NotEqual(t, items[0].Lot, items[1].Lot, "sent in two lots")
	require.Equal(t, []time.Duration{time.Second}, clock.slept())
}

func TestSifenSendBadInput(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{})
	dir := t.TempDir()
	good := writeFile(t, dir, "good.xml", sifentest.Doc{Number: 1}.File())
	badDV := writeFile(t, dir, "bad_dv.xml", sifentest.Doc{Number: 2, BadDV: true}.File())
	twice := writeFile(t, dir, "twice.xml", sifentest.Doc{Number: 1}.File())
	malformed := writeFile(t, dir, "malformed.xml", []byte("<rDE"))
	unsigned := writeFile(t, dir, "unsigned.xml", sifentest.Doc{Number: 3, Unsigned: true}.File())
	huge := writeFile(t, dir, "huge.xml", append(sifentest.Doc{Number: 4}.File(), bytes.Repeat([]byte(" "), 8<<20)...))
	deep := writeFile(t, dir, "deep.xml", []byte(`<rDE xmlns="`+sifen.Namespace+`">`+strings.Repeat("<x>", 30000)+strings.Repeat("</x>", 30000)+`</rDE>`))
	empty := t.TempDir()
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")

	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"MissingFile", nil, []string{filepath.Join(dir, "nope.xml")}, "nope.xml: no such file or directory"},
		{"EmptyDir", nil, []string{empty}, "no .xml file in the directory"},
		{"WrongCheckDigit", nil, []string{good, badDV}, "1 invalid document(s), nothing sent: " + badDV + ": sifen: wrong RUC check digit"},
		{"Malformed", nil, []string{malformed, good}, "nothing sent: " + malformed + ": sifen: malformed XML"},
		{"CDCTwice", nil, []string{good, twice}, "is also in " + good},
		{"UnknownEnv", nil, []string{"--env", "staging", good}, `--env "staging": want test or prod`},
		{"NoSifenURL", map[string]string{"BALDE_SIFEN_URL": ""}, []string{good}, "no SIFEN URL configured (set --sifen-url or BALDE_SIFEN_URL"},
		{"NoFile", nil, nil, "no FILE or DIR to send"},
		{"WaitAndNoWait", nil, []string{"--wait", "--no-wait", good}, "--wait and --no-wait contradict each other"},
		{"BadMaxWait", nil, []string{"--max-wait", "soon", good}, "invalid value"},
		{"BadThrottleEnv", map[string]string{"SIFEN_THROTTLE_SECONDS": "ten"}, []string{good}, "SIFEN_THROTTLE_SECONDS"},
		{"ZeroThrottle", map[string]string{"SIFEN_THROTTLE_SECONDS": "0"}, []string{good}, "must be more than 0 seconds"},
		{"BadBlockStepEnv", map[string]string{"BALDE_SIFEN_BLOCK_STEP": "1m"}, []string{good}, `BALDE_SIFEN_BLOCK_STEP: "1m" is not a duration from 10m to 24h`},
		{"BadBlockMaxFlag", nil, []string{"--sifen-block-max", "2h", "--sifen-block-step", "3h", good}, "BALDE_SIFEN_BLOCK_MAX (--sifen-block-max) 2h0m0s is shorter than BALDE_SIFEN_BLOCK_STEP (--sifen-block-step) 3h0m0s"},
		{"TooBig", nil, []string{huge}, "larger than 8 MB"},
		{"TooDeep", nil, []string{deep}, "nested deeper than 64"},
		{"TestDEToProd", nil, []string{"--env", "prod", good}, "and cannot go to prod"},
		{"Unsigned", nil, []string{unsigned}, "not signed"},
		{"UnsignedToProd", nil, []string{"--env", "prod", "--allow-unsigned", unsigned}, "--allow-unsigned is for the test environment only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}
			for k, v := range tt.env {
				env[k] = v
			}
			code, _, stderr := runIn(context.Background(), nil, "", env, append([]string{"sifen-send"}, tt.args...)...)
			require.Equal(t, ExitUsage, code)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			require.Contains(t, lines[len(lines)-1], tt.want)
			if !strings.Contains(tt.name, "Bad") || strings.Contains(tt.name, "Throttle") || strings.Contains(tt.name, "Block") {
				require.Len(t, lines, 1, stderr)
			}
		})
	}
	require.Equal(t, int64(0), sim.Stats().Total, "nothing sent")
	_, err := os.Stat(strings.TrimPrefix(db, "sqlite://"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing stored: the database was not even opened")

	code, stdout, _ := runIn(context.Background(), nil, "", nil, "sifen-send", "--help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, stdout, "Example:\n  balde sifen-send --env test --sifen-url official")
}

// TestSifenSendBadSifenURL: a SIFEN URL that is not http(s) stops the run
// with exit 2 before any document is stored or claimed (it used to leave
// them in "sending", the request failing after the claim).
func TestSifenSendBadSifenURL(t *testing.T) {
	file := writeFile(t, t.TempDir(), "de.xml", sifentest.Doc{Number: 1}.File())
	path := filepath.Join(t.TempDir(), "balde.db")
	code, _, stderr := runIn(context.Background(), nil, "", nil, "sifen-send", "--db", "sqlite://"+path, "--sifen-url", "ftp://sifen.example/{env}", file)
	require.Equal(t, ExitUsage, code, stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr: %s", stderr)
	require.Contains(t, stderr, `"ftp://sifen.example/{env}" is not an http(s) URL`)
	// Nothing stored: the URL is checked before the database is even opened.
	require.NoFileExists(t, path)
}

// TestSifenSendKill9 kills a sifen-send process (SIGKILL) while its third
// lot is at SIFEN, unanswered, then runs it again once the claim is old
// enough to resolve: every document reaches SIFEN exactly once and none is
// left in "sending".
func TestSifenSendKill9(t *testing.T) {
	const lots, killAt = 6, 3
	reached := make(chan struct{})
	killed := make(chan struct{})
	var n atomic.Int32
	sim := startSifenSim(t, sifensim.Config{AfterRecepcion: func(ctx context.Context, r sifensim.Recepcion) {
		if n.Add(1) == killAt {
			close(reached)
			select { // hold the answer until the sender is dead
			case <-killed:
			case <-time.After(10 * time.Second):
			}
		}
	}})
	dir := t.TempDir()
	var cdcs []string
	for i := range lots {
		ruc := []string{"80069563", "88888801", "80000005", "80012345", "80054321", "80099999"}[i]
		lot, c := sifenLot(ruc, 1, 2)
		writeFile(t, dir, ruc+".xml", lot)
		cdcs = append(cdcs, c...)
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")

	child := childCommand(t, time.Time{}, "sifen-send", "--db", db, "--sifen-url", sim.URL, "--json", dir)
	var childOut strings.Builder
	child.Stdout = &childOut
	require.NoError(t, child.Start())
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		_ = child.Process.Kill()
		t.Fatalf("the child did not reach lot %d; output:\n%s", killAt, childOut.String())
	}
	require.NoError(t, child.Process.Kill())
	err := waitfor.Cmd(t, child, 10*time.Second, "sifen-send killed with SIGKILL")
	require.ErrorContains(t, err, "signal: killed")
	close(killed)
	require.Equal(t, map[string]int{"sent": 4, "sending": 2, "draft": 6}, documentStatuses(t, db))

	// Run again at once: the two documents of the unanswered lot may still
	// be in a live send elsewhere, so they are left alone, watched until no
	// request of that send can be on the wire (DefaultInFlightFor after its
	// claim, a minute from now), then reported blocked; nothing is sent
	// twice.
	later := newFakeTime(time.Now().Add(time.Minute))
	code, stdout, stderr := runIn(context.Background(), later, "", nil, "sifen-send", "--db", db, "--sifen-url", sim.URL, "--json", dir)
	require.Equal(t, ExitFailed, code, stderr)
	items, sum := jsonLines[report.SifenRecord](t, stdout)
	require.LessOrEqual(t, sum.WaitS, (sifen.DefaultInFlightFor-time.Minute).Seconds()+1)
	sum.WaitS, sum.ElapsedS = 0, 0
	require.Equal(t, report.Summary{Total: 12, Sent: 6, Skipped: 4, Blocked: 2}, sum)
	for _, it := range items {
		if it.Result == report.Blocked {
			require.Contains(t, it.Message, "left in sending by a send without answer since ")
		}
	}

	// After ResolveAfter, the rerun asks SIFEN about them (found: approved).
	later.Advance(sifen.DefaultResolveAfter)
	code, stdout, stderr = runIn(context.Background(), later, "", nil, "sifen-send", "--db", db, "--sifen-url", sim.URL, "--json", dir)
	require.Equal(t, ExitOK, code, stderr)
	_, sum = jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, report.Summary{Total: 12, Skipped: 12}, sum)

	want := make(map[string]int)
	for _, c := range cdcs {
		want[c] = 1
	}
	require.Equal(t, want, sim.queuedCounts(), "every document queued exactly once")
	require.Equal(t, int64(lots), sim.Stats().Count("siRecepLoteDE", "", "", "0300"))
	require.Equal(t, int64(0), sim.Stats().Count("siRecepLoteDE", "", "", "0301"))
	require.Equal(t, map[string]int{"sent": 10, "approved": 2}, documentStatuses(t, db))
}

// TestSifenSendRejected: a document SIFEN rejected is not sent again by a
// rerun while its file is unchanged; once corrected (same CDC, new XML) it
// is.
func TestSifenSendRejected(t *testing.T) {
	clock := newFakeTime(testEpoch)
	bad := sifentest.Doc{RUC: "80069563", Number: 2}
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Reject: func(_ string, de sifensim.DE) (string, string, bool) {
		return "1001", "CDC duplicado", de.CDC == bad.CDC()
	}})
	dir := t.TempDir()
	writeFile(t, dir, "lot.xml", sifentest.Lote(sifentest.Doc{RUC: "80069563", Number: 1}, bad))
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}
	ctx := context.Background()
	code, _, stderr := runIn(ctx, clock, "", env, "sifen-send", dir)
	require.Equal(t, ExitOK, code, stderr)

	// What serve does in the background: query the lot once it is due.
	clock.Advance(sifen.DefaultConsultaInterval)
	cfg := settings.Default()
	cfg.DB = db
	sc, err := sifenConfig(cfg, sim.URL, nil)
	require.NoError(t, err)
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now, Sifen: sc})
	require.NoError(t, err)
	_, err = eng.Sifen().Poll(ctx)
	require.NoError(t, err)
	require.NoError(t, eng.Close(ctx))
	require.Equal(t, map[string]int{"approved": 1, "rejected": 1}, documentStatuses(t, db))

	code, stdout, stderr := runIn(ctx, clock, "", env, "sifen-send", "--json", dir)
	require.Equal(t, ExitOK, code, stderr)
	items, sum := jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, report.Summary{Total: 2, Skipped: 2}, sum)
	require.Equal(t, "rejected by SIFEN (Rechazado: 1001 CDC duplicado); correct the document to send it again", items[1].Message)
	require.Equal(t, int64(1), sim.Stats().Count("siRecepLoteDE", "", "", ""))

	// The corrected document has the same CDC and another XML.
	fixed := bad
	fixed.Filler = 10
	require.Equal(t, bad.CDC(), fixed.CDC())
	writeFile(t, dir, "lot.xml", sifentest.Lote(sifentest.Doc{RUC: "80069563", Number: 1}, fixed))
	code, stdout, stderr = runIn(ctx, clock, "", env, "sifen-send", "--json", dir)
	require.Equal(t, ExitOK, code, stderr)
	items, sum = jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, report.Summary{Total: 2, Sent: 1, Skipped: 1}, sum)
	require.Equal(t, report.Sent, items[1].Result)
	require.Equal(t, map[string]int{bad.CDC(): 2, sifentest.Doc{RUC: "80069563", Number: 1}.CDC(): 1}, sim.queuedCounts())
}

// TestSifenSendFollow: issue 11 point 2. Lot results used never to be
// fetched: documents stayed "sent" forever, and a corrected DE could not be
// imported again after its rejection ("CDC already sent"). With --follow the
// batch waits for its lot's result (the first query 10 minutes after the
// send, as DNIT asks), reports each document approved (with dProtAut, and
// observations) or rejected (with SIFEN's code), and a corrected DE goes
// again under the same CDC; an approved one never does.
func TestSifenSendFollow(t *testing.T) {
	clock := newFakeTime(testEpoch)
	docs := sifentest.Docs("80069563", 1, 3)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: 5 * time.Second, Processing: time.Minute,
		Reject: func(_ string, de sifensim.DE) (string, string, bool) {
			return "1111", "rechazo de prueba", de.CDC == docs[1].CDC()
		},
		Observe: func(_ string, de sifensim.DE) (string, string, bool) {
			return "0261", "observación de prueba", de.CDC == docs[2].CDC()
		}})
	dir := t.TempDir()
	writeFile(t, dir, "lote.xml", sifentest.Lote(docs...))
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}

	code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--follow", dir)
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stdout, "waiting 10m")
	require.Regexp(t, `approved document 1 cdc=`+docs[0].CDC()+` lot=\d{17} result="Aprobado" dProtAut=\d+`, stdout)
	require.Regexp(t, `rejected document 2 cdc=`+docs[1].CDC()+` lot=\d{17} result="Rechazado" "Rechazado: 1111 rechazo de prueba"`, stdout)
	require.Regexp(t, `approved document 3 cdc=`+docs[2].CDC()+` .*result="Aprobado con observación" dProtAut=\d+`, stdout)
	require.Equal(t, map[string]int{"approved": 2, "rejected": 1}, documentStatuses(t, db))

	// The same in JSON: one {"lot_result": …} line per document after the summary.
	db2 := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	docs2 := sifentest.Docs("88888801", 1, 2)
	dirJSON := t.TempDir()
	writeFile(t, dirJSON, "lote.xml", sifentest.Lote(docs2...))
	code, stdout, stderr = runIn(context.Background(), clock, "", map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db2}, "sifen-send", "--follow", "--json", dirJSON)
	require.Equal(t, ExitOK, code, stderr)
	var results []report.LotResult
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r map[string]report.LotResult
		if json.Unmarshal([]byte(line), &r) == nil && r["lot_result"].CDC != "" {
			results = append(results, r["lot_result"])
		}
	}
	require.Len(t, results, 2, stdout)
	jl := strings.Split(strings.TrimSpace(stdout), "\n")
	var followed map[string]report.FollowSummary
	require.NoError(t, json.Unmarshal([]byte(jl[len(jl)-1]), &followed))
	require.Equal(t, report.FollowSummary{Approved: 2}, followed["follow"], "the follow's last line")
	for _, r := range results {
		require.Equal(t, "approved", r.Status)
		require.Equal(t, "Aprobado", r.Result)
		require.NotEmpty(t, r.AuthNumber)
	}

	// The corrected DE (same CDC, other content) is imported and sent
	// again; the approved one is skipped.
	fixed := docs[1]
	fixed.Filler = 16
	require.Equal(t, docs[1].CDC(), fixed.CDC())
	dir2 := t.TempDir()
	writeFile(t, dir2, "a.xml", fixed.File())
	writeFile(t, dir2, "b.xml", docs[0].File())
	clock.Advance(time.Minute)
	code, stdout, stderr = runIn(context.Background(), clock, "", env, "sifen-send", dir2)
	require.Equal(t, ExitOK, code, stderr)
	require.Regexp(t, `sent +\S+a\.xml cdc=`+fixed.CDC(), stdout)
	require.Regexp(t, `skipped +\S+b\.xml cdc=`+docs[0].CDC()+`.*approved`, stdout)
	require.Equal(t, 2, sim.queued[docs[1].CDC()])
	require.Equal(t, 1, sim.queued[docs[0].CDC()])
}

// TestSifenSend360DEsNoRemoteRefusal: issue 11's closing test. 360 DEs of
// three RUCs (200, 100 and 60: the big RUC's last lots go back to back),
// a simulator that takes 0.5 s to answer each lot (on the fake clock both
// share) and measures its 1 s from its answer, and balde at a 1 s interval:
// SIFEN never answers 0301. Measuring from the take, the big RUC's lots
// left 0.5 s after the previous answer.
func TestSifenSend360DEsNoRemoteRefusal(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: time.Second, Processing: time.Minute,
		AfterRecepcion: func(context.Context, sifensim.Recepcion) { clock.Advance(500 * time.Millisecond) }})
	dir := t.TempDir()
	for _, r := range []struct {
		ruc string
		n   int
	}{{"80069563", 200}, {"88888801", 100}, {"800695", 60}} {
		writeFile(t, dir, r.ruc+".xml", sifentest.Lote(sifentest.Docs(r.ruc, 1, r.n)...))
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db, "SIFEN_THROTTLE_SECONDS": "1"}

	code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--json", dir)
	require.Equal(t, ExitOK, code, stderr)
	_, sum := jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, report.Summary{Total: 360, Sent: 360, WaitS: sum.WaitS, ElapsedS: sum.ElapsedS}, sum)
	st := sim.Stats()
	require.Equal(t, int64(8), st.Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued), "lots")
	require.Equal(t, int64(0), st.ByCode[sifensim.CodeLotNotQueued], "remote refusals")
	t.Logf("360 DEs in %d lots, %d remote 0301, %.1f s waited on the fake clock",
		st.Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued), st.ByCode[sifensim.CodeLotNotQueued], sum.WaitS)
}

// TestSifenSendSaysTheIntervalIsTheDatabases: issue 11 point 4. A batch at
// 1 s on a database whose interval is 10 s (set by serve, or an earlier
// run) says so on stderr at start, and waits 10 s.
func TestSifenSendSaysTheIntervalIsTheDatabases(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: 10 * time.Second})
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	dir1, dir2 := t.TempDir(), t.TempDir()
	writeFile(t, dir1, "a.xml", sifentest.Doc{Number: 1}.File())
	writeFile(t, dir2, "b.xml", sifentest.Doc{Number: 2}.File())

	code, _, stderr := runIn(context.Background(), clock, "", map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db, "SIFEN_THROTTLE_SECONDS": "10"}, "sifen-send", dir1)
	require.Equal(t, ExitOK, code, stderr)
	require.Empty(t, stderr)

	code, _, stderr = runIn(context.Background(), clock, "", map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db, "SIFEN_THROTTLE_SECONDS": "1"}, "sifen-send", dir2)
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stderr, "balde: sifen-send: SIFEN test: this process is configured for 1s between lots of a RUC, but the database's interval is 10s (set by another process): 10s applies")
	require.Equal(t, []time.Duration{10 * time.Second}, clock.slept())
	require.Equal(t, int64(0), sim.Stats().ByCode[sifensim.CodeLotNotQueued])
}

// TestSifenSendAllowUnsigned: an unsigned DE goes to test with
// --allow-unsigned (and is refused without it, see TestSifenSendBadInput).
func TestSifenSendAllowUnsigned(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{})
	file := writeFile(t, t.TempDir(), "unsigned.xml", sifentest.Doc{Number: 5, Unsigned: true}.File())
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	code, stdout, stderr := runIn(context.Background(), nil, "", map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}, "sifen-send", "--allow-unsigned", file)
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stdout, "sent")
	require.Equal(t, int64(1), sim.Stats().Count(sifensim.ServiceRecepcionLote, "test", "80069563", sifensim.CodeLotQueued))
}

// TestSifenSendBlockStepIsConfigurable: issue 11 point 5, from the command
// line. BALDE_SIFEN_BLOCK_STEP sets the local block after SIFEN's 0301: a
// simulator at 10 s refuses the second lot of a RUC sent 1 s after the
// first, and the third lot of the run is held back for the configured step
// (the default, 10m, without the variable).
func TestSifenSendBlockStepIsConfigurable(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want float64 // seconds the third lot must wait
	}{
		{"Default", nil, 600},
		{"Step25m", map[string]string{"BALDE_SIFEN_BLOCK_STEP": "25m"}, 1500},
		{"Step15mMax20m", map[string]string{"BALDE_SIFEN_BLOCK_STEP": "15m", "BALDE_SIFEN_BLOCK_MAX": "20m"}, 900},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeTime(testEpoch)
			sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Interval: 10 * time.Second})
			dir := t.TempDir()
			writeFile(t, dir, "a.xml", sifentest.Lote(sifentest.Docs("80069563", 1, 150)...))
			env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), "SIFEN_THROTTLE_SECONDS": "1"}
			for k, v := range tt.env {
				env[k] = v
			}
			code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--json", "--max-wait", "5s", dir)
			require.Equal(t, ExitFailed, code, stderr)
			recs, _ := jsonLines[report.SifenRecord](t, stdout)
			require.Len(t, recs, 150)
			require.Equal(t, report.Result("sent"), recs[0].Result)
			require.Equal(t, sifensim.CodeLotNotQueued, recs[50].Code, "the second lot, 1 s after the first answer")
			require.Equal(t, report.Result("blocked"), recs[100].Result)
			require.Equal(t, tt.want, recs[100].WaitS, recs[100].Message)
		})
	}
}

// TestSifenSendFollowsEarlierLots: issue 11 audit, point 1. --follow used to
// follow only the lots its own run sent: a rerun whose documents were
// already sent followed nothing, and without serve nobody fetched their
// results. It now follows every lot of the database still sent, paced by
// SIFEN_CONSULTA_LOTE (the first query 10 minutes after the send), and
// with no FILE does only that.
func TestSifenSendFollowsEarlierLots(t *testing.T) {
	tests := []struct {
		name string
		args func(dir string) []string // the second run
	}{
		{"RerunOfTheSameFiles", func(dir string) []string { return []string{"sifen-send", "--follow", dir} }},
		{"NoFile", func(string) []string { return []string{"sifen-send", "--follow"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeTime(testEpoch)
			sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Processing: time.Minute})
			docs := sifentest.Docs("80069563", 1, 2)
			dir := t.TempDir()
			writeFile(t, dir, "lote.xml", sifentest.Lote(docs...))
			writeFile(t, dir, "other.xml", sifentest.Doc{RUC: "88888801", Number: 1}.File())
			db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
			env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}

			code, _, stderr := runIn(context.Background(), clock, "", env, "sifen-send", dir)
			require.Equal(t, ExitOK, code, stderr)
			require.Equal(t, map[string]int{"sent": 3}, documentStatuses(t, db))

			code, stdout, stderr := runIn(context.Background(), clock, "", env, tt.args(dir)...)
			require.Equal(t, ExitOK, code, stderr)
			require.Contains(t, stdout, "waiting 10m", "the lot-query policy paces the first query")
			for i, d := range append(docs, sifentest.Doc{RUC: "88888801", Number: 1}) {
				require.Regexp(t, `approved document \d cdc=`+d.CDC()+` lot=\d{17} result="Aprobado" dProtAut=\d+`, stdout, "document %d", i+1)
			}
			require.Equal(t, map[string]int{"approved": 3}, documentStatuses(t, db))
			st := sim.Stats()
			require.Equal(t, int64(2), st.Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued), "nothing sent twice")
			require.Equal(t, int64(2), st.Count(sifensim.ServiceConsultaLote, "", "", ""), "each lot queried once, when due")
		})
	}
}

// TestSifenSendFollowInterrupted: Ctrl-C while sending ends a --follow run
// with its summary ("1 of 2 not done"), not with the cancelled context as a
// failure of its own ("list documents: context canceled", seen in review);
// Ctrl-C while following ends it with exit 1 and one line that says what
// is true (issue 20: it said "serve keeps polling" with exit 0, with no
// serve on the database): the documents stay sent, and which command
// fetches their results. With --json the follow ends with its own
// {"follow": {...}} object saying "interrupted": true.
func TestSifenSendFollowInterrupted(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{Interval: 10 * time.Millisecond, Processing: time.Hour})
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db, "SIFEN_THROTTLE_SECONDS": "30"}
	dir := t.TempDir()
	// Two types: two lots of one RUC.
	writeFile(t, dir, "a.xml", sifentest.Lote(sifentest.Doc{Number: 1}))
	writeFile(t, dir, "b.xml", sifentest.Lote(sifentest.Doc{Number: 2, Type: 5}))

	// Ctrl-C comes during the batch's first sleep (a signal, not a timer).
	var stop context.CancelFunc
	clock := newFakeTime(testEpoch, func(time.Duration) { stop() })
	clock.interruptible = true

	// The second lot waits 30 s for the RUC's interval: Ctrl-C then.
	var ctx context.Context
	ctx, stop = context.WithCancel(context.Background())
	code, _, stderr := runIn(ctx, clock, "", env, "sifen-send", "--follow", dir)
	stop()
	require.Equal(t, ExitFailed, code, stderr)
	require.Contains(t, stderr, "1 of 2 not done")
	require.NotContains(t, stderr, "context canceled")

	// Ctrl-C while following the lot that went (processing for an hour).
	ctx, stop = context.WithCancel(context.Background())
	code, _, stderr = runIn(ctx, clock, "", env, "sifen-send", "--follow")
	stop()
	require.Equal(t, ExitFailed, code, stderr)
	require.NotContains(t, stderr, "context canceled")
	require.NotContains(t, stderr, "serve keeps polling")
	oneStderrLine(t, stderr, "interrupted while following 1 document(s): they stay sent; balde sifen-send --follow fetches their results")
	require.Equal(t, map[string]int{"sent": 1, "draft": 1}, documentStatuses(t, db))

	// The same with --json: the follow's object says it was interrupted.
	ctx, stop = context.WithCancel(context.Background())
	code, stdout, stderr := runIn(ctx, clock, "", env, "sifen-send", "--follow", "--json")
	stop()
	require.Equal(t, ExitFailed, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var last map[string]report.FollowSummary
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last), stdout)
	require.Equal(t, report.FollowSummary{Pending: 1, Interrupted: true}, last["follow"])
}

// Issue 22, item 3: with RUC A blocked at SIFEN for 10 minutes (its first
// lot arrives within the interval of a lot another client just sent: 0301),
// RUC B's lots go out on time (wait_s 0, then B's own 10 s), and A's
// documents are sent after the block in the same run — not reported failed,
// not holding B back. Before, A's lot was reported failed, and B's second
// lot waited behind A's next one.
func TestSifenSendRUCsDoNotWaitForEachOther(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now})
	dir := t.TempDir()
	writeFile(t, dir, "a.xml", sifentest.Lote(sifentest.Docs("80069563", 1, 60)...))
	writeFile(t, dir, "b.xml", sifentest.Lote(sifentest.Docs("88888801", 1, 60)...))
	// Another client of RUC A sends a lot just before the run.
	lot, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("80069563", 500, 1)...))
	require.NoError(t, err)
	packed, err := lot.Pack()
	require.NoError(t, err)
	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: sim.URL, Timeout: 30 * time.Second})
	require.NoError(t, err)
	resp, err := c.RecepcionLote(context.Background(), sifen.EnvTest, packed.Zip)
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeLotQueued, resp.Code)

	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}
	code, stdout, stderr := runIn(context.Background(), clock, "", env, "sifen-send", "--json", dir)
	require.Equal(t, ExitOK, code, stderr)
	items, sum := jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, 120, sum.Sent, stdout)
	waits := map[string][]float64{}
	for _, it := range items {
		require.Equal(t, report.Sent, it.Result, it.Message)
		waits[it.RUC] = append(waits[it.RUC], it.WaitS)
	}
	// Results come in the order they were decided: B's two lots first.
	require.Equal(t, "88888801-5", items[0].RUC)
	require.Equal(t, append(repeat(0, 50), repeat(10, 10)...), waits["88888801-5"], "B's lots on time")
	require.Equal(t, append(append(repeat(600, 25), repeat(610, 25)...), repeat(10, 10)...), waits["80069563-1"],
		"A's first lot after the block, in halves, then A's next lot")
	require.Equal(t, []time.Duration{10 * time.Second, 590 * time.Second, 10 * time.Second, 10 * time.Second}, clock.slept())
	require.Equal(t, int64(1), sim.Stats().Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotNotQueued))
	for cdc, n := range sim.queuedCounts() {
		require.Equal(t, 1, n, "CDC %s", cdc)
	}
	require.Equal(t, map[string]int{"sent": 120}, documentStatuses(t, db))
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Issue 22, done when (in one test process): three sifen-send runs started
// together on one database, each with its own engine, over overlapping file
// sets of 3 RUCs (135 DEs), send every DE exactly once, with no 0301, and
// leave no draft. A run says "sent by another process" only for a DE
// another run sent; a DE another run held in flight when this one imported
// it may be reported blocked (run again later), never failed.
func TestSifenSendRunsOverlapping(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := newFakeTime(testEpoch)
		// Answers take 50 ms of wall time, so the runs' sends overlap.
		sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, Latency: 50 * time.Millisecond})
		dir := t.TempDir()
		// Each RUC's 45 DEs in three files of 15; each run takes two thirds
		// of every RUC, so the runs' lots overlap without being equal.
		var thirds [3][]string
		for _, ruc := range []string{"80069563", "88888801", "800695"} {
			for i := range thirds {
				thirds[i] = append(thirds[i], writeFile(t, dir, fmt.Sprintf("%s-%d.xml", ruc, i),
					sifentest.Lote(sifentest.Docs(ruc, 1+15*i, 15)...)))
			}
		}
		db := sqlstoretest.DSN(t, engine)
		env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}
		// Create the schema once, so that the runs start on a ready database.
		code, _, stderr := runIn(context.Background(), nil, "", env, "migrate", "up")
		require.Equal(t, ExitOK, code, stderr)
		// The fake clock stands still while a lot is on the wire. A lot
		// holds its RUC's gate and its documents until its answer, which
		// comes after 50 ms of real time, while a sleep of another run
		// passes in none: without this, a run waiting on that gate (or
		// watching those documents) sleeps 10 s after 10 s of fake time,
		// each in a few microseconds, through its 15-minute --max-wait
		// before the answer comes, and reports the documents blocked.
		clock.settle = func() { waitNothingSending(t, db) }
		sets := [][]string{
			append(slices.Clone(thirds[0]), thirds[1]...),
			append(slices.Clone(thirds[1]), thirds[2]...),
			append(slices.Clone(thirds[2]), thirds[0]...),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		outs, errs := make([]string, len(sets)), make([]string, len(sets))
		var wg sync.WaitGroup
		for i, set := range sets {
			wg.Go(func() {
				_, outs[i], errs[i] = runIn(ctx, clock, "", env, append([]string{"sifen-send", "--json"}, set...)...)
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the three runs did not end within 3 minutes")
		}
		sentBy := map[string]int{}
		var all []report.SifenRecord
		for i := range outs {
			items, sum := jsonLines[report.SifenRecord](t, outs[i])
			require.Len(t, items, 90, "run %d: one line per DE; stderr: %s", i, errs[i])
			t.Logf("run %d: %d sent, %d skipped, %d blocked, %d failed", i, sum.Sent, sum.Skipped, sum.Blocked, sum.Failed)
			for _, it := range items {
				if it.Result == report.Sent {
					sentBy[it.CDC]++
				}
			}
			all = append(all, items...)
		}
		for _, it := range all {
			switch {
			case it.Result == report.Sent:
			case it.Result == report.Skipped:
				require.Equal(t, 1, sentBy[it.CDC], "%s: %s", it.CDC, it.Message)
			case it.Result == report.Blocked && strings.Contains(it.Message, "sending"):
			default:
				t.Fatalf("%s %s: %s", it.Result, it.CDC, it.Message)
			}
		}
		queued := sim.queuedCounts()
		require.Len(t, queued, 135)
		for cdc, n := range queued {
			require.Equal(t, 1, n, "CDC %s queued %d times", cdc, n)
			require.Equal(t, 1, sentBy[cdc], "CDC %s reported sent by one run", cdc)
		}
		require.Equal(t, int64(0), sim.Stats().Count(sifensim.ServiceRecepcionLote, "", "", sifensim.CodeLotNotQueued))
		require.Equal(t, map[string]int{"sent": 135}, documentStatuses(t, db))
	})
}

// --max-wait 0 waits for nothing: a refused lot is reported blocked at once
// (sifen.BatchConfig's zero MaxWait would mean its default).
func TestSifenSendMaxWaitZero(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now})
	dir, _ := threeLotsOfOneRUC(t)
	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "balde.db")}
	code, stdout, _ := runIn(context.Background(), clock, "", env, "sifen-send", "--max-wait", "0s", dir)
	require.Equal(t, ExitFailed, code)
	require.Empty(t, clock.slept())
	require.Contains(t, stdout, "(beyond --max-wait 0s)")
	require.Contains(t, stdout, "1 sent, 2 blocked, 0 skipped, 0 failed of 3")
}

// Issue 22, done when: two sifen-send processes and serve's "Send all
// drafts" button, started together on one database (SQLite and
// PostgreSQL) over overlapping sets of 3 RUCs' 135 DEs, send every DE
// exactly once, draw no 0301 from a simulator enforcing its interval, and
// leave no draft. A process says "sent by another process" only for a DE
// it did not send; nothing fails. The real clock (processes share no fake
// one): the interval is 0.5 s, the simulator's 250 ms; every wait has a
// deadline.
func TestSifenSendProcessesAndSendAllDrafts(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		var mu sync.Mutex
		var refused []string
		sim := startSifenSim(t, sifensim.Config{Interval: 250 * time.Millisecond,
			AfterRecepcion: func(_ context.Context, r sifensim.Recepcion) {
				if r.Code != sifensim.CodeLotQueued {
					mu.Lock()
					refused = append(refused, r.Code+" "+r.Message)
					mu.Unlock()
				}
			}})
		db := sqlstoretest.DSN(t, engine)
		env := map[string]string{"BALDE_DB": db, "BALDE_SIFEN_URL": sim.URL, "SIFEN_THROTTLE_SECONDS": "0.5",
			"BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "0"}
		sm := runServeMain(t, env)
		web := newAdminClient(t, sm.url, "admin", "pw")

		rucs := []string{"80069563", "88888801", "800695"}
		dir := t.TempDir()
		var thirds [3][]string
		for _, ruc := range rucs {
			for i := range thirds {
				thirds[i] = append(thirds[i], writeFile(t, dir, fmt.Sprintf("%s-%d.xml", ruc, i),
					sifentest.Lote(sifentest.Docs(ruc, 1+15*i, 15)...)))
			}
		}
		sets := [][]string{append(slices.Clone(thirds[0]), thirds[1]...), append(slices.Clone(thirds[1]), thirds[2]...)}
		children := make([]*exec.Cmd, len(sets))
		outs := make([]*strings.Builder, len(sets))
		errs := make([]*syncBuffer, len(sets))
		for i, set := range sets {
			outs[i], errs[i] = &strings.Builder{}, &syncBuffer{}
			c := childCommand(t, time.Time{}, append([]string{"sifen-send", "--env", "test", "--db", db, "--sifen-url", sim.URL, "--json"}, set...)...)
			c.Env = append(c.Env, "SIFEN_THROTTLE_SECONDS=0.5")
			c.Stdout, c.Stderr = outs[i], errs[i]
			require.NoError(t, c.Start())
			children[i] = c
		}
		// Meanwhile a person presses "Send all drafts" for each RUC, again and
		// again, until the processes are done and no draft is left.
		exited := make(chan struct{})
		go func() {
			for _, c := range children {
				_ = c.Wait()
			}
			close(exited)
		}()
		deadline := time.Now().Add(time.Minute)
		for done := false; ; {
			require.True(t, time.Now().Before(deadline), "not done within a minute; outputs:\n%s\n%s", outs[0], outs[1])
			select {
			case <-exited:
				done = true
			default:
			}
			left := 0
			for _, ruc := range rucs {
				dv := sifentest.Doc{RUC: ruc}.DV()
				resp, body := web.postForm("/documents/send-ruc", url.Values{"ruc": {fmt.Sprintf("%s-%d", ruc, dv)}, "env": {"test"}})
				if resp.StatusCode == http.StatusBadRequest && strings.Contains(body, "no draft") {
					continue
				}
				left++
				require.Contains(t, []int{http.StatusSeeOther, http.StatusConflict}, resp.StatusCode, body)
			}
			if done && left == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for i, c := range children {
			require.NotNil(t, c.ProcessState, "child %d", i)
		}

		queued := sim.queuedCounts()
		sentBy := map[string]int{}
		var all []report.SifenRecord
		for i := range outs {
			items, sum := jsonLines[report.SifenRecord](t, outs[i].String())
			require.Len(t, items, 90, "process %d: one line per DE; exit %v; stderr:\n%s", i, children[i].ProcessState, errs[i].String())
			t.Logf("process %d: %d sent, %d skipped, %d blocked, %d failed", i, sum.Sent, sum.Skipped, sum.Blocked, sum.Failed)
			for _, it := range items {
				if it.Result == report.Sent {
					sentBy[it.CDC]++
				}
			}
			all = append(all, items...)
		}
		for _, it := range all {
			switch {
			case it.Result == report.Sent:
			case it.Result == report.Skipped:
				require.Equal(t, 1, queued[it.CDC], "%s: %s", it.CDC, it.Message)
			case it.Result == report.Blocked && strings.Contains(it.Message, "sending"):
			default:
				t.Fatalf("%s %s: %s", it.Result, it.CDC, it.Message)
			}
		}
		require.Len(t, queued, 135)
		for cdc, n := range queued {
			require.Equal(t, 1, n, "CDC %s queued %d times", cdc, n)
			require.LessOrEqual(t, sentBy[cdc], 1, "CDC %s", cdc)
		}
		mu.Lock()
		require.Empty(t, refused, "the simulator refused lots")
		mu.Unlock()
		require.Equal(t, map[string]int{"sent": 135}, documentStatuses(t, db))
	})
}

// Two sifen-send runs on the same file at once: the second imports while
// the first's lot is on the wire ("being sent now by another send"), waits
// for that send's answer, and reports its documents sent by another
// process; both runs exit 0 and SIFEN gets each document once
// (docs/decisions/0230). Before, the second run reported them blocked and
// exited 1.
func TestSifenSendTwoRunsSentByAnotherProcess(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := newFakeTime(testEpoch)
		onWire, release := make(chan struct{}), make(chan struct{})
		var lots atomic.Int32
		sim := startSifenSim(t, sifensim.Config{Clock: clock.Now, BeforeRecepcion: func(ctx context.Context, _ sifensim.Recepcion) error {
			if lots.Add(1) == 1 { // the first run's lot stays on the wire until released
				close(onWire)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}})
		file := writeFile(t, t.TempDir(), "lote.xml", sifentest.Lote(sifentest.Docs("80069563", 1, 2)...))
		db := sqlstoretest.DSN(t, engine)
		env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}
		var released sync.Once
		releaseFirst := func() { released.Do(func() { close(release) }) }
		defer releaseFirst()
		// The second run's first wait lets the first run's answer come
		// (real time), then the fake clock moves on.
		clock.settle = func() { releaseFirst(); waitNothingSending(t, db) }

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		type run struct {
			code           int
			stdout, stderr string
		}
		first := make(chan run, 1)
		go func() {
			var r run
			r.code, r.stdout, r.stderr = runIn(ctx, clock, "", env, "sifen-send", "--json", file)
			first <- r
		}()
		select {
		case <-onWire:
		case <-ctx.Done():
			t.Fatal("the first run's lot never reached the simulator")
		}
		code, stdout, stderr := runIn(ctx, clock, "", env, "sifen-send", file)
		releaseFirst()
		r1 := <-first

		require.Equal(t, ExitOK, r1.code, r1.stderr)
		_, sum := jsonLines[report.SifenRecord](t, r1.stdout)
		require.Equal(t, 2, sum.Sent)
		require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr: %s", stdout, stderr)
		require.Equal(t, 2, strings.Count(stdout, "sent by another process: document "), stdout)
		require.Contains(t, stdout, "0 sent, 0 blocked, 2 skipped, 0 failed of 2")
		require.Equal(t, int64(1), sim.Stats().Count(sifensim.ServiceRecepcionLote, "", "", ""))
		require.Len(t, sim.queuedCounts(), 2)
		for cdc, n := range sim.queuedCounts() {
			require.Equal(t, 1, n, "CDC %s", cdc)
		}
		require.Equal(t, map[string]int{"sent": 2}, documentStatuses(t, db))
	})
}

// A file whose CDC was sent with other content is skipped, and its line
// says that SIFEN has the document's content, not the file's; the file sent
// is skipped without that remark.
func TestSifenSendSkipsOtherContent(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		clock := newFakeTime(testEpoch)
		sim := startSifenSim(t, sifensim.Config{Clock: clock.Now})
		doc := sifentest.Doc{RUC: "80069563", Number: 1}
		other := doc
		other.Filler = 10 // the same CDC, other content
		env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": sqlstoretest.DSN(t, engine)}
		ctx := context.Background()
		sent := writeFile(t, t.TempDir(), "de.xml", doc.File())
		code, _, stderr := runIn(ctx, clock, "", env, "sifen-send", sent)
		require.Equal(t, ExitOK, code, stderr)

		const differs = "this DE's content differs from document 1's, the one sent to SIFEN under this CDC"
		code, stdout, stderr := runIn(ctx, clock, "", env, "sifen-send", writeFile(t, t.TempDir(), "de.xml", other.File()))
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "skipped ")
		require.Contains(t, stdout, "CDC already sent: "+doc.CDC()+" is document 1, sent; "+differs)

		code, stdout, stderr = runIn(ctx, clock, "", env, "sifen-send", sent)
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "CDC already sent: "+doc.CDC()+" is document 1, sent")
		require.NotContains(t, stdout, differs)
		require.Equal(t, map[string]int{doc.CDC(): 1}, sim.queuedCounts())
	})
}
