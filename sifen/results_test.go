package sifen_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
)

// Issue 22 item 4: dEstRes is read the way DNIT writes it.
func TestReadResult(t *testing.T) {
	cases := []struct {
		status string
		codes  []string
		want   sifen.Verdict
	}{
		{"Aprobado", nil, sifen.VerdictApproved},
		{"APROBADO", nil, sifen.VerdictApproved},
		{" aprobado\n", nil, sifen.VerdictApproved},
		{"Aprobado con observación", nil, sifen.VerdictApprovedWithObs},       // the manual
		{"Aprobado con Observación", nil, sifen.VerdictApprovedWithObs},       // the guide
		{"Aprobado con observacion", nil, sifen.VerdictApprovedWithObs},       // no accent
		{"Aprobado con observaciones", nil, sifen.VerdictApprovedWithObs},     // plural (manual §12: "AO")
		{"Aprobado  con\tObservación", nil, sifen.VerdictApprovedWithObs},     // spaces
		{"Aprobado con observacio\u0301n", nil, sifen.VerdictApprovedWithObs}, // decomposed accent
		{"Rechazado", nil, sifen.VerdictRejected},
		{"RECHAZADO", []string{"0260"}, sifen.VerdictRejected}, // dEstRes wins
		{"", []string{"0260"}, sifen.VerdictApproved},
		{"Autorizado", []string{"1005", "0260"}, sifen.VerdictApproved},
		{"", nil, sifen.VerdictUnknown},
		{"Pendiente", []string{"0999"}, sifen.VerdictUnknown},
		{"Aprobado con", nil, sifen.VerdictUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.status, func(t *testing.T) {
			require.Equal(t, tc.want, sifen.ReadResult(tc.status, tc.codes...))
		})
	}
	require.Equal(t, sifen.ResultApprovedWithObs, sifen.ReadResult("APROBADO CON OBSERVACIÓN"), "stored as the canonical text")
}

// Issue 22 item 5: the dProtAut of a 0422 answer, wherever xContenDE
// carries it.
func TestConsultaDEAuthNumber(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"elements", `<rDE><DE Id="1"/></rDE><dProtAut>48493331</dProtAut><xContEv/>`, "48493331"},
		{"rContDe in a namespace", `<rContDe xmlns="http://ekuatia.set.gov.py/sifen/xsd"><rDE/><dProtAut> 1234567890 </dProtAut></rContDe>`, "1234567890"},
		{"escaped", `&lt;rContDe&gt;&lt;dProtAut&gt;999&lt;/dProtAut&gt;&lt;/rContDe&gt;`, "999"},
		{"CDATA", `<![CDATA[<?xml version="1.0"?><rContDe><rDE/><dProtAut>77</dProtAut></rContDe>]]>`, "77"},
		{"an event's own dProtAut is not the DE's", `<rDE/><xContEv><rContEv><dProtAut>5</dProtAut></rContEv></xContEv><dProtAut>6</dProtAut>`, "6"},
		{"nothing inside rDE counts", `<rDE><dProtAut>5</dProtAut></rDE>`, ""},
		{"not a number", `<rContDe><dProtAut>n/a</dProtAut></rContDe>`, ""},
		{"empty", ``, ""},
		{"not XML", `CDC encontrado`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body>` +
				`<ns2:rEnviConsDeResponse xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:dCodRes>0422</ns2:dCodRes>` +
				`<ns2:xContenDE>` + tc.content + `</ns2:xContenDE></ns2:rEnviConsDeResponse></env:Body></env:Envelope>`
			r, fault, err := sifen.UnmarshalSOAP[sifen.ConsultaDEResponse]([]byte(body))
			require.NoError(t, err)
			require.Nil(t, fault)
			require.Equal(t, tc.want, r.AuthNumber())
		})
	}
}

// Issue 22 item 5: which answers prove SIFEN did not process a request
// (the documents may be sent again) and which do not (they wait for
// Resolve).
func TestNotSentByAnswer(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"rRetEnviDe on 200", &sifen.RemoteError{StatusCode: 200, Code: "0160"}, true},
		{"env:Sender fault", &sifen.RemoteError{StatusCode: 400, Fault: "env:Sender: x", FaultCode: "env:Sender"}, true},
		{"soap:VersionMismatch", &sifen.RemoteError{StatusCode: 500, Fault: "x", FaultCode: "soap:VersionMismatch"}, true},
		{"env:Receiver fault on 500", &sifen.RemoteError{StatusCode: 500, Fault: "env:Receiver: x", FaultCode: "env:Receiver"}, false},
		{"env:Receiver fault on 400", &sifen.RemoteError{StatusCode: 400, Fault: "env:Receiver: x", FaultCode: "env:Receiver"}, false},
		{"an unknown fault on 500", &sifen.RemoteError{StatusCode: 500, Fault: "x", FaultCode: "Server"}, false},
		{"404 without a body we read", &sifen.RemoteError{StatusCode: 404, Body: "not found"}, true},
		{"502 from a proxy", &sifen.RemoteError{StatusCode: 502, Body: "bad gateway"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sifen.NotSent(tc.err))
		})
	}
}
