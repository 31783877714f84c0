package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

func soapEnvelope(body string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope"><soap:Header/><soap:Body>` +
		body + `</soap:Body></soap:Envelope>`)
}

// sendDE posts siRecepDE with d to the gateway, the rDE inside xDE as
// SIFEN's clients write it.
func (w *sifenGatewayWorld) sendDE(t *testing.T, d sifentest.Doc) (int, string, []byte) {
	t.Helper()
	return w.post(t, sifen.RecepcionDEPath, soapEnvelope(`<rEnviDe xmlns="`+sifen.Namespace+`"><dId>1</dId><xDE>`+string(d.XML())+`</xDE></rEnviDe>`))
}

func consultaDE(cdc string) []byte {
	return soapEnvelope(`<rEnviConsDeRequest xmlns="` + sifen.Namespace + `"><dId>2</dId><dCDC>` + cdc + `</dCDC></rEnviConsDeRequest>`)
}

func consultaRUC(ruc string) []byte {
	return soapEnvelope(`<rEnviConsRUC xmlns="` + sifen.Namespace + `"><dId>3</dId><dRUCCons>` + ruc + `</dRUCCons></rEnviConsRUC>`)
}

func evento(cdc string, signed bool) []byte {
	sig := ""
	if signed {
		sig = `<Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo/></Signature>`
	}
	return soapEnvelope(`<rEnviEventoDe xmlns="` + sifen.Namespace + `"><dId>4</dId><dEvReg><gGroupGesEve><rGesEve><rEve Id="9"><dFecFirma>2026-01-02T10:00:00</dFecFirma><dVerFor>150</dVerFor><gGroupTiEvt><rGeVeCan><Id>` +
		cdc + `</Id><mOtEve>Error en la emision</mOtEve></rGeVeCan></gGroupTiEvt></rEve>` + sig + `</rGesEve></gGroupGesEve></dEvReg></rEnviEventoDe>`)
}

// A single DE (siRecepDE) goes through the RUC's gate as a lot of one: it
// is answered with SIFEN's protocol and recorded approved, and a lot of
// the same RUC right after it is held for the interval, not sent into a
// 0301; and the other way round.
func TestSifenGatewayRecepcionDE(t *testing.T) {
	w := newSifenGatewayWorld(t, sqlstore.SQLite, time.Minute)
	d := sifentest.Doc{Number: 1}
	status, _, body := w.sendDE(t, d)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), `<env:Body><ns2:rRetEnviDe xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:rProtDe><ns2:id>`+d.CDC()+`</ns2:id>`)
	require.Contains(t, string(body), `<ns2:dEstRes>Aprobado</ns2:dEstRes><ns2:dProtAut>`)

	docs, err := w.sender.List(context.Background(), sifen.Filter{})
	require.NoError(t, err)
	require.Len(t, docs, 1)
	require.Equal(t, sifen.StatusApproved, docs[0].Status)
	require.NotEmpty(t, docs[0].AuthNumber)

	start := w.clock.Now()
	status, _, body = w.sendLot(t, sifentest.Doc{Number: 2})
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.GreaterOrEqual(t, w.clock.Now().Sub(start), sifen.DefaultInterval, "the lot was held for the interval")
	start = w.clock.Now()
	status, _, body = w.sendDE(t, sifentest.Doc{Number: 3})
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.GreaterOrEqual(t, w.clock.Now().Sub(start), sifen.DefaultInterval, "the DE was held for the interval")

	// A DE already approved is refused by balde, not sent again.
	status, _, body = w.sendDE(t, d)
	require.Equal(t, http.StatusConflict, status, "%s", body)

	st := w.sim.Stats()
	require.Zero(t, st.Count("", "", "", sifen.CodeLotNotQueued), "0301s")
	require.Equal(t, int64(2), st.Count(sifensim.ServiceRecepcionDE, "", "", ""))
	require.Equal(t, int64(1), st.Count(sifen.ServiceRecepcionLote, "", "", sifensim.CodeLotQueued))
}

// Without a hold, a DE inside its RUC's interval is a 429 fault with
// Retry-After, and nothing reaches SIFEN; a request that is no single DE
// is a 400.
func TestSifenGatewayRecepcionDERefusals(t *testing.T) {
	w := newSifenGatewayWorld(t, sqlstore.SQLite, -1)
	status, _, body := w.sendLot(t, sifentest.Doc{Number: 1})
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, retryAfter, body := w.sendDE(t, sifentest.Doc{Number: 2})
	require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	require.NotEmpty(t, retryAfter)
	require.Contains(t, string(body), "send again after "+retryAfter+" s")

	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"NotRecepDE", consultaDE(sifentest.Doc{}.CDC()), "not a siRecepDE request"},
		{"TwoDEs", soapEnvelope(`<rEnviDe xmlns="` + sifen.Namespace + `"><dId>1</dId><xDE>` + string(sifentest.Doc{Number: 5}.XML()) + string(sifentest.Doc{Number: 6}.XML()) + `</xDE></rEnviDe>`), "holds 2 DEs"},
		{"Unsigned", soapEnvelope(`<rEnviDe xmlns="` + sifen.Namespace + `"><dId>1</dId><xDE>` + string(sifentest.Doc{Number: 7, Unsigned: true}.XML()) + `</xDE></rEnviDe>`), "not signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := w.post(t, sifen.RecepcionDEPath, tc.body)
			require.Equal(t, http.StatusBadRequest, status, "%s", body)
			require.Contains(t, string(body), tc.want)
		})
	}
	require.Equal(t, int64(1), w.sim.Stats().Total, "only the first lot reached SIFEN")
}

// The consultations (siConsDE, siConsRUC) and events (siRecepEvento) pass
// through byte for byte, not gated by the RUC's interval: right after a
// lot of the RUC they reach SIFEN at once. A malformed or unsigned request
// is refused before it leaves.
func TestSifenGatewayPassesConsultationsAndEvents(t *testing.T) {
	w := newSifenGatewayWorld(t, sqlstore.SQLite, -1)
	d := sifentest.Doc{Number: 1}
	status, _, body := w.sendDE(t, d)
	require.Equal(t, http.StatusOK, status, "%s", body)

	for _, tc := range []struct {
		name, path string
		body       []byte
		status     int
		want       string
	}{
		{"ConsDEFound", sifen.ConsultaPath, consultaDE(d.CDC()), http.StatusOK, "<ns2:dCodRes>0422</ns2:dCodRes>"},
		{"ConsDEUnknown", sifen.ConsultaPath, consultaDE(sifentest.Doc{Number: 2}.CDC()), http.StatusOK, "<ns2:dCodRes>0420</ns2:dCodRes>"},
		{"ConsDEBadCDC", sifen.ConsultaPath, consultaDE("123"), http.StatusBadRequest, "is not a CDC of 44 digits"},
		{"ConsRUC", sifen.ConsultaRUCPath, consultaRUC("80069563"), http.StatusOK, "<ns2:dCodRes>0502</ns2:dCodRes>"},
		{"ConsRUCWithDV", sifen.ConsultaRUCPath, consultaRUC("80069563-1"), http.StatusBadRequest, "without check digit"},
		{"Evento", sifen.EventoPath, evento(d.CDC(), true), http.StatusOK, "<ns2:dCodRes>0600</ns2:dCodRes>"},
		{"EventoUnsigned", sifen.EventoPath, evento(d.CDC(), false), http.StatusBadRequest, "is not signed"},
		{"Unknown", "/de/ws/other.wsdl", consultaRUC("80069563"), http.StatusNotImplemented, "is not a SIFEN service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := w.post(t, tc.path, tc.body)
			require.Equal(t, tc.status, status, "%s", body)
			require.Contains(t, string(body), tc.want)
		})
	}
	st := w.sim.Stats()
	require.Equal(t, int64(2), st.Count(sifen.ServiceConsultaDE, "test", "", ""))
	require.Equal(t, int64(1), st.Count(sifensim.ServiceConsultaRUC, "test", "", ""))
	require.Equal(t, int64(1), st.Count(sifensim.ServiceEvento, "test", "", sifensim.CodeEventRegistered))
	require.Equal(t, int64(4)+1, st.Total, "the DE, then every accepted consultation and event, none refused")
}

// DEs and lots of three RUCs from concurrent clients on the real clock:
// every DE approved, every lot queued, 0 × 0301 at SIFEN.
func TestSifenGatewayDEsAndLotsConcurrently(t *testing.T) {
	for _, engine := range sqlstoretest.Engines {
		t.Run(string(engine), func(t *testing.T) {
			w := newRealSifenGatewayWorld(t, engine, time.Minute)
			rucs := []string{"80069563", "80012345", "80000005"}
			var wg sync.WaitGroup
			for i, ruc := range rucs {
				wg.Go(func() {
					status, _, body := w.sendDE(t, sifentest.Doc{RUC: ruc, Number: 10*i + 1})
					require.Equal(t, http.StatusOK, status, "%s", body)
					require.Contains(t, string(body), "<ns2:dEstRes>Aprobado</ns2:dEstRes>")
				})
				wg.Go(func() {
					status, _, body := w.sendLot(t, sifentest.Doc{RUC: ruc, Number: 10*i + 2}, sifentest.Doc{RUC: ruc, Number: 10*i + 3})
					require.Equal(t, http.StatusOK, status, "%s", body)
					require.True(t, strings.Contains(string(body), "<ns2:dCodRes>0300</ns2:dCodRes>"), "%s", body)
				})
			}
			wg.Wait()
			st := w.sim.Stats()
			require.Zero(t, st.Count("", "", "", sifen.CodeLotNotQueued), fmt.Sprintf("0301s: %+v", st.Counts))
			require.Equal(t, int64(3), st.Count(sifensim.ServiceRecepcionDE, "", "", ""))
			require.Equal(t, int64(3), st.Count(sifen.ServiceRecepcionLote, "", "", ""))
		})
	}
}
