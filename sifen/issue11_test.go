package sifen_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// Issue 11 point 1: the interval runs from the previous lot's answer, not
// from the take. The simulator takes 5 s to answer (on the shared fake
// clock) and measures its 10 s from its answer: a lot 10 s after the
// previous one's take, 5 s after its answer, earned a 0301 and a block.
func TestIntervalRunsFromTheAnswer(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		var w *world
		slow := func(context.Context, sifensim.Recepcion) { w.clock.Advance(5 * time.Second) }
		w = newWorld(t, engine, worldConfig{sim: sifensim.Config{AfterRecepcion: slow, Processing: time.Hour}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File(), sifentest.Doc{Number: 2}.File())
		start := w.clock.Now()

		out, err := w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		require.Equal(t, start.Add(5*time.Second), w.clock.Now(), "the answer came 5 s after the take")

		// 10 s after the take, 5 s after the answer: still 5 s to wait.
		w.clock.Advance(5 * time.Second)
		out, err = w.sender.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status)
		require.Equal(t, throttle.ReasonCooldown, out.Decision.Reason)
		require.Equal(t, 5*time.Second, out.Decision.RetryAfter)

		// The stored state shows when the answer came.
		st, err := w.sender.RUCWait(ctx, sifen.EnvTest, ruc80069563)
		require.NoError(t, err)
		require.False(t, st.Allowed)
		require.Equal(t, 5*time.Second, st.RetryAfter)

		w.clock.Advance(5 * time.Second)
		out, err = w.sender.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		require.Equal(t, int64(0), w.stats(t).ByCode[sifen.CodeLotNotQueued], "SIFEN never saw two lots closer than the interval")
	})
}

// Issue 11 point 1, the other half: no lot of a RUC leaves while another of
// it is on the wire, however long that takes.
func TestNoLotWhileAnotherIsOnTheWire(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var first atomic.Bool
	hold := func(ctx context.Context, _ sifensim.Recepcion) {
		if first.CompareAndSwap(false, true) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
			}
		}
	}
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{AfterRecepcion: hold, Processing: time.Hour}})
	ctx := context.Background()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File(), sifentest.Doc{Number: 2}.File())
	done := make(chan sifen.LotSend, 1)
	go func() {
		out, _ := w.sender.Send(ctx, ids[0])
		done <- out
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the first lot never arrived")
	}
	// A minute on the simulated clock: the take's cooldown is long over,
	// but the first lot has no answer yet.
	w.clock.Advance(time.Minute)
	out, err := w.sender.Send(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeBlocked, out.Status)
	close(release)
	select {
	case out = <-done:
		require.Equal(t, sifen.OutcomeSent, out.Status)
	case <-time.After(30 * time.Second):
		t.Fatal("the first send never returned")
	}
	require.Equal(t, int64(0), w.stats(t).ByCode[sifen.CodeLotNotQueued])
}

// Issue 11 point 4: the interval is the database's, not one process's
// flag. A process at 1 s next to one at 10 s waited only 970 ms after the
// other's lot; now it waits the stricter 10 s, and says so at start.
func TestIntervalIsSharedByTheDatabase(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Interval: 10 * time.Second, Processing: time.Hour}})
		ctx := context.Background()
		require.Empty(t, w.sender.IntervalNotes(), "the first process stores its interval")
		_, lax := newSender(t, w.store, w.store, w.simURL, sifen.PolicyConfig{Interval: time.Second}, w.clock.Now, sifen.SenderConfig{})
		require.Equal(t, []string{
			"SIFEN test: this process is configured for 1s between lots of a RUC, but the database's interval is 10s (set by another process): 10s applies",
			"SIFEN prod: this process is configured for 1s between lots of a RUC, but the database's interval is 10s (set by another process): 10s applies",
		}, lax.IntervalNotes())

		ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File(), sifentest.Doc{Number: 2}.File())
		out, err := w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		w.clock.Advance(970 * time.Millisecond)
		out, err = lax.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status)
		require.Equal(t, 10*time.Second-970*time.Millisecond, out.Decision.RetryAfter)
		w.clock.Advance(2 * time.Second)
		out, err = lax.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status, "1 s is not the interval of this database")
		require.Equal(t, int64(0), w.stats(t).ByCode[sifen.CodeLotNotQueued])
	})
}

// TestTwoSendersSpaceLotsByTheStricterInterval: two processes on one
// database, configured for 10 s and 30 s between lots of a RUC, send one
// RUC's lots in turn to a SIFEN that answers 5 s after it receives a lot
// and counts its 30 s from its answer. Whichever process started first,
// SIFEN never sees two lots closer than 30 s: a sender agrees the interval
// with the database when it is built, and again at each Poll pass (a
// process running before a stricter one started learns of it there), and
// the answer's interval is on the RUC's row, which both read.
func TestTwoSendersSpaceLotsByTheStricterInterval(t *testing.T) {
	for _, laxFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "StrictFirst", true: "LaxFirst"}[laxFirst], func(t *testing.T) {
			sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
				var w *world
				slow := func(context.Context, sifensim.Recepcion) { w.clock.Advance(5 * time.Second) }
				lax, strict := sifen.PolicyConfig{Interval: 10 * time.Second}, sifen.PolicyConfig{Interval: 30 * time.Second}
				first, second := strict, lax
				if laxFirst {
					first, second = lax, strict
				}
				w = newWorld(t, engine, worldConfig{policy: first, sim: sifensim.Config{Interval: 30 * time.Second, Processing: time.Hour, AfterRecepcion: slow}})
				_, other := newSender(t, w.store, w.store, w.simURL, second, w.clock.Now, sifen.SenderConfig{})
				ctx := context.Background()
				if laxFirst {
					_, err := w.sender.Poll(ctx) // the running process's next pass
					require.NoError(t, err)
				}
				senders := []*sifen.Sender{w.sender, other}
				ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 6)...))
				var answered time.Time
				for i, id := range ids {
					for {
						sent := w.clock.Now()
						out, err := senders[i%2].Send(ctx, id)
						require.NoError(t, err)
						if out.Status == sifen.OutcomeBlocked {
							w.clock.Advance(out.Decision.RetryAfter)
							continue
						}
						require.Equal(t, sifen.OutcomeSent, out.Status, "lot %d", i)
						if i > 0 {
							require.Equal(t, 30*time.Second, sent.Sub(answered), "lot %d: from the previous answer", i)
						}
						answered = w.clock.Now()
						break
					}
				}
				require.Equal(t, int64(0), w.stats(t).ByCode[sifen.CodeLotNotQueued])
			})
		})
	}
}

// TestSendReadsNoStoredInterval: the interval is the policy's, agreed with
// the database when the sender is built and at each Poll pass; a send reads
// no stored setting. A stored interval raised behind the sender's back
// applies from its next pass (on the code before, every send read it).
func TestSendReadsNoStoredInterval(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{Processing: time.Hour}})
	ctx := context.Background()
	_, err := w.store.DB().ExecContext(ctx, `UPDATE balde_sifen_settings SET interval_ns = 60000000000 WHERE env = 'test'`)
	require.NoError(t, err)
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 3)...))
	send := func(id int64) sifen.LotSend {
		t.Helper()
		out, err := w.sender.Send(ctx, id)
		require.NoError(t, err)
		return out
	}
	require.Equal(t, sifen.OutcomeSent, send(ids[0]).Status)
	out := send(ids[1])
	require.Equal(t, sifen.OutcomeBlocked, out.Status)
	require.Equal(t, 10*time.Second, out.Decision.RetryAfter, "the sender's agreed interval, not the row read now")

	_, err = w.sender.Poll(ctx)
	require.NoError(t, err)
	out = send(ids[1])
	require.Equal(t, sifen.OutcomeBlocked, out.Status)
	require.Equal(t, time.Minute, out.Decision.RetryAfter, "learnt at the Poll pass: the policy says 60 s")
	w.clock.Advance(time.Minute)
	require.Equal(t, sifen.OutcomeSent, send(ids[1]).Status)
	out = send(ids[2])
	require.Equal(t, sifen.OutcomeBlocked, out.Status)
	require.Equal(t, time.Minute, out.Decision.RetryAfter)
}

// Issue 11 point 5: the local block after a 0301 grows with recurrence, as
// SIFEN's does (10, 20, ... up to 60 minutes), instead of a fixed 10.
func TestLocalBlockGrowsWithRecurrence(t *testing.T) {
	// A lax local interval (1 s) against the simulator's 10 s provokes the
	// 0301s this test needs.
	w := newWorld(t, sqlstore.SQLite, worldConfig{policy: sifen.PolicyConfig{Interval: time.Second},
		sim: sifensim.Config{Interval: 10 * time.Second, Processing: time.Hour}})
	ctx := context.Background()
	docs := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 12)...))
	n := 0
	next := func() int64 { n++; return docs[n-1] }

	for level, want := range []time.Duration{10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 40 * time.Minute, 50 * time.Minute, time.Hour, time.Hour} {
		out, err := w.sender.Send(ctx, next())
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status, "level %d", level)
		w.clock.Advance(time.Second)
		out, err = w.sender.Send(ctx, next())
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeNotQueued, out.Status)
		require.Contains(t, out.Message, "RUC blocked locally for "+want.String())

		// Nothing leaves before the block ends, and the page-side check agrees.
		w.clock.Advance(want - time.Second)
		d, err := w.sender.RUCWait(ctx, sifen.EnvTest, ruc80069563)
		require.NoError(t, err)
		require.Equal(t, throttle.ReasonBlocked, d.Reason)
		require.Equal(t, time.Second, d.RetryAfter)
		n--
		out, err = w.sender.Send(ctx, next())
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status)
		require.Equal(t, throttle.ReasonBlocked, out.Decision.Reason)
		w.clock.Advance(time.Second)
		n--
		if n+2 > len(docs) {
			break
		}
	}
	st := w.stats(t)
	require.Equal(t, st.ByCode[sifen.CodeLotNotQueued], st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotNotQueued))
	require.Equal(t, int64(0), st.Count(sifen.ServiceRecepcionLote, "", "", "blocked"))
}

// Issue 11: an unsigned DE, or one whose content says test environment, is
// refused for prod with a clear message; unsigned DEs go to test only when
// the sender allows them.
func TestUnfitDEsAreRefused(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	ctx := context.Background()
	_, err := w.sender.Import(ctx, sifentest.Doc{Number: 1}.File(), sifen.EnvProd)
	require.ErrorIs(t, err, sifen.ErrUnfit)
	require.ErrorContains(t, err, "made for the test environment")
	_, err = w.sender.Import(ctx, sifentest.Doc{Number: 2, Prod: true, Unsigned: true}.File(), sifen.EnvProd)
	require.ErrorIs(t, err, sifen.ErrUnfit)
	require.ErrorContains(t, err, "not signed")
	_, err = w.sender.Import(ctx, sifentest.Doc{Number: 3, Unsigned: true}.File(), sifen.EnvTest)
	require.ErrorIs(t, err, sifen.ErrUnfit)
	docs, err := w.sender.List(ctx, sifen.Filter{})
	require.NoError(t, err)
	require.Empty(t, docs, "nothing stored")

	_, lenient := newSender(t, w.store, w.store, w.simURL, sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{AllowUnsigned: true})
	_, err = lenient.Import(ctx, sifentest.Doc{Number: 3, Unsigned: true}.File(), sifen.EnvTest)
	require.NoError(t, err)
	_, err = lenient.Import(ctx, sifentest.Doc{Number: 4, Prod: true, Unsigned: true}.File(), sifen.EnvProd)
	require.ErrorIs(t, err, sifen.ErrUnfit, "never unsigned into prod")
}

// TestImportRefusesADETooBigAlone: a DE whose SOAP message would pass
// 1000 KB even alone can never be sent; stored as a draft it became the
// oldest of its RUC and "Send all drafts" refused every press (FitLot
// found no prefix that fits) — review. Import refuses it, nothing stored,
// and a DE just under the bound is taken.
func TestImportRefusesADETooBigAlone(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	ctx := context.Background()
	_, err := w.sender.Import(ctx, sifentest.Doc{Number: 1, Filler: 1200 << 10}.File(), sifen.EnvTest)
	require.ErrorIs(t, err, sifen.ErrLotTooBig)
	require.ErrorContains(t, err, "DE 1 (")
	docs, err := w.sender.List(ctx, sifen.Filter{})
	require.NoError(t, err)
	require.Empty(t, docs, "nothing stored")
	_, err = w.sender.Import(ctx, sifentest.Doc{Number: 2, Filler: 600 << 10}.File(), sifen.EnvTest)
	require.NoError(t, err)
}

// Issue 11 point 2, serve's side: RunPoll moves a sent document to its
// result once the lot's first query is due (10 minutes after the send), with
// dProtAut stored; before that nothing is asked.
func TestRunPollFetchesLotResults(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{Processing: time.Minute,
		Observe: func(_ string, de sifensim.DE) (string, string, bool) { return "1005", "observación", true }}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File())
	out, err := w.sender.Send(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)

	polled := make(chan []sifen.LotOutcome, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.sender.RunPoll(ctx, 5*time.Millisecond, func(o []sifen.LotOutcome, err error) {
			assert.NoError(t, err)
			select {
			case polled <- o:
			default: // the test reads the document, not every pass
			}
		})
	}()
	select {
	case o := <-polled:
		require.True(t, o[0].NotDue, "the first query waits 10 minutes")
	case <-time.After(10 * time.Second):
		t.Fatal("RunPoll never polled")
	}
	require.Equal(t, int64(0), w.stats(t).Count(sifensim.ServiceConsultaLote, "", "", ""))

	w.clock.Advance(sifen.DefaultConsultaInterval)
	deadline := time.After(10 * time.Second)
	for w.doc(t, ids[0]).Status == sifen.StatusSent {
		select {
		case <-polled:
		case <-deadline:
			t.Fatal("the lot's result never came")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunPoll did not stop with its context")
	}
	d := w.doc(t, ids[0])
	require.Equal(t, sifen.StatusApproved, d.Status)
	require.Equal(t, sifen.ResultApprovedWithObs, d.Result)
	require.Len(t, d.AuthNumber, 10)
	require.Equal(t, "1005", d.ResponseCode)
	require.Equal(t, int64(1), w.stats(t).Count(sifensim.ServiceConsultaLote, "", "", sifensim.CodeLotDone))
}

// Issue 11 audit, point 6: siConsLoteDE 0360 ("número de lote
// inexistente") about a lot SIFEN itself numbered, with siConsDE 0420 about
// its DE, is no definitive answer (docs/decisions/0012): within
// NotFoundAfter of the send the document stays sent (unsendable) and its
// lot is queried again; only past it does it go to error, sendable again.
// A fresh simulator is a SIFEN that does not know the lot.
func TestLotUnknownIsNotDefinitive(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	ctx := context.Background()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File())
	out, err := w.sender.Send(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)

	amnesiac, err := sifensim.NewServer(sifensim.Config{Clock: w.clock.Now, Logger: quietLogger()})
	require.NoError(t, err)
	ts := httptest.NewServer(amnesiac)
	t.Cleanup(ts.Close)
	_, poller := newSender(t, w.store, w.store, ts.URL, sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{})

	steps := []struct {
		name       string
		advance    time.Duration
		wantStatus sifen.Status
		wantText   string
	}{
		{"0360 after 10 minutes: kept sent", sifen.DefaultConsultaInterval, sifen.StatusSent, "not definitive"},
		{"0360 a day later: still sent", 24 * time.Hour, sifen.StatusSent, "not definitive"},
		{"0360 past 48 h: may be sent again", sifen.DefaultNotFoundAfter, sifen.StatusError, "it may be sent again"},
	}
	for _, st := range steps {
		w.clock.Advance(st.advance)
		lo, err := poller.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
		require.NoError(t, err, st.name)
		require.False(t, lo.NotDue, st.name)
		require.Equal(t, sifensim.CodeLotUnknown, lo.Code, st.name)
		d := w.doc(t, ids[0])
		require.Equal(t, st.wantStatus, d.Status, st.name)
		require.Contains(t, d.Message, st.wantText, st.name)
	}
}
