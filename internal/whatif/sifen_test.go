package whatif_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// sifenWorld is a SIFEN sender at interval on a SQLite database, talking to
// the SIFEN simulator (which enforces the same interval); both read one fake
// clock, and SIFEN takes a second per 25 documents to answer a lot.
type sifenWorld struct {
	t       *testing.T
	clock   *throttle.ManualClock
	store   *sqlstore.Store
	limiter *throttle.Limiter
	sender  *sifen.Sender
	sim     *sifensim.Server
}

func newSifenWorld(t *testing.T, interval time.Duration) *sifenWorld {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	w := &sifenWorld{t: t, clock: throttle.NewManualClock(throttletest.Epoch)}
	var err error
	w.sim, err = sifensim.NewServer(sifensim.Config{Clock: w.clock.Now, Advance: w.clock.Advance, Interval: interval, Logger: quiet,
		AfterRecepcion: func(_ context.Context, r sifensim.Recepcion) {
			w.clock.Advance(time.Duration(len(r.CDCs)) * time.Second / 25)
		}})
	require.NoError(t, err)
	hs := httptest.NewServer(w.sim)
	t.Cleanup(hs.Close)
	w.store = sqlstoretest.MustOpen(t, sqlstore.SQLite, w.clock.Now)
	res, err := sifen.NewResolver(sifen.PolicyConfig{Interval: interval})
	require.NoError(t, err)
	w.limiter, err = throttle.NewLimiter(w.store, res, throttle.Config{Clock: w.clock.Now, Logger: quiet})
	require.NoError(t, err)
	client, err := sifen.NewClient(sifen.ClientConfig{BaseURL: hs.URL + "/{env}"})
	require.NoError(t, err)
	w.sender, err = sifen.NewSender(sifensql.New(w.store), client, w.limiter, sifen.SenderConfig{Clock: w.clock.Now, Logger: quiet, Resolver: res})
	require.NoError(t, err)
	return w
}

// sendBatch imports 160 invoices of one RUC and 60 of another and sends
// them as sifen-send --wait does: 4 lots and 2.
func (w *sifenWorld) sendBatch() {
	t, ctx := w.t, context.Background()
	var docs []sifen.Document
	for _, lot := range [][]sifentest.Doc{sifentest.Docs("80069563", 1, 160), sifentest.Docs("88888801", 1, 60)} {
		d, err := w.sender.Import(ctx, sifentest.Lote(lot...), sifen.EnvTest)
		require.NoError(t, err)
		docs = append(docs, d...)
	}
	results, err := sifen.SendDocuments(ctx, w.sender, docs, sifen.BatchConfig{Wait: true, Clock: w.clock.Now,
		Sleep: func(_ context.Context, d time.Duration) error { w.clock.Advance(d); return nil }})
	require.NoError(t, err)
	for _, r := range results {
		require.Equal(t, sifen.BatchSent, r.Result, "document %d: %s", r.DocumentID, r.Message)
	}
	require.Zero(t, w.sim.Stats().ByCode[sifen.CodeLotNotQueued], "the simulator never blocked the batch")
}

// sends returns the instants of the RUC gate's takes, oldest first: when
// each lot went.
func (w *sifenWorld) sends() map[string][]time.Time {
	rows, err := w.store.Ledger(context.Background(), inspect.LedgerQuery{Policy: sifen.PolicyRecepcionLote,
		Reasons: []throttle.LedgerReason{throttle.LedgerTake}, Limit: 100})
	require.NoError(w.t, err)
	out := map[string][]time.Time{}
	for i := len(rows) - 1; i >= 0; i-- {
		out[rows[i].Key.Identifier] = append(out[rows[i].Key.Identifier], rows[i].At)
	}
	return out
}

func (w *sifenWorld) whatif(sc whatif.Scenario) *whatif.Report {
	w.t.Helper()
	rep, err := whatif.Run(context.Background(), whatif.Config{Source: w.store, Limiter: w.limiter},
		whatif.Query{Policies: []string{sifen.PolicyRecepcionLote}, From: throttletest.Epoch, To: throttletest.Epoch.Add(time.Hour), Scenario: sc})
	require.NoError(w.t, err)
	return rep
}

// A batch sent at 10 s between lots, replayed at 10 s, sends every lot when
// it went; replayed at 5 s, every lot goes when the same batch sent live at
// 5 s sent it, and the report says how much sooner the batch ended.
func TestSifenBatchReplayedAtAnotherInterval(t *testing.T) {
	recorded := newSifenWorld(t, 10*time.Second)
	recorded.sendBatch()
	same := recorded.whatif(whatif.Scenario{})
	require.Len(t, same.Lots, 6)
	for _, l := range same.Lots {
		require.Equal(t, l.Sent, l.ReplaySent, "%s %s", l.Key, l.Ref)
		require.Equal(t, l.Answered, l.ReplayAnswered, "%s %s", l.Key, l.Ref)
	}
	require.Zero(t, same.Policies[0].Total.Worse)
	require.Zero(t, same.Policies[0].Total.Better)

	live := newSifenWorld(t, 5*time.Second)
	live.sendBatch()
	want := live.sends()
	faster := recorded.whatif(whatif.Scenario{Interval: 5 * time.Second})
	got := map[string][]time.Time{}
	for _, l := range faster.Lots {
		got[l.Key.Identifier] = append(got[l.Key.Identifier], l.ReplaySent)
	}
	require.Equal(t, want, got)

	// 4 lots of 50, 50, 50 and 10 DEs (2 s, 2 s, 2 s and 0.4 s to answer):
	// at 10 s the last answer came at 2+10+2+10+2+10+0.4 = 36.4 s, at 5 s
	// at 21.4 s.
	for _, r := range faster.RUCs {
		if r.Key.Identifier == "80069563" {
			require.Equal(t, 4, r.Lots)
			require.Equal(t, 36400*time.Millisecond, r.RecordedEnd.Sub(r.First))
			require.Equal(t, 21400*time.Millisecond, r.ReplayEnd.Sub(r.First))
		}
	}
	require.Equal(t, int64(4), faster.Policies[0].Total.Better, "every lot after a RUC's first went sooner")
	require.Zero(t, faster.Policies[0].Total.Worse)
}

// A lot whose documents could not be claimed never left: its sender ends
// the RUC's hold with no interval from that answer, so the next lot goes
// when the take's own interval ends. Replayed
// under the recorded settings, the next lot goes when it went, whatever the
// answer's ref says: "claim failed:" (Send) or "not claimed:" (SendNew).
func TestAnUnclaimedLotStartsNoInterval(t *testing.T) {
	for _, ref := range []string{"claim failed:", "not claimed:"} {
		t.Run(ref, func(t *testing.T) {
			w := newSifenWorld(t, 10*time.Second)
			ctx := context.Background()
			ruc, err := sifen.ParseRUC("80069563-1")
			require.NoError(t, err)
			key := sifen.RecepcionKey(sifen.EnvTest, ruc)
			take := func(ref string) throttle.Decision {
				d, err := w.limiter.Take(ctx, ref, throttle.Charge{Key: key, Cost: 1, HoldFor: time.Minute})
				require.NoError(t, err)
				return d
			}
			first := take("lot-1")
			require.True(t, first.Allowed)
			w.clock.Advance(time.Second)
			_, err = w.limiter.Sync(ctx, throttle.SyncTarget{Key: key, Tokens: throttle.MaxTokens, Hold: first.Buckets[0].HeldUntil, Ref: ref + "0123456789abcdef"})
			require.NoError(t, err)
			// The take's own interval (10 s from the take) still runs; the
			// one from an answer (10 s from now) does not.
			w.clock.Advance(9 * time.Second)
			require.True(t, take("lot-2").Allowed, "no interval from the answer of a lot that never left")

			rep := w.whatif(whatif.Scenario{})
			require.Len(t, rep.Lots, 2)
			for _, l := range rep.Lots {
				require.Equal(t, l.Sent, l.ReplaySent, "%s %s", l.Key, l.Ref)
			}
			require.Zero(t, rep.Policies[0].Total.Worse)
		})
	}
}
