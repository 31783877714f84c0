package sifen_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// answer is what the scripted SIFEN answers one service: a file of
// testdata/answers (or a body), with an HTTP status.
type answer struct {
	file   string
	body   string
	status int
}

// scriptedSIFEN answers each service with its scripted answer, putting
// cdc in a lot result's id (the answers carry the CDC of the DE they were
// about).
type scriptedSIFEN struct {
	t       *testing.T
	mu      sync.Mutex
	cdc     string
	answers map[string]answer // by service path
	asked   map[string]int
}

var lotResultID = regexp.MustCompile(`<ns2:id>[0-9]+</ns2:id>`)

func (s *scriptedSIFEN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	for path, a := range s.answers {
		if !strings.HasSuffix(r.URL.Path, path) {
			continue
		}
		s.asked[path]++
		body := a.body
		if a.file != "" {
			body = string(readTestdata(s.t, "answers/"+a.file))
		}
		body = lotResultID.ReplaceAllString(body, "<ns2:id>"+s.cdc+"</ns2:id>")
		w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, body)
		return
	}
	http.Error(w, "no answer scripted for "+r.URL.Path, http.StatusServiceUnavailable)
}

// Issue 22 items 4 and 5: SIFEN's published answers (testdata/answers,
// README there) are each read, through the real client and Sender, to the
// document state DNIT means, with the authorisation number they carry.
// On the old code: "Aprobado con Observación" was rejected, rRetEnviDe on
// 200 left the document sending (48 h) and on 400 made it an error whose
// message was raw XML, a Receiver fault made it sendable again, and 0422
// gave no dProtAut.
func TestPublishedAnswersSettleDocuments(t *testing.T) {
	ok := func(file string) *answer { return &answer{file: file, status: http.StatusOK} }
	cases := []struct {
		name string
		// recep answers siRecepLoteDE; lot, when set, the lot's query 10
		// minutes later; consDE, when set, siConsDE asked by Resolve.
		recep       answer
		lot, consDE *answer

		wantOutcome sifen.LotSendStatus
		wantStatus  sifen.Status
		wantResult  string
		wantAuth    string
		wantCode    string
		wantMessage string
	}{
		{name: "0300 then 0362 Aprobado 0260", recep: *ok("recep_lote_0300.xml"), lot: ok("lote_aprobado_0260.xml"),
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApproved, wantAuth: "48493331", wantCode: "0260"},
		{name: "0362 Aprobado con Observación, the guide's capitals", recep: *ok("recep_lote_0300.xml"), lot: ok("lote_aprobado_con_observacion_guia.xml"),
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApprovedWithObs, wantAuth: "48493331", wantCode: "1005",
			wantMessage: "1005 Transmisión extemporánea del DE"},
		{name: "0362 Aprobado con observación, the manual's", recep: *ok("recep_lote_0300.xml"), lot: ok("lote_aprobado_con_observacion_manual.xml"),
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApprovedWithObs, wantAuth: "48493331", wantCode: "1005",
			wantMessage: "1005 Transmisión extemporánea del DE"},
		{name: "0362 Rechazado 0160, the guide's example", recep: *ok("recep_lote_0300.xml"), lot: ok("lote_rechazado_0160_guia.xml"),
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusRejected, wantResult: sifen.ResultRejected, wantCode: "0160",
			wantMessage: "0160 XML malformado: [El valor  del elemento: dDirRec es"},
		{name: "0362 Rechazado 1309", recep: *ok("recep_lote_0300.xml"), lot: ok("lote_rechazado_1309.xml"),
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusRejected, wantResult: sifen.ResultRejected, wantCode: "1309",
			wantMessage: "1309 El Dígito Verificador ingresado no corresponde al módulo 11 del RUC"},
		{name: "0362 with a result nobody knows stays sent", recep: *ok("recep_lote_0300.xml"),
			lot:         &answer{status: http.StatusOK, body: unreadableResult(t, "Pendiente", "0999")},
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusSent, wantMessage: "cannot read (Pendiente: 0999 Aprobado)"},
		{name: "0362 with an unknown dEstRes but code 0260 is approved", recep: *ok("recep_lote_0300.xml"),
			lot:         &answer{status: http.StatusOK, body: unreadableResult(t, "Pendiente", "0260")},
			wantOutcome: sifen.OutcomeSent, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApproved, wantAuth: "48493331", wantCode: "0260"},
		{name: "rRetEnviDe 0160 on HTTP 200", recep: answer{file: "recep_rretenvide_0160.xml", status: http.StatusOK},
			wantOutcome: sifen.OutcomeNotQueued, wantStatus: sifen.StatusError, wantCode: "0160",
			wantMessage: "SIFEN did not queue the lot: 0160 XML Mal Formado."},
		{name: "rRetEnviDe 0160 on HTTP 400", recep: answer{file: "recep_rretenvide_0160.xml", status: http.StatusBadRequest},
			wantOutcome: sifen.OutcomeNotQueued, wantStatus: sifen.StatusError, wantCode: "0160",
			wantMessage: "SIFEN did not queue the lot: 0160 XML Mal Formado."},
		{name: "rRetEnviDe 0160 as the manual writes it, on HTTP 400", recep: answer{file: "recep_rretenvide_0160_manual.xml", status: http.StatusBadRequest},
			wantOutcome: sifen.OutcomeNotQueued, wantStatus: sifen.StatusError, wantCode: "0160",
			wantMessage: "SIFEN did not queue the lot: 0160 XML malformado"},
		{name: "Receiver fault, then 0422 with xContenDE as elements", recep: answer{file: "fault_receiver.xml", status: http.StatusInternalServerError},
			consDE:      ok("consulta_de_0422_elements.xml"),
			wantOutcome: sifen.OutcomeUnknown, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApproved, wantAuth: "48493331", wantCode: sifen.CodeDEFound},
		{name: "Receiver fault on HTTP 200, then 0422 with xContenDE escaped", recep: answer{file: "fault_receiver.xml", status: http.StatusOK},
			consDE:      ok("consulta_de_0422_escaped.xml"),
			wantOutcome: sifen.OutcomeUnknown, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApproved, wantAuth: "48493332", wantCode: sifen.CodeDEFound},
		{name: "no answer, then 0422 with xContenDE in CDATA", recep: answer{body: "upstream timed out", status: http.StatusGatewayTimeout},
			consDE:      ok("consulta_de_0422_cdata.xml"),
			wantOutcome: sifen.OutcomeUnknown, wantStatus: sifen.StatusApproved, wantResult: sifen.ResultApproved, wantAuth: "48493333", wantCode: sifen.CodeDEFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := throttle.NewManualClock(throttletest.Epoch)
			store := sqlstoretest.MustOpenDSN(t, sqlstoretest.DSN(t, sqlstore.SQLite), clock.Now)
			sim := &scriptedSIFEN{t: t, answers: map[string]answer{sifen.RecepcionPath: tc.recep}, asked: map[string]int{}}
			if tc.lot != nil {
				sim.answers[sifen.ConsultaLotePath] = *tc.lot
			}
			if tc.consDE != nil {
				sim.answers[sifen.ConsultaPath] = *tc.consDE
			}
			ts := httptest.NewServer(sim)
			t.Cleanup(ts.Close)
			_, sender := newSender(t, store, store, ts.URL, sifen.PolicyConfig{}, clock.Now, sifen.SenderConfig{})
			docs, err := sender.Import(ctx, sifentest.Doc{Number: 1}.File(), sifen.EnvTest)
			require.NoError(t, err)
			id := docs[0].ID
			sim.cdc = docs[0].CDC

			out, err := sender.Send(ctx, id)
			require.NoError(t, err)
			require.Equal(t, tc.wantOutcome, out.Status, out.Message)
			if tc.lot != nil {
				clock.Advance(sifen.DefaultConsultaInterval)
				_, err := sender.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
				require.NoError(t, err)
			}
			if tc.consDE != nil {
				d, err := sender.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, sifen.StatusSending, d.Status, "no resend before SIFEN is asked")
				clock.Advance(sifen.DefaultResolveAfter)
				resolved, err := sender.Resolve(ctx)
				require.NoError(t, err)
				require.Equal(t, []sifen.Resolved{{DocumentID: id, CDC: d.CDC, Code: sifen.CodeDEFound, Status: sifen.StatusApproved}}, resolved)
			}
			d, err := sender.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, d.Status, d.Message)
			require.Equal(t, tc.wantResult, d.Result)
			require.Equal(t, tc.wantAuth, d.AuthNumber)
			if tc.wantCode != "" {
				require.Equal(t, tc.wantCode, d.ResponseCode)
			}
			require.Contains(t, d.Message, tc.wantMessage)
			require.NotContains(t, d.Message, "<", "a message for a person, not XML")
		})
	}
}

// unreadableResult is lote_aprobado_0260.xml with another dEstRes and code.
func unreadableResult(t *testing.T, status, code string) string {
	s := strings.Replace(string(readTestdata(t, "answers/lote_aprobado_0260.xml")),
		"<ns2:dEstRes>Aprobado</ns2:dEstRes>", "<ns2:dEstRes>"+status+"</ns2:dEstRes>", 1)
	return strings.Replace(s, "<ns2:dCodRes>0260</ns2:dCodRes>", "<ns2:dCodRes>"+code+"</ns2:dCodRes>", 1)
}

// A lot result balde cannot read is not rewritten at every query: the
// document keeps its message and version until the result changes.
func TestUnreadableLotResultIsNotRewritten(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := sqlstoretest.MustOpenDSN(t, sqlstoretest.DSN(t, sqlstore.SQLite), clock.Now)
	unknown := unreadableResult(t, "Observado", "0999")
	sim := &scriptedSIFEN{t: t, asked: map[string]int{}, answers: map[string]answer{
		sifen.RecepcionPath:    {file: "recep_lote_0300.xml", status: http.StatusOK},
		sifen.ConsultaLotePath: {body: unknown, status: http.StatusOK},
	}}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	_, sender := newSender(t, store, store, ts.URL, sifen.PolicyConfig{}, clock.Now, sifen.SenderConfig{})
	docs, err := sender.Import(ctx, sifentest.Doc{Number: 1}.File(), sifen.EnvTest)
	require.NoError(t, err)
	sim.cdc = docs[0].CDC
	out, err := sender.Send(ctx, docs[0].ID)
	require.NoError(t, err)

	var versions []int64
	for range 3 {
		clock.Advance(sifen.DefaultConsultaInterval)
		lo, err := sender.QueryLot(ctx, sifen.EnvTest, out.LotNumber)
		require.NoError(t, err)
		require.Zero(t, lo.Updated)
		d, err := sender.Get(ctx, docs[0].ID)
		require.NoError(t, err)
		require.Equal(t, sifen.StatusSent, d.Status)
		require.Empty(t, d.Result)
		versions = append(versions, d.Version)
	}
	require.Equal(t, 3, sim.asked[sifen.ConsultaLotePath])
	require.Equal(t, versions[0], versions[2], "queried again, not rewritten")
}

// The loop closed over the wire: a lot the simulator queued and processed
// but whose answer was lost is settled by Resolve from the simulator's
// 0422, and the document gets the dProtAut its lot's result gave it (on
// the old code: approved without one).
func TestResolveStoresTheDProtAutOfA0422(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, sqlstore.SQLite, worldConfig{sim: sifensim.Config{Processing: time.Second}})
	// loseAnswers forwards every request to the simulator and loses the
	// answers of siRecepLoteDE (504 after the simulator took the lot).
	loseAnswers := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		resp, err := http.Post(w.simURL+r.URL.Path, r.Header.Get("Content-Type"), bytes.NewReader(body))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if strings.HasSuffix(r.URL.Path, sifen.RecepcionPath) {
			rw.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		rw.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		rw.WriteHeader(resp.StatusCode)
		_, _ = rw.Write(answer)
	}))
	t.Cleanup(loseAnswers.Close)
	_, sender := newSender(t, w.store, w.store, loseAnswers.URL, sifen.PolicyConfig{}, w.clock.Now, sifen.SenderConfig{})

	id := w.importDocs(t, sifen.EnvTest, sifentest.Doc{Number: 1}.File())[0]
	out, err := sender.Send(ctx, id)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeUnknown, out.Status)
	w.clock.Advance(sifen.DefaultResolveAfter)
	resolved, err := sender.Resolve(ctx)
	require.NoError(t, err)
	require.Len(t, resolved, 1)
	d := w.doc(t, id)
	require.Equal(t, sifen.StatusApproved, d.Status)
	require.Regexp(t, `^[0-9]{10}$`, d.AuthNumber, "the simulator's dProtAut")
	require.Equal(t, int64(1), w.stats(t).Count(sifen.ServiceConsultaDE, "", "", sifen.CodeDEFound))
}
