package sifen_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/balde-throttle/balde/sifen"
)

// soapRoundTrip decodes data as an envelope holding a T: exactly one of
// body, fault and error comes back, an error is SIFEN's rRetEnviDe refusal
// (*RemoteError with its code) or wraps ErrMalformedXML, and a body
// re-encodes to a stable envelope.
func soapRoundTrip[T any](t *testing.T, data []byte) {
	body, fault, err := sifen.UnmarshalSOAP[T](data)
	n := 0
	for _, set := range []bool{body != nil, fault != nil, err != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("UnmarshalSOAP[%T]: body %v, fault %v, error %v: want exactly one", *new(T), body != nil, fault, err)
	}
	if err != nil {
		var refused *sifen.RemoteError
		if errors.As(err, &refused) && refused.Code != "" {
			return // SIFEN's generic refusal rRetEnviDe
		}
		if !errors.Is(err, sifen.ErrMalformedXML) {
			t.Fatalf("UnmarshalSOAP[%T]: error %v is neither an rRetEnviDe refusal nor wraps ErrMalformedXML", *new(T), err)
		}
		return
	}
	if fault != nil {
		_ = fault.String()
		return
	}
	out, err := sifen.MarshalSOAP(body)
	if err != nil {
		t.Fatalf("marshal a decoded %T: %v", *body, err)
	}
	again, fault, err := sifen.UnmarshalSOAP[T](out)
	if err != nil || fault != nil {
		t.Fatalf("decode %q: fault %v, error %v", out, fault, err)
	}
	out2, err := sifen.MarshalSOAP(again)
	if err != nil || !bytes.Equal(out, out2) {
		t.Fatalf("encoding is not stable:\n%s\n%s", out, out2)
	}
}

// FuzzUnmarshalSOAP: any answer of SIFEN's (outside input) decodes as
// each of the three answers the client reads, or fails with
// ErrMalformedXML; never a panic.
func FuzzUnmarshalSOAP(f *testing.F) {
	files, err := filepath.Glob("testdata/soap/*.xml")
	answers, aerr := filepath.Glob("testdata/answers/*.xml")
	files = append(files, answers...)
	if err != nil || aerr != nil || len(answers) == 0 {
		f.Fatalf("seed answers: %v %v (%d files)", err, aerr, len(files))
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<Envelope xmlns="http://www.w3.org/2003/05/soap-envelope"><Body/></Envelope>`))
	f.Add([]byte(`<soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope"><soap:Body><soap:Fault><soap:Code><soap:Value>x</soap:Value></soap:Code></soap:Fault></soap:Body></soap:Envelope>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		soapRoundTrip[sifen.EnvioLoteResponse](t, data)
		soapRoundTrip[sifen.ConsultaLoteResponse](t, data)
		soapRoundTrip[sifen.ConsultaDEResponse](t, data)
	})
}
