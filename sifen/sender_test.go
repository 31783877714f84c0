package sifen_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func TestSendCooldown(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File(), sifentest.Doc{Number: 2}.File())

		out, err := w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		require.Equal(t, sifen.CodeLotQueued, out.Code)
		require.Len(t, out.LotNumber, 17)
		d := w.doc(t, ids[0])
		require.Equal(t, sifen.StatusSent, d.Status)
		require.Equal(t, out.LotNumber, d.LotNumber)
		require.Equal(t, sifen.CodeLotQueued, d.ResponseCode)
		require.Equal(t, throttletest.Epoch, d.SentAt)

		// Three seconds later the second lot of the same RUC and env is
		// refused locally, with the exact wait.
		w.clock.Advance(3 * time.Second)
		out, err = w.sender.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status)
		require.Equal(t, throttle.ReasonCooldown, out.Blocked().Reason)
		require.Equal(t, 7*time.Second, out.Blocked().Wait)
		require.Equal(t, int64(7), out.Blocked().WaitSeconds())
		require.Equal(t, sifen.RecepcionKey(sifen.EnvTest, ruc80069563), out.Blocked().Key)
		require.Equal(t, throttle.ReasonCooldown, out.Decision.Reason)
		d = w.doc(t, ids[1])
		require.Equal(t, sifen.StatusDraft, d.Status, "a refusal is not an error: the document stays a draft")
		require.Equal(t, "blocked: cooldown, wait 7 s", d.Message)
		require.Equal(t, throttletest.Epoch.Add(10*time.Second), d.RetryAt)

		st := w.stats(t)
		require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "", "", ""))

		// Once the interval has passed, the refused document goes.
		w.clock.Advance(7 * time.Second)
		out, err = w.sender.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		st = w.stats(t)
		require.Equal(t, int64(2), st.Count(sifen.ServiceRecepcionLote, "test", "80069563", sifen.CodeLotQueued))
		require.Equal(t, int64(0), st.ByCode[sifen.CodeLotNotQueued])
	})
}

func TestSendOtherRUCsAndEnvsDoNotInterfere(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{})
		ctx := context.Background()
		test := w.importDocs(t, sifen.EnvTest,
			sifentest.Doc{RUC: "80069563", Number: 1}.File(),
			sifentest.Doc{RUC: "88888801", Number: 1}.File(),
			sifentest.Doc{RUC: "800695", Number: 1}.File())
		prod := w.importDocs(t, sifen.EnvProd, sifentest.Doc{RUC: "80069563", Number: 1, Prod: true}.File())
		for _, id := range append(test, prod...) {
			out, err := w.sender.Send(ctx, id)
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeSent, out.Status, "document %d", id)
		}
		st := w.stats(t)
		require.Equal(t, int64(4), st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotQueued))
		require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "prod", "80069563", sifen.CodeLotQueued))
		require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "test", "80069563", sifen.CodeLotQueued))
	})
}

func TestSendRefusesBadInputBeforeSending(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{})
		ctx := context.Background()
		many := make([][]byte, sifen.MaxLotDEs+1)
		for i := range many {
			many[i] = sifentest.Doc{Number: 100 + i}.File()
		}
		manyIDs := w.importDocs(t, sifen.EnvTest, many...)
		other := w.importDocs(t, sifen.EnvTest,
			sifentest.Doc{RUC: "88888801", Number: 1}.File(),
			sifentest.Doc{Number: 1, Type: 5}.File())
		prod := w.importDocs(t, sifen.EnvProd, sifentest.Doc{Number: 1, Prod: true}.File())
		bigDocs := sifentest.Docs("800695", 1, 40)
		var big [][]byte
		for i := range bigDocs {
			bigDocs[i].Filler = 40_000
			big = append(big, bigDocs[i].File())
		}
		bigIDs := w.importDocs(t, sifen.EnvTest, big...)

		for _, tc := range []struct {
			name    string
			ids     []int64
			wantErr error
		}{
			{"ErrLotTooManyDEs", manyIDs, sifen.ErrLotTooManyDEs},
			{"ErrLotMixedRUC", []int64{manyIDs[0], other[0]}, sifen.ErrLotMixedRUC},
			{"ErrLotMixedTypes", []int64{manyIDs[0], other[1]}, sifen.ErrLotMixedTypes},
			{"ErrLotMixedEnv", []int64{manyIDs[0], prod[0]}, sifen.ErrLotMixedEnv},
			{"ErrLotTooBig", bigIDs, sifen.ErrLotTooBig},
			{"ErrLotEmpty", nil, sifen.ErrLotEmpty},
			{"ErrLotDuplicateCDC", []int64{manyIDs[0], manyIDs[0]}, sifen.ErrLotDuplicateCDC},
			{"ErrNotFound", []int64{manyIDs[0], 999_999}, sifen.ErrNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := w.sender.Send(ctx, tc.ids...)
				require.ErrorIs(t, err, tc.wantErr)
			})
		}
		// Nothing was taken from the throttle, nothing reached SIFEN, and
		// every document is still a draft.
		require.Equal(t, int64(0), w.ledgerRows(t))
		require.Equal(t, int64(0), w.stats(t).Total)
		docs, err := w.sender.List(ctx, sifen.Filter{Limit: 1000})
		require.NoError(t, err)
		for _, d := range docs {
			require.Equal(t, sifen.StatusDraft, d.Status, "document %d", d.ID)
			require.Nil(t, d.XML, "List leaves the XML out")
		}

		// A valid lot of 50 goes in one request.
		out, err := w.sender.Send(ctx, manyIDs[:sifen.MaxLotDEs]...)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		require.Equal(t, int64(1), w.stats(t).Total)
	})
}

func TestBadRUCIsRefusedAndNothingMoves(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{})
		ctx := context.Background()
		for _, tc := range []struct {
			name    string
			xml     []byte
			wantErr error
		}{
			{"ErrInvalidDV", readTestdata(t, "de/bad_dv_80069563.xml"), sifen.ErrInvalidDV},
			{"ErrMissingRUC", readTestdata(t, "de/no_ruc.xml"), sifen.ErrMissingRUC},
			{"ErrInvalidDVInLot", readTestdata(t, "lote/bad_dv_second.xml"), sifen.ErrInvalidDV},
			{"ErrMalformedXML", readTestdata(t, "de/malformed_truncated.xml"), sifen.ErrMalformedXML},
		} {
			t.Run(tc.name, func(t *testing.T) {
				docs, err := w.sender.Import(ctx, tc.xml, sifen.EnvTest)
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, docs)
			})
		}
		_, err := w.sender.Import(ctx, sifentest.Doc{}.File(), "homolog")
		require.ErrorIs(t, err, sifen.ErrInvalidEnv)
		docs, err := w.sender.List(ctx, sifen.Filter{})
		require.NoError(t, err)
		require.Empty(t, docs, "a lot with one bad DE imports nothing")

		// A document whose stored XML was changed behind balde's back (here:
		// a wrong check digit) is refused at send time too.
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{}.File())
		_, err = w.store.DB().Exec(w.store.DB().Rebind(`UPDATE balde_documents SET xml = ? WHERE id = ?`),
			string(sifentest.Doc{BadDV: true}.XML()), ids[0])
		require.NoError(t, err)
		_, err = w.sender.Send(ctx, ids[0])
		require.ErrorIs(t, err, sifen.ErrInvalidDV)

		require.Equal(t, int64(0), w.ledgerRows(t))
		require.Equal(t, int64(0), w.stats(t).Total)
	})
}

func TestSameCDCAndSameLotAreNeverSentTwice(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		rejected := sifentest.Doc{Number: 2}
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Reject: func(_ string, de sifensim.DE) (string, string, bool) {
			return "1111", "rechazo de prueba", de.CDC == rejected.CDC()
		}}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 1}, rejected))
		out, err := w.sender.Send(ctx, ids...)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)

		// In flight: neither the document nor its CDC can go again.
		_, err = w.sender.Send(ctx, ids[0])
		require.ErrorIs(t, err, sifen.ErrNotSendable)
		_, err = w.sender.Import(ctx, rejected.File(), sifen.EnvTest)
		require.ErrorIs(t, err, sifen.ErrCDCInFlight)
		var taken *sifen.CDCError
		require.ErrorAs(t, err, &taken)
		require.Equal(t, ids[1], taken.Document.ID)
		require.Equal(t, sifen.StatusSent, taken.Document.Status)
		require.Equal(t, fmt.Sprintf("sifen: CDC already sent: %s is document %d, sent", rejected.CDC(), ids[1]), err.Error())

		// The lot is processed: one approved, one rejected.
		w.clock.Advance(sifen.DefaultConsultaInterval)
		lo, err := w.sender.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
		require.NoError(t, err)
		require.Equal(t, sifen.CodeLotDone, lo.Code)
		require.Equal(t, 2, lo.Updated)
		require.Equal(t, sifen.StatusApproved, w.doc(t, ids[0]).Status)
		d := w.doc(t, ids[1])
		require.Equal(t, sifen.StatusRejected, d.Status)
		require.Equal(t, "Rechazado: 1111 rechazo de prueba", d.Message)
		require.Equal(t, "1111", d.ResponseCode)

		// An approved CDC can never be imported again; a rejected one only
		// once corrected (same CDC, other XML): SIFEN would reject the same
		// DE again.
		_, err = w.sender.Import(ctx, sifentest.Doc{Number: 1}.File(), sifen.EnvTest)
		require.ErrorIs(t, err, sifen.ErrCDCInFlight)
		require.ErrorAs(t, err, &taken)
		require.Equal(t, sifen.StatusApproved, taken.Document.Status)
		_, err = w.sender.Import(ctx, rejected.File(), sifen.EnvTest)
		require.ErrorIs(t, err, sifen.ErrCDCInFlight)
		require.ErrorAs(t, err, &taken)
		require.Equal(t, sifen.StatusRejected, taken.Document.Status)
		require.Equal(t, "1111", taken.Document.ResponseCode)
		require.Equal(t, fmt.Sprintf("sifen: CDC already sent: %s is document %d, rejected by SIFEN (Rechazado: 1111 rechazo de prueba); correct the document to send it again",
			rejected.CDC(), ids[1]), err.Error())
		require.Equal(t, sifen.StatusRejected, w.doc(t, ids[1]).Status, "a refused import changes nothing")
		corrected := rejected
		corrected.Filler = 10
		require.Equal(t, rejected.CDC(), corrected.CDC())
		again, err := w.sender.Import(ctx, corrected.File(), sifen.EnvTest)
		require.NoError(t, err)
		require.Equal(t, ids[1], again[0].ID)
		require.Equal(t, sifen.StatusDraft, again[0].Status)

		// The very same lot again is refused locally: SIFEN would block the RUC.
		w.clock.Advance(time.Minute)
		lotIDs := w.importDocs(t, sifen.EnvProd, sifentest.Doc{Number: 7, Prod: true}.File())
		out, err = w.sender.Send(ctx, lotIDs...)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		w.clock.Advance(sifen.DefaultConsultaInterval)
		_, err = w.sender.QueryLot(ctx, sifen.EnvProd, out.LotNumber)
		require.NoError(t, err)
		_, err = w.store.DB().Exec(w.store.DB().Rebind(`UPDATE balde_documents SET status = 'error' WHERE id = ?`), lotIDs[0])
		require.NoError(t, err)
		_, err = w.sender.Send(ctx, lotIDs...)
		require.ErrorIs(t, err, sifen.ErrLotAlreadySent)

		st := w.stats(t)
		require.Equal(t, int64(2), st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotQueued))
		require.Equal(t, int64(0), st.ByCode[sifen.CodeLotNotQueued])
	})
}

func TestNotQueuedBlocksTheRUCLocally(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		// SIFEN is stricter than the local throttle: 1 min against 10 s.
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Interval: time.Minute, Block: 30 * time.Minute}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Docs("80069563", 1, 1)[0].File(),
			sifentest.Doc{Number: 2}.File(), sifentest.Doc{Number: 3}.File())
		out, err := w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)

		w.clock.Advance(10 * time.Second)
		out, err = w.sender.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeNotQueued, out.Status)
		require.Equal(t, sifen.CodeLotNotQueued, out.Code)
		d := w.doc(t, ids[1])
		require.Equal(t, sifen.StatusError, d.Status)
		require.Equal(t, sifen.CodeLotNotQueued, d.ResponseCode)
		require.Contains(t, d.Message, "SIFEN did not queue the lot: 0301 Lote no encolado para procesamiento: envíos demasiado frecuentes")

		// The RUC is now blocked locally: nothing more reaches SIFEN.
		w.clock.Advance(time.Minute)
		out, err = w.sender.Send(ctx, ids[2])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status)
		require.Equal(t, throttle.ReasonBlocked, out.Blocked().Reason)
		require.Equal(t, sifen.DefaultRemoteBlock-time.Minute, out.Blocked().Wait)
		require.Equal(t, int64(2), w.stats(t).Count(sifen.ServiceRecepcionLote, "", "", ""))

		// The document refused by SIFEN can be sent again later.
		w.clock.Advance(sifen.DefaultRemoteBlock)
		w.clock.Advance(30 * time.Minute)
		out, err = w.sender.Send(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
	})
}

// TestQueryLotIsScheduled: a lot's result queries are a schedule of the
// lot (DNIT: the first 10 minutes after the send, then every 10 minutes),
// not a limit: a query not due asks nothing and says when it is due, with
// no bucket row and no refusal in the ledger.
func TestQueryLotIsScheduled(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Processing: 15 * time.Minute}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("88888801", 1, 3)...))
		sentAt := w.clock.Now()
		out, err := w.sender.Send(ctx, ids...)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		ledger := w.ledgerRows(t)

		// Not before 10 minutes after the send.
		w.clock.Advance(time.Minute)
		lo, err := w.sender.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
		require.NoError(t, err)
		require.True(t, lo.NotDue)
		require.Equal(t, sentAt.Add(sifen.DefaultConsultaInterval), lo.NextQueryAt)
		require.Equal(t, int64(0), w.stats(t).Count(sifen.ServiceConsultaLote, "", "", ""))

		w.clock.Advance(9 * time.Minute)
		lo, err = w.sender.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
		require.NoError(t, err)
		require.False(t, lo.NotDue)
		require.Equal(t, sifen.CodeLotProcessing, lo.Code)
		require.Equal(t, 0, lo.Updated)
		require.Equal(t, w.clock.Now().Add(sifen.DefaultConsultaInterval), lo.NextQueryAt)

		// Then not more often than every 10 minutes; Poll reports when.
		w.clock.Advance(4 * time.Minute)
		polled, err := w.sender.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, polled, 1)
		require.True(t, polled[0].NotDue)
		require.Equal(t, w.clock.Now().Add(6*time.Minute), polled[0].NextQueryAt)

		// The schedule is no limit: no bucket, no ledger row, no refusal.
		page, err := inspect.New(w.limiter, w.store).List(ctx, inspect.Filter{})
		require.NoError(t, err)
		for _, st := range page.States {
			require.Equal(t, sifen.PolicyRecepcionLote, st.Key.Policy, "no bucket but the RUC's gate")
		}
		require.Equal(t, ledger, w.ledgerRows(t), "waiting for a lot's result writes nothing to the ledger")

		w.clock.Advance(6 * time.Minute)
		polled, err = w.sender.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, polled, 1)
		require.Equal(t, sifen.CodeLotDone, polled[0].Code)
		require.Equal(t, 3, polled[0].Updated)
		docs, err := w.sender.List(ctx, sifen.Filter{Statuses: []sifen.Status{sifen.StatusApproved}, RUC: "88888801", Env: sifen.EnvTest})
		require.NoError(t, err)
		require.Len(t, docs, 3)

		// Nothing left to poll.
		polled, err = w.sender.Poll(ctx)
		require.NoError(t, err)
		require.Empty(t, polled)
		require.Equal(t, int64(2), w.stats(t).Count(sifen.ServiceConsultaLote, "", "", ""))
	})
}

func TestUnansweredSendIsResolvedBeforeAnyResend(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		// The simulator loses the first request (answers 503 without
		// recording it): the sender cannot know whether SIFEN got it.
		var lost atomic.Bool
		w := newWorld(t, engine, worldConfig{sim: sifensim.Config{BeforeRecepcion: func(context.Context, sifensim.Recepcion) error {
			if lost.CompareAndSwap(false, true) {
				return errors.New("lost")
			}
			return nil
		}}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{}.File())
		out, err := w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeUnknown, out.Status)
		d := w.doc(t, ids[0])
		require.Equal(t, sifen.StatusSending, d.Status)
		require.Contains(t, d.Message, "no answer from SIFEN")

		// No resend while it is unresolved.
		w.clock.Advance(time.Minute)
		_, err = w.sender.Send(ctx, ids[0])
		require.ErrorIs(t, err, sifen.ErrNotSendable)
		w.requireResolvedOnceStale(t, sifen.Resolved{DocumentID: ids[0], CDC: sifentest.Doc{}.CDC(), Code: sifen.CodeDENotFound, Status: sifen.StatusDraft})

		out, err = w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		st := w.stats(t)
		require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotQueued))
		require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "", "", "dropped"))
	})
}

func TestThrottleUnavailableReleasesTheDocuments(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		down := true
		w := newWorld(t, engine, worldConfig{limiterStore: func(s *sqlstore.Store) throttle.Store {
			return &throttletest.Store{Base: s, UpdateFn: func(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
				if down {
					return throttle.ErrStoreUnavailable
				}
				return s.Update(ctx, keys, credits, apply)
			}}
		}})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{}.File())
		_, err := w.sender.Send(ctx, ids[0])
		require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
		d := w.doc(t, ids[0])
		require.Equal(t, sifen.StatusError, d.Status)
		require.Contains(t, d.Message, "throttle unavailable")
		require.Equal(t, int64(0), w.stats(t).Total)

		down = false
		out, err := w.sender.Send(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status, "the lot was released, so it can go")
	})
}

func TestSendWithoutConnection(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		// A port nothing listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())

		clock := throttle.NewManualClock(throttletest.Epoch)
		store := sqlstoretest.MustOpen(t, engine, clock.Now)
		_, sender := newSender(t, store, store, "http://"+addr, sifen.PolicyConfig{}, clock.Now, sifen.SenderConfig{})
		ctx := context.Background()
		docs, err := sender.Import(ctx, sifentest.Doc{}.File(), sifen.EnvTest)
		require.NoError(t, err)
		out, err := sender.Send(ctx, docs[0].ID)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeFailed, out.Status)
		d, err := sender.Get(ctx, docs[0].ID)
		require.NoError(t, err)
		require.Equal(t, sifen.StatusError, d.Status)
		require.Contains(t, d.Message, "not sent:")
		require.Contains(t, d.Message, "connection refused")
	})
}

func TestNewSenderNeedsSIFENPolicies(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := sqlstoretest.MustOpen(t, sqlstore.SQLite, clock.Now)
	l, err := throttle.NewLimiter(store, throttle.Policies{}, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	c, err := sifen.NewClient(sifen.ClientConfig{})
	require.NoError(t, err)
	_, err = sifen.NewSender(sifensql.New(store), c, l, sifen.SenderConfig{})
	require.ErrorIs(t, err, throttle.ErrUnknownPolicy)
}

func TestGroupLots(t *testing.T) {
	doc := func(id int64, env sifen.Env, ruc string, typ int, st sifen.Status) sifen.Document {
		return sifen.Document{ID: id, Env: env, RUC: sifen.RUC{Number: ruc}, Type: typ, Status: st}
	}
	var docs []sifen.Document
	for id := int64(1); id <= 52; id++ {
		docs = append(docs, doc(id, sifen.EnvTest, "80069563", 1, sifen.StatusDraft))
	}
	docs = append(docs,
		doc(60, sifen.EnvProd, "80069563", 1, sifen.StatusDraft),
		doc(53, sifen.EnvTest, "88888801", 1, sifen.StatusError),
		doc(54, sifen.EnvTest, "80069563", 5, sifen.StatusDraft),
		doc(55, sifen.EnvTest, "80069563", 1, sifen.StatusSent),
		doc(56, sifen.EnvTest, "80069563", 1, sifen.StatusSending),
	)
	first50 := make([]int64, 50)
	for i := range first50 {
		first50[i] = int64(i + 1)
	}
	require.Equal(t, [][]int64{first50, {51, 52}, {53}, {54}, {60}}, sifen.GroupLots(docs))
	require.Empty(t, sifen.GroupLots(nil))
}

func TestCountByStatus(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{})
		ctx := context.Background()
		ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2}))
		w.importDocs(t, sifen.EnvProd, sifentest.Doc{Number: 3, Prod: true}.File())
		out, err := w.sender.Send(ctx, ids...)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)

		all, err := w.sender.CountByStatus(ctx, "")
		require.NoError(t, err)
		require.Equal(t, map[sifen.Status]int64{sifen.StatusSent: 2, sifen.StatusDraft: 1}, all)
		prod, err := w.sender.CountByStatus(ctx, sifen.EnvProd)
		require.NoError(t, err)
		require.Equal(t, map[sifen.Status]int64{sifen.StatusDraft: 1}, prod)
		_, err = w.sender.CountByStatus(ctx, "staging")
		require.ErrorIs(t, err, sifen.ErrInvalidEnv)
	})
}

// countingHandler counts the records it is given.
type countingHandler struct{ n *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countingHandler) WithGroup(string) slog.Handler             { return h }

// TestSenderWithoutLoggerLogsNowhere: a Sender built without a Logger
// says nothing to the process's default logger (it used to fall back to
// slog.Default), though it has things to log: a note about the
// database's interval at start, a lot sent, a lot held back.
func TestSenderWithoutLoggerLogsNowhere(t *testing.T) {
	var logged atomic.Int64
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(countingHandler{&logged}))

	w := newWorld(t, sqlstore.SQLite, worldConfig{}) // its sender is quiet, and stores 10 s
	r, err := sifen.NewResolver(sifen.PolicyConfig{Interval: time.Second})
	require.NoError(t, err)
	l, err := throttle.NewLimiter(w.store, r, throttle.Config{Clock: w.clock.Now, Logger: quietLogger()})
	require.NoError(t, err)
	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: w.simURL + "/{env}"})
	require.NoError(t, err)
	s, err := sifen.NewSender(sifensql.New(w.store), c, l, sifen.SenderConfig{Clock: w.clock.Now, Resolver: r})
	require.NoError(t, err)
	require.Len(t, s.IntervalNotes(), 2, "it had something to say")
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Lote(sifentest.Docs("80069563", 1, 2)...))
	out, err := s.Send(context.Background(), ids[0])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)
	out, err = s.Send(context.Background(), ids[1])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeBlocked, out.Status)
	require.Zero(t, logged.Load())
}
