package sifen_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// Issue 22 item 6: an import of a CDC a document already holds never
// silently replaces other content. The same XML is the same document; other
// content replaces a draft or an error only when asked (ImportReplacing),
// a rejected DE only when corrected, and nothing being sent, sent or
// approved. On the old code the draft and error rows with other content
// were replaced without a word.
func TestImportOfAStoredCDC(t *testing.T) {
	original := sifentest.Doc{Number: 1}
	other := original
	other.Filler = 10 // same CDC, other content
	cases := []struct {
		name    string
		status  sifen.Status
		xml     sifentest.Doc
		replace bool
		// wantErr is "" when the import is taken, else a part of its error.
		wantErr     string
		wantMessage string // the document's message after a taken import
		// differs: the error says SIFEN has other content under the CDC.
		differs bool
	}{
		{name: "draft, same XML", status: sifen.StatusDraft, xml: original, wantMessage: "imported again (was draft)"},
		{name: "draft, other content", status: sifen.StatusDraft, xml: other,
			wantErr: "is already document 1, a draft with other content (last changed 2026-01-02 03:04:05 UTC): nothing was imported"},
		{name: "draft, other content, replace", status: sifen.StatusDraft, xml: other, replace: true, wantMessage: "content replaced by an import (was draft)"},
		{name: "error, other content", status: sifen.StatusError, xml: other, wantErr: "is already document 1, an error with other content"},
		{name: "error, other content, replace", status: sifen.StatusError, xml: other, replace: true, wantMessage: "content replaced by an import (was error)"},
		{name: "rejected, corrected", status: sifen.StatusRejected, xml: other, wantMessage: "imported again (was rejected)"},
		{name: "rejected, same XML, replace", status: sifen.StatusRejected, xml: original, replace: true, wantErr: "rejected by SIFEN"},
		{name: "sent, same XML", status: sifen.StatusSent, xml: original, wantErr: "CDC already sent: "},
		{name: "sent, replace", status: sifen.StatusSent, xml: other, replace: true, wantErr: "CDC already sent: ", differs: true},
		{name: "approved, replace", status: sifen.StatusApproved, xml: other, replace: true, wantErr: "is document 1, approved", differs: true},
	}
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t, engine, worldConfig{sim: sifensim.Config{Processing: time.Second,
					Reject: func(string, sifensim.DE) (string, string, bool) {
						return "1111", "rechazo de prueba", tc.status == sifen.StatusRejected
					}}})
				id := w.importDocs(t, sifen.EnvTest, original.File())[0]
				putInStatus(t, w, id, tc.status)
				before := w.doc(t, id)
				require.Equal(t, tc.status, before.Status)

				importer := w.sender.Import
				if tc.replace {
					importer = w.sender.ImportReplacing
				}
				docs, err := importer(ctx, tc.xml.File(), sifen.EnvTest)
				after := w.doc(t, id)
				if tc.wantErr != "" {
					var taken *sifen.CDCError
					require.ErrorAs(t, err, &taken)
					require.ErrorIs(t, err, sifen.ErrCDCInFlight)
					require.Contains(t, err.Error(), tc.wantErr)
					require.Equal(t, tc.differs, strings.Contains(err.Error(), "; this DE's content differs from document 1's, the one sent to SIFEN under this CDC"), err.Error())
					require.Equal(t, before.Version, after.Version, "nothing changed")
					require.Equal(t, before.XML, after.XML)
					return
				}
				require.NoError(t, err)
				require.Equal(t, []int64{id}, []int64{docs[0].ID}, "the same document, not a second one")
				require.Equal(t, sifen.StatusDraft, after.Status)
				require.Equal(t, tc.wantMessage, after.Message)
				require.Equal(t, string(tc.xml.XML()), string(after.XML))
			})
		}
	})
}

// putInStatus moves document id from draft to status through the real
// paths (a send that cannot connect for error; a send and the lot's result
// for sent, approved, rejected).
func putInStatus(t *testing.T, w *world, id int64, status sifen.Status) {
	t.Helper()
	ctx := context.Background()
	switch status {
	case sifen.StatusDraft:
		w.clock.Advance(0)
	case sifen.StatusError:
		_, dead := newSender(t, w.store, w.store, "http://127.0.0.1:1", sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{})
		out, err := dead.Send(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeFailed, out.Status)
	default:
		out, err := w.sender.Send(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sifen.OutcomeSent, out.Status)
		if status != sifen.StatusSent {
			w.clock.Advance(sifen.DefaultConsultaInterval)
			_, err := w.sender.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
			require.NoError(t, err)
		}
	}
}

// Issue 22 item 6: a CDC whose send is under way is "being sent now by
// another send", not "left by a send without answer"; once the send is
// older than any request lasts, it is the latter, with what happens next.
func TestImportOfACDCBeingSent(t *testing.T) {
	ctx := context.Background()
	lost := errors.New("the answer never came")
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{
		BeforeRecepcion: func(context.Context, sifensim.Recepcion) error { return lost }}})
	doc := sifentest.Doc{Number: 1}
	id := w.importDocs(t, sifen.EnvTest, doc.File())[0]
	out, err := w.sender.Send(ctx, id)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeUnknown, out.Status)
	claimed := w.doc(t, id).ClaimedAt.UTC().Format("2006-01-02 15:04:05 UTC")

	_, err = w.sender.Import(ctx, doc.File(), sifen.EnvTest)
	var taken *sifen.CDCError
	require.ErrorAs(t, err, &taken)
	require.True(t, taken.SendInProgress())
	require.Contains(t, err.Error(), "being sent now by another send since "+claimed)

	w.clock.Advance(sifen.DefaultInFlightFor)
	_, err = w.sender.ImportReplacing(ctx, doc.File(), sifen.EnvTest)
	require.ErrorAs(t, err, &taken)
	require.False(t, taken.SendInProgress())
	require.Contains(t, err.Error(), "left in sending by a send without answer since "+claimed+"; SIFEN is asked about it once that send is 15m0s old")
}
