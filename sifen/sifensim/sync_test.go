package sifensim_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// siRecepDE answers a DE's result at once, under the RUC rules of a lot of
// one: a second DE of the RUC inside the interval is refused (0301) and
// blocks the RUC for lots too; a DE sent again is rejected (1001); an
// approved DE is found by siConsDE.
func TestRecepcionDE(t *testing.T) {
	s := start(t, sifensim.Config{Interval: 10 * time.Second, Block: 10 * time.Minute})
	ctx := context.Background()
	d := sifentest.Doc{Number: 1}
	prot, err := s.client.RecepcionDE(ctx, sifen.EnvTest, d.File())
	require.NoError(t, err)
	require.Equal(t, sifensim.ResultApproved, prot.State())
	require.Equal(t, d.CDC(), prot.CDC)
	require.NotEmpty(t, prot.AuthNumber)
	code, _ := prot.Code()
	require.Equal(t, "0260", code)

	found, err := s.client.ConsultaDE(ctx, sifen.EnvTest, d.CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDEFound, found.Code)
	require.Equal(t, prot.AuthNumber, found.AuthNumber())

	s.clock.Advance(3 * time.Second)
	prot, err = s.client.RecepcionDE(ctx, sifen.EnvTest, sifentest.Doc{Number: 2}.File())
	require.NoError(t, err)
	require.Equal(t, sifensim.ResultRejected, prot.State())
	code, msg := prot.Code()
	require.Equal(t, sifensim.CodeLotNotQueued, code)
	require.Contains(t, msg, "envíos demasiado frecuentes")
	// The block covers the RUC's lots as well.
	require.Equal(t, sifensim.CodeLotNotQueued, s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 3})).Code)

	s.clock.Advance(time.Hour)
	prot, err = s.client.RecepcionDE(ctx, sifen.EnvTest, d.File())
	require.NoError(t, err)
	require.Equal(t, sifensim.ResultRejected, prot.State())
	code, _ = prot.Code()
	require.Equal(t, "1001", code)

	st := s.stats(t)
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionDE, "test", "80069563", "0260"))
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionDE, "test", "80069563", sifensim.CodeLotNotQueued))
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionDE, "test", "80069563", "1001"))
}

// A lot of the RUC on the wire or answered inside the interval refuses a
// DE of it, as it refuses a lot.
func TestRecepcionDEAfterALot(t *testing.T) {
	s := start(t, sifensim.Config{Interval: 10 * time.Second})
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 1})).Code)
	prot, err := s.client.RecepcionDE(context.Background(), sifen.EnvTest, sifentest.Doc{Number: 2}.File())
	require.NoError(t, err)
	code, _ := prot.Code()
	require.Equal(t, sifensim.CodeLotNotQueued, code)
	// Another RUC is not affected.
	prot, err = s.client.RecepcionDE(context.Background(), sifen.EnvTest, sifentest.Doc{RUC: "80012345", Number: 2}.File())
	require.NoError(t, err)
	require.Equal(t, sifensim.ResultApproved, prot.State())
}

func TestRecepcionDEMalformed(t *testing.T) {
	s := start(t, sifensim.Config{})
	status, body := s.post(t, "/test"+sifensim.RecepcionDEPath, sifen.SOAPContentType,
		[]byte(`<soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope"><soap:Body><rEnviDe xmlns="http://ekuatia.set.gov.py/sifen/xsd"><dId>1</dId><xDE>nothing</xDE></rEnviDe></soap:Body></soap:Envelope>`))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "<ns2:dCodRes>0160</ns2:dCodRes>")
}

func TestConsultaRUC(t *testing.T) {
	s := start(t, sifensim.Config{})
	for _, tc := range []struct {
		ruc, code, want string
	}{
		{"80069563", sifensim.CodeRUCFound, "<ns2:dRUCFactElec>S</ns2:dRUCFactElec>"},
		{"1234", sifensim.CodeRUCNotFound, "RUC no existe"},
		{"80069563-1", sifensim.CodeRUCNotFound, "RUC no existe"},
	} {
		status, body := s.post(t, "/test"+sifensim.ConsultaRUCPath, sifen.SOAPContentType, []byte(fmt.Sprintf(
			`<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><rEnviConsRUC xmlns="http://ekuatia.set.gov.py/sifen/xsd"><dId>1</dId><dRUCCons>%s</dRUCCons></rEnviConsRUC></env:Body></env:Envelope>`, tc.ruc)))
		require.Equal(t, http.StatusOK, status, tc.ruc)
		require.Contains(t, body, "<ns2:rResEnviConsRUC xmlns:ns2=", tc.ruc)
		require.Contains(t, body, "<ns2:dCodRes>"+tc.code+"</ns2:dCodRes>", tc.ruc)
		require.Contains(t, body, tc.want, tc.ruc)
	}
	require.Equal(t, int64(1), s.Stats().Count(sifensim.ServiceConsultaRUC, "test", "80069563", sifensim.CodeRUCFound))
}

func eventBody(cdc string, signed bool) []byte {
	sig := ""
	if signed {
		sig = `<Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo/></Signature>`
	}
	return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Header/><env:Body><rEnviEventoDe xmlns="http://ekuatia.set.gov.py/sifen/xsd"><dId>1</dId><dEvReg><gGroupGesEve><rGesEve><rEve Id="7"><dFecFirma>2026-01-02T10:00:00</dFecFirma><dVerFor>150</dVerFor><gGroupTiEvt><rGeVeCan><Id>%s</Id><mOtEve>Error en la emision</mOtEve></rGeVeCan></gGroupTiEvt></rEve>%s</rGesEve></gGroupGesEve></dEvReg></rEnviEventoDe></env:Body></env:Envelope>`, cdc, sig)
}

// An event on an approved DE is registered (0600, a dProtAut); on a DE the
// simulator has not approved it is rejected; unsigned, in prod too.
func TestRecepcionEvento(t *testing.T) {
	s := start(t, sifensim.Config{})
	d := sifentest.Doc{Number: 1}
	_, err := s.client.RecepcionDE(context.Background(), sifen.EnvTest, d.File())
	require.NoError(t, err)
	for _, tc := range []struct {
		name, env, cdc string
		signed         bool
		code           string
	}{
		{"Registered", "test", d.CDC(), true, sifensim.CodeEventRegistered},
		{"UnknownCDC", "test", sifentest.Doc{Number: 2}.CDC(), true, sifensim.CodeEventCDCNotFound},
		{"UnsignedInProd", "prod", d.CDC(), false, "0141"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := s.post(t, "/"+tc.env+sifensim.EventoPath, "application/xml; charset=utf-8", eventBody(tc.cdc, tc.signed))
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, body, "<ns2:rRetEnviEventoDe xmlns:ns2=")
			require.Contains(t, body, "<ns2:id>7</ns2:id>")
			require.Contains(t, body, "<ns2:dCodRes>"+tc.code+"</ns2:dCodRes>")
			if tc.code == sifensim.CodeEventRegistered {
				require.Contains(t, body, "<ns2:dEstRes>Aprobado</ns2:dEstRes><ns2:dProtAut>")
			}
		})
	}
}
