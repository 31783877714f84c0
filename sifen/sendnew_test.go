package sifen_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// SendNew stores nothing it does not send: a lot that breaks a rule, a
// lot of CDCs already sent and a lot the RUC's gate refuses leave no
// document behind, so a "Send all drafts" afterwards finds nothing to send.
// An admitted lot is imported, sent and recorded as Send records it.
func TestSendNewStoresNothingItDoesNotSend(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		w := newWorld(t, engine, worldConfig{})
		ctx := context.Background()
		parse := func(docs ...sifentest.Doc) sifen.Lote {
			lot, err := sifen.ParseLote(sifentest.Lote(docs...))
			require.NoError(t, err)
			return lot
		}

		_, err := w.sender.SendNew(ctx, sifen.EnvTest, parse(sifentest.Docs("80069563", 1, sifen.MaxLotDEs+1)...))
		require.ErrorIs(t, err, sifen.ErrLotTooManyDEs)
		_, err = w.sender.SendNew(ctx, sifen.EnvTest, parse(sifentest.Doc{RUC: "80069563", Number: 1}, sifentest.Doc{RUC: "80012345", Number: 2}))
		require.ErrorIs(t, err, sifen.ErrLotMixedRUC)
		_, err = w.sender.SendNew(ctx, sifen.EnvTest, parse(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2, Type: 5}))
		require.ErrorIs(t, err, sifen.ErrLotMixedTypes)

		sent := parse(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2})
		out, err := w.sender.SendNew(ctx, sifen.EnvTest, sent)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		require.Len(t, out.DocumentIDs, 2)
		require.Equal(t, sifen.StatusSent, w.doc(t, out.DocumentIDs[0]).Status)

		// The same lot again: its CDCs are sent. Refused before the gate.
		w.clock.Advance(time.Minute)
		_, err = w.sender.SendNew(ctx, sifen.EnvTest, sent)
		var held *sifen.CDCError
		require.ErrorAs(t, err, &held)
		require.Equal(t, sifen.StatusSent, held.Document.Status)

		// A lot inside the RUC's interval: refused by the gate, stored nowhere.
		out, err = w.sender.SendNew(ctx, sifen.EnvTest, parse(sifentest.Doc{Number: 3}))
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		out, err = w.sender.SendNew(ctx, sifen.EnvTest, parse(sifentest.Doc{Number: 4}, sifentest.Doc{Number: 5}))
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeBlocked, out.Status)
		require.Empty(t, out.DocumentIDs)

		drafts, err := w.sender.List(ctx, sifen.Filter{Statuses: []sifen.Status{sifen.StatusDraft, sifen.StatusError}})
		require.NoError(t, err)
		require.Empty(t, drafts, "nothing for Send all drafts")
		all, err := w.sender.List(ctx, sifen.Filter{})
		require.NoError(t, err)
		require.Len(t, all, 3, "the documents SIFEN received, and no other")
		st := w.stats(t)
		require.Equal(t, int64(2), st.Count(sifen.ServiceRecepcionLote, "", "", sifen.CodeLotQueued))
		require.Equal(t, int64(2), st.Count(sifen.ServiceRecepcionLote, "", "", ""))
	})
}

// A DE imported earlier as a draft of the same XML (an upload) is taken by
// SendNew and sent; one imported with other content keeps its CDC.
func TestSendNewTakesADraftOfTheSameDE(t *testing.T) {
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	ctx := context.Background()
	ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File())
	lot, err := sifen.ParseLote(sifentest.Lote(sifentest.Doc{Number: 1}))
	require.NoError(t, err)
	out, err := w.sender.SendNew(ctx, sifen.EnvTest, lot)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)
	require.Equal(t, ids, out.DocumentIDs)

	w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 2}.File())
	w.clock.Advance(time.Minute)
	other, err := sifen.ParseLote(sifentest.Lote(sifentest.Doc{Number: 2, Filler: 10}))
	require.NoError(t, err)
	_, err = w.sender.SendNew(ctx, sifen.EnvTest, other)
	require.ErrorIs(t, err, sifen.ErrCDCInFlight)
	require.Equal(t, int64(1), w.stats(t).Count(sifen.ServiceRecepcionLote, "", "", ""))
}
