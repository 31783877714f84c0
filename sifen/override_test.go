package sifen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// lossySIFEN stands in front of the simulator: it loses the answer of
// siRecepLoteDE (before the simulator got the lot, or after it queued
// it), and may answer siConsDE itself.
type lossySIFEN struct {
	sim http.Handler
	mu  sync.Mutex
	// simTakes: the simulator gets the lot before its answer is lost.
	simTakes bool
	// consDE, when set, answers siConsDE instead of the simulator.
	consDE http.HandlerFunc
}

func (l *lossySIFEN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	simTakes, consDE := l.simTakes, l.consDE
	l.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, sifen.RecepcionPath):
		if simTakes {
			l.sim.ServeHTTP(httptest.NewRecorder(), r)
		}
		w.WriteHeader(http.StatusGatewayTimeout)
	case strings.HasSuffix(r.URL.Path, sifen.ConsultaPath) && consDE != nil:
		consDE(w, r)
	default:
		l.sim.ServeHTTP(w, r)
	}
}

// An operator's override of the 48 hours asks SIFEN by CDC at that moment:
// only 0420 makes the document sendable again, and the next send still
// goes through the RUC's gate; 0422 approves it with its dProtAut; any
// other answer, or none, changes nothing.
func TestOverrideAsksSIFENFirst(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		// A RUC waits 10 minutes between lots: the send after an
		// override still waits them.
		w := newWorld(t, engine, worldConfig{policy: sifen.PolicyConfig{Interval: 10 * time.Minute}})
		front := &lossySIFEN{sim: w.sim}
		ts := httptest.NewServer(front)
		t.Cleanup(ts.Close)
		_, sender := newSender(t, w.store, w.store, ts.URL, sifen.PolicyConfig{Interval: 10 * time.Minute}, w.clock.Now, sifen.SenderConfig{})

		// sendLost sends a new document whose answer is lost, and returns
		// it, left in sending.
		number := 0
		sendLost := func(t *testing.T, simTakes bool) sifen.Document {
			number++
			front.mu.Lock()
			front.simTakes, front.consDE = simTakes, nil
			front.mu.Unlock()
			id := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: number}.File())[0]
			w.clock.Advance(10 * time.Minute) // the RUC's interval since the previous lot
			out, err := sender.Send(ctx, id)
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeUnknown, out.Status)
			return w.doc(t, id)
		}
		unchanged := func(t *testing.T, d sifen.Document) {
			t.Helper()
			now := w.doc(t, d.ID)
			require.Equal(t, sifen.StatusSending, now.Status)
			require.Equal(t, d.Version, now.Version, "nothing changed")
		}

		t.Run("0420: a draft again, sent through the RUC's gate", func(t *testing.T) {
			d := sendLost(t, false)
			_, err := sender.Override(ctx, d.ID)
			require.ErrorIs(t, err, sifen.ErrNotSendable, "a send of it may still be on the wire")
			unchanged(t, d)
			consultas := w.stats(t).Count(sifen.ServiceConsultaDE, "", "", "")
			require.Zero(t, consultas, "SIFEN is not asked while the send may be live")

			w.clock.Advance(3 * time.Minute)
			o, err := sender.Override(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, sifen.Overridden{DocumentID: d.ID, CDC: d.CDC, Code: sifen.CodeDENotFound,
				Message: "Documento No Existe en SIFEN o ha sido Rechazado", Done: true, Status: sifen.StatusDraft}, o)
			require.Empty(t, o.Refusal())
			after := w.doc(t, d.ID)
			require.Equal(t, sifen.StatusDraft, after.Status)
			require.Contains(t, after.Message, "override")
			require.Contains(t, after.Message, "twice")

			out, err := sender.Send(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeBlocked, out.Status, "the RUC's interval still holds")
			require.Equal(t, 7*time.Minute, out.Blocked().Wait)
			w.clock.Advance(7 * time.Minute)
			front.mu.Lock()
			front.simTakes = true
			front.mu.Unlock()
			out, err = w.sender.Send(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, sifen.OutcomeSent, out.Status)
		})

		t.Run("0422: approved with its dProtAut, nothing overridden", func(t *testing.T) {
			d := sendLost(t, true)
			w.clock.Advance(3 * time.Minute)
			o, err := sender.Override(ctx, d.ID)
			require.NoError(t, err)
			require.False(t, o.Done)
			require.Equal(t, sifen.CodeDEFound, o.Code)
			require.Regexp(t, `^[0-9]{10}$`, o.AuthNumber)
			require.Contains(t, o.Refusal(), "dProtAut "+o.AuthNumber)
			after := w.doc(t, d.ID)
			require.Equal(t, sifen.StatusApproved, after.Status, "SIFEN's answer is newer than the stored state")
			require.Equal(t, o.AuthNumber, after.AuthNumber)
			_, err = sender.Send(ctx, d.ID)
			require.ErrorIs(t, err, sifen.ErrNotSendable)
		})

		for _, tc := range []struct {
			name string
			ans  http.HandlerFunc
			want error
		}{
			{"another code", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", sifen.SOAPContentType)
				_, _ = w.Write([]byte(`<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body>` +
					`<ns2:rEnviConsDeResponse xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:dFecProc>2026-01-02T10:00:00-03:00</ns2:dFecProc>` +
					`<ns2:dCodRes>0421</ns2:dCodRes><ns2:dMsgRes>CDC inválido</ns2:dMsgRes></ns2:rEnviConsDeResponse></env:Body></env:Envelope>`))
			}, sifen.ErrRemote},
			{"HTTP 503", func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "down", http.StatusServiceUnavailable)
			}, sifen.ErrRemote},
			{"no answer", func(w http.ResponseWriter, _ *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			}, sifen.ErrNoResponse},
		} {
			t.Run(tc.name+": nothing changes", func(t *testing.T) {
				d := sendLost(t, false)
				w.clock.Advance(3 * time.Minute)
				front.mu.Lock()
				front.consDE = tc.ans
				front.mu.Unlock()
				_, err := sender.Override(ctx, d.ID)
				require.ErrorIs(t, err, tc.want)
				require.Contains(t, err.Error(), "nothing was overridden")
				unchanged(t, d)
			})
		}

		t.Run("not sending", func(t *testing.T) {
			id := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 99}.File())[0]
			_, err := sender.Override(ctx, id)
			require.ErrorIs(t, err, sifen.ErrNotSendable)
			_, err = sender.Override(ctx, 12345)
			require.ErrorIs(t, err, sifen.ErrNotFound)
		})
	})
}
