package sifen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// deOf is the DE of doc, parsed.
func deOf(t *testing.T, doc sifentest.Doc) sifen.DE {
	t.Helper()
	lot, err := sifen.ParseLote(doc.File())
	require.NoError(t, err)
	return lot.DEs[0]
}

// SendNewDE sends one DE by siRecepDE through the RUC's gate exactly as a
// lot of one: the answer approves the document at once, and the gate then
// refuses a lot — or another DE — of the RUC for the interval from that
// answer; a DE already approved is not sent again.
func TestSendDEThroughTheRUCGate(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			w := newWorld(t, engine, worldConfig{})
			ctx := context.Background()
			ids := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File(), sifentest.Doc{Number: 2}.File(), sifentest.Doc{Number: 3}.File())

			out, err := w.sender.SendNewDE(ctx, sifen.EnvTest, deOf(t, sifentest.Doc{Number: 1}))
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeSent, out.Status)
			require.Equal(t, ids[:1], out.DocumentIDs, "the draft of the same DE")
			require.Equal(t, sifen.ResultApproved, out.Prot.State())
			doc := w.doc(t, ids[0])
			require.Equal(t, sifen.StatusApproved, doc.Status)
			require.Equal(t, out.Prot.AuthNumber, doc.AuthNumber)
			require.NotEmpty(t, doc.AuthNumber)

			w.clock.Advance(3 * time.Second)
			lot, err := w.sender.Send(ctx, ids[1])
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeBlocked, lot.Status)
			require.Equal(t, 7*time.Second, lot.Decision.RetryAfter, "the interval runs from the DE's answer")
			de, err := w.sender.SendNewDE(ctx, sifen.EnvTest, deOf(t, sifentest.Doc{Number: 3}))
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeBlocked, de.Status)
			require.Equal(t, sifen.StatusDraft, w.doc(t, ids[2]).Status)

			w.clock.Advance(7 * time.Second)
			de, err = w.sender.SendNewDE(ctx, sifen.EnvTest, deOf(t, sifentest.Doc{Number: 3}))
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeSent, de.Status)
			require.Equal(t, sifen.StatusApproved, w.doc(t, ids[2]).Status)

			_, err = w.sender.SendNewDE(ctx, sifen.EnvTest, deOf(t, sifentest.Doc{Number: 1}))
			require.ErrorIs(t, err, sifen.ErrCDCInFlight, "approved: not sent again")
			require.Zero(t, w.stats(t).Count("", "", "", sifen.CodeLotNotQueued), "0301s")
		})
	}
}

// SIFEN's refusal of the DE is its result: the document is rejected with
// SIFEN's code; a connection that cannot be made leaves it in error, and
// a lost answer leaves it sending for Resolve.
func TestSendDEOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		status  sifen.LotSendStatus
		doc     sifen.Status
	}{
		{"Rejected", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", sifen.SOAPContentType)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><ns2:rRetEnviDe xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:rProtDe><ns2:id>x</ns2:id><ns2:dFecProc>2026-01-02T10:00:00-03:00</ns2:dFecProc><ns2:dEstRes>Rechazado</ns2:dEstRes><ns2:gResProc><ns2:dCodRes>1309</ns2:dCodRes><ns2:dMsgRes>DV del RUC</ns2:dMsgRes></ns2:gResProc></ns2:rProtDe></ns2:rRetEnviDe></env:Body></env:Envelope>`))
		}, sifen.OutcomeSent, sifen.StatusRejected},
		{"Lost", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}, sifen.OutcomeUnknown, sifen.StatusSending},
		{"Unreadable", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", sifen.SOAPContentType)
			_, _ = w.Write([]byte(`<?xml version="1.0"?><env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><ns2:rRetEnviDe xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:rProtDe><ns2:dEstRes>Quizás</ns2:dEstRes></ns2:rProtDe></ns2:rRetEnviDe></env:Body></env:Envelope>`))
		}, sifen.OutcomeUnknown, sifen.StatusSending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(tc.handler)
			t.Cleanup(ts.Close)
			store := sqlstoretest.MustOpenDSN(t, sqlstoretest.DSN(t, sqlstore.SQLite), throttle.SystemClock)
			_, sender := newSender(t, store, store, ts.URL, sifen.PolicyConfig{}, throttle.SystemClock, sifen.SenderConfig{})
			out, err := sender.SendNewDE(context.Background(), sifen.EnvTest, deOf(t, sifentest.Doc{Number: 1}))
			require.NoError(t, err)
			require.Equal(t, tc.status, out.Status, out.Message)
			got, err := sender.Get(context.Background(), out.DocumentIDs[0])
			require.NoError(t, err)
			require.Equal(t, tc.doc, got.Status, got.Message)
		})
	}
	t.Run("NotReached", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		store := sqlstoretest.MustOpenDSN(t, sqlstoretest.DSN(t, sqlstore.SQLite), throttle.SystemClock)
		_, sender := newSender(t, store, store, url, sifen.PolicyConfig{}, throttle.SystemClock, sifen.SenderConfig{})
		out, err := sender.SendNewDE(context.Background(), sifen.EnvTest, deOf(t, sifentest.Doc{Number: 1}))
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeFailed, out.Status)
		got, err := sender.Get(context.Background(), out.DocumentIDs[0])
		require.NoError(t, err)
		require.Equal(t, sifen.StatusError, got.Status)
	})
}
