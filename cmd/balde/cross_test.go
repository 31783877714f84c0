package main

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// TestBatchAndSendButtonShareTheCooldown is seed 002's point: the same
// throttle check before every send, in the web handler and in the batch
// tool. A `balde sifen-send` process and serve's Send button work on one
// SQLite file, for one RUC and env, at the same time, on the real clock:
// the simulator never sees two lots of that RUC too close together, and
// every document of both sides is queued exactly once.
//
// The real clock is needed (two processes share no fake clock), so the
// margins are proven under load: the throttle's cooldown is 500 ms and the
// simulator's interval 250 ms, leaving 250 ms for the time between a take
// and the lot's arrival to vary from one lot to the next. Under two
// CPU-bound `yes` processes on 2 cores the closest arrivals were 476 ms
// apart (24 ms of jitter, 8 runs). A cooldown that was not shared would
// put two independent 500 ms trains on the wire: some pair of their
// arrivals is then at most 250 ms apart, so the test still fails.
//
// Every wait has a deadline (a hung sifen-send once held make test for 9
// minutes here): the Send presses 30 s, the child a minute, killed then.
func TestBatchAndSendButtonShareTheCooldown(t *testing.T) {
	const ruc = "80069563"
	const simInterval = 250 * time.Millisecond // the throttle's cooldown is 500 ms
	var mu sync.Mutex
	var arrivals []time.Time
	var refused []string
	sim := startSifenSim(t, sifensim.Config{
		Interval: simInterval,
		AfterRecepcion: func(_ context.Context, r sifensim.Recepcion) {
			mu.Lock()
			defer mu.Unlock()
			if r.Code != sifensim.CodeLotQueued {
				refused = append(refused, r.Code+" "+r.Message)
				return
			}
			arrivals = append(arrivals, time.Now())
		},
	})
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	env := map[string]string{
		"BALDE_DB": db, "BALDE_SIFEN_URL": sim.URL, "SIFEN_THROTTLE_SECONDS": "0.5",
		"BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "0",
	}
	sm := runServeMain(t, env)
	web := newAdminClient(t, sm.url, "admin", "pw")

	// The web app holds 5 invoices of the RUC, each uploaded on its own.
	var webDocs []string
	for _, d := range sifentest.Docs(ruc, 1000, 5) {
		resp, body := web.upload(d.File(), "test")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		webDocs = append(webDocs, strings.TrimPrefix(resp.Header.Get("Location"), "/documents/"))
	}
	// The batch sends 120 others of the same RUC: 3 lots (50, 50, 20).
	lot, batchCDCs := sifenLot(ruc, 1, 120)
	file := writeFile(t, t.TempDir(), "lote.xml", lot)
	batch := childCommand(t, time.Time{}, "sifen-send", "--env", "test", "--db", db, "--sifen-url", sim.URL, "--json", file)
	batch.Env = append(batch.Env, "SIFEN_THROTTLE_SECONDS=0.5")
	var batchOut, batchErr strings.Builder
	batch.Stdout, batch.Stderr = &batchOut, &batchErr
	require.NoError(t, batch.Start())

	// Meanwhile a person presses Send on each web document until it goes.
	blocked := 0
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range webDocs {
		for {
			require.True(t, time.Now().Before(deadline), "document %s not sent in 30 s", id)
			resp, body := web.postForm("/documents/"+id+"/send", url.Values{})
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
			result, err := url.Parse(resp.Header.Get("Location"))
			require.NoError(t, err)
			if result.Query().Get("result") == "sent" {
				break
			}
			require.Equal(t, "blocked", result.Query().Get("result"), resp.Header.Get("Location"))
			blocked++
			time.Sleep(50 * time.Millisecond) // a person pressing again; the wait is real time
		}
	}
	// 8 lots 0.5 s apart take 4 s; a minute is room for a loaded machine.
	err := waitfor.Cmd(t, batch, time.Minute, "sifen-send; stdout:\n%s\nstderr:\n%s", &batchOut, &batchErr)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", &batchOut, &batchErr)
	items, sum := jsonLines[report.SifenRecord](t, batchOut.String())
	require.Equal(t, len(batchCDCs), sum.Sent)
	lots := map[string]bool{}
	for _, it := range items {
		require.Equal(t, report.Sent, it.Result, it.Message)
		lots[it.Lot] = true
	}
	require.Len(t, lots, 3, "120 documents of one RUC go in lots of 50, 50 and 20")

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, refused, "the simulator refused lots: the cooldown was not shared")
	require.Len(t, arrivals, 3+len(webDocs))
	slices.SortFunc(arrivals, time.Time.Compare)
	minGap := time.Hour
	for i := 1; i < len(arrivals); i++ {
		minGap = min(minGap, arrivals[i].Sub(arrivals[i-1]))
		require.GreaterOrEqual(t, arrivals[i].Sub(arrivals[i-1]), simInterval, "lots %d and %d", i-1, i)
	}
	t.Logf("closest arrivals: %s apart", minGap)
	queued := sim.queuedCounts()
	for _, cdc := range batchCDCs {
		require.Equal(t, 1, queued[cdc], cdc)
	}
	require.Len(t, queued, len(batchCDCs)+len(webDocs))
	t.Logf("%d lots of one RUC from two processes; the Send button was refused %d times meanwhile", len(arrivals), blocked)
}
