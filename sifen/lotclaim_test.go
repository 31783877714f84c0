package sifen_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// A process that claimed a due lot and died before asking SIFEN holds it
// until its claim ends (InFlightFor): meanwhile the others ask nothing
// and report the lot not due; then the next poll takes it, asks once and
// schedules the next query ConsultaInterval after the answer
// (docs/decisions/0170).
func TestALotClaimedByADeadProcessIsQueriedWhenItsClaimEnds(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Processing: -1}})
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 2)...))
		out, err := w.sender.Send(ctx, ids...)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status, out.Message)

		w.clock.Advance(sifen.DefaultConsultaInterval) // due
		dead := sifensql.New(sqlstoretest.MustOpenDSN(t, w.dsn, w.clock.Now))
		now := w.clock.Now()
		claimed, err := dead.ScheduleLot(ctx, sifen.EnvTest, out.LotNumber, now, now.Add(sifen.DefaultInFlightFor))
		require.NoError(t, err)
		require.True(t, claimed)

		queries := func() int64 { return w.stats(t).Count(sifensim.ServiceConsultaLote, "", "", "") }
		lots, err := w.sender.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, lots, 1)
		require.True(t, lots[0].NotDue, "claimed by another process")
		require.Equal(t, sifen.DefaultInFlightFor, lots[0].Wait)
		require.Zero(t, queries())

		w.clock.Advance(sifen.DefaultInFlightFor - time.Nanosecond)
		lots, err = w.sender.Poll(ctx)
		require.NoError(t, err)
		require.True(t, lots[0].NotDue, "the claim still runs")
		require.Zero(t, queries())

		w.clock.Advance(time.Nanosecond)
		lots, err = w.sender.Poll(ctx)
		require.NoError(t, err)
		require.False(t, lots[0].NotDue, "the claim ended: queried")
		require.Equal(t, int64(1), queries())
		require.Equal(t, w.clock.Now().Add(sifen.DefaultConsultaInterval), lots[0].NextQueryAt)
		for _, id := range ids {
			require.Equal(t, sifen.StatusApproved, w.doc(t, id).Status)
		}
	})
}

// claimingStore is the documents store of a process that reads the due
// lots just before another process claims the first (claim, once).
type claimingStore struct {
	sifen.DocumentStore
	claim func(sifen.LotRef)
}

func (s *claimingStore) SentLots(ctx context.Context) ([]sifen.LotRef, error) {
	lots, err := s.DocumentStore.SentLots(ctx)
	if len(lots) > 0 && s.claim != nil {
		s.claim(lots[0])
		s.claim = nil
	}
	return lots, err
}

// A follower that finds a due lot claimed by another process between its
// read and its claim looks again a second later (the claimant usually
// records the result within it), not when the claim ends; then, the
// result not in, it waits for the claim's end and queries the lot itself.
func TestAFollowerLooksAgainSoonAtALotClaimedElsewhere(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{Processing: -1}})
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 2)...))
	out, err := w.sender.Send(ctx, ids...)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status, out.Message)
	w.clock.Advance(sifen.DefaultConsultaInterval)

	other := sifensql.New(w.store)
	docs := &claimingStore{DocumentStore: sifensql.New(w.store), claim: func(l sifen.LotRef) {
		now := w.clock.Now()
		claimed, err := other.ScheduleLot(ctx, l.Env, l.LotNumber, now, now.Add(sifen.DefaultInFlightFor))
		require.NoError(t, err)
		require.True(t, claimed)
	}}
	r, err := sifen.NewResolver(sifen.PolicyConfig{})
	require.NoError(t, err)
	client, err := sifen.NewClient(sifen.ClientConfig{BaseURL: w.simURL + "/{env}", Timeout: 30 * time.Second})
	require.NoError(t, err)
	lim, err := throttle.NewLimiter(w.store, r, throttle.Config{Clock: w.clock.Now, Logger: quietLogger()})
	require.NoError(t, err)
	follower, err := sifen.NewSender(docs, client, lim, sifen.SenderConfig{Clock: w.clock.Now, Resolver: r})
	require.NoError(t, err)

	var slept []time.Duration
	pending, err := sifen.FollowDocuments(ctx, follower, ids, sifen.BatchConfig{Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		w.clock.Advance(d)
		return nil
	}})
	require.NoError(t, err)
	require.Empty(t, pending)
	require.Equal(t, []time.Duration{time.Second, sifen.DefaultInFlightFor - time.Second}, slept)
	require.Equal(t, int64(1), w.stats(t).Count(sifensim.ServiceConsultaLote, "", "", ""))
}
