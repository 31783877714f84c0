package sifen_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
)

func TestUnmarshalSOAPSamples(t *testing.T) {
	t.Run("RecepcionQueued", func(t *testing.T) {
		r, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](readTestdata(t, "soap/recep_lote_ok.xml"))
		require.NoError(t, err)
		require.Nil(t, fault)
		require.Equal(t, sifen.CodeLotQueued, r.Code)
		require.Equal(t, "Lote recibido con éxito", r.Message)
		// 17 digits, kept exactly.
		require.Equal(t, "98765432109876543", r.LotNumber)
		require.Equal(t, "2026-01-02T10:00:05-03:00", r.ProcessedAt)
	})
	t.Run("RecepcionNotQueued", func(t *testing.T) {
		r, _, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](readTestdata(t, "soap/recep_lote_rejected.xml"))
		require.NoError(t, err)
		require.Equal(t, sifen.CodeLotNotQueued, r.Code)
		require.Empty(t, r.LotNumber)
	})
	t.Run("ConsultaLoteDone", func(t *testing.T) {
		r, _, err := sifen.UnmarshalSOAP[sifen.ConsultaLoteResponse](readTestdata(t, "soap/consulta_lote_done.xml"))
		require.NoError(t, err)
		require.Equal(t, sifen.CodeLotDone, r.Code)
		require.Len(t, r.Results, 2)
		require.True(t, r.Results[0].Approved())
		require.Equal(t, "1234567890", r.Results[0].AuthNumber)
		require.False(t, r.Results[1].Approved())
		require.Equal(t, []sifen.ResultMessage{{Code: "1001", Message: "CDC duplicado"}}, r.Results[1].Messages)
	})
	t.Run("ConsultaDENotFound", func(t *testing.T) {
		r, _, err := sifen.UnmarshalSOAP[sifen.ConsultaDEResponse](readTestdata(t, "soap/consulta_de_not_found.xml"))
		require.NoError(t, err)
		require.Equal(t, sifen.CodeDENotFound, r.Code)
	})
	t.Run("Fault", func(t *testing.T) {
		r, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](readTestdata(t, "soap/fault.xml"))
		require.NoError(t, err)
		require.Nil(t, r)
		require.Equal(t, "env:Sender: Mensaje SOAP inválido", fault.String())
	})
	t.Run("ErrMalformedXMLOtherBody", func(t *testing.T) {
		_, _, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](readTestdata(t, "soap/consulta_de_not_found.xml"))
		require.ErrorIs(t, err, sifen.ErrMalformedXML)
	})
	t.Run("ErrMalformedXMLNotSOAP", func(t *testing.T) {
		_, _, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse]([]byte("<html>502 Bad Gateway</html>"))
		require.ErrorIs(t, err, sifen.ErrMalformedXML)
	})
}

func TestMarshalSOAPRoundTrip(t *testing.T) {
	in := sifen.EnvioLote{ID: "123456789012345", XDE: "UEsDBA=="}
	b, err := sifen.MarshalSOAP(&in)
	require.NoError(t, err)
	require.Contains(t, string(b), `<soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope"><soap:Header/><soap:Body><rEnvioLote xmlns="http://ekuatia.set.gov.py/sifen/xsd"><dId>123456789012345</dId><xDE>UEsDBA==</xDE></rEnvioLote>`)
	out, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLote](b)
	require.NoError(t, err)
	require.Nil(t, fault)
	in.XMLName = out.XMLName
	require.Equal(t, in, *out)
}
