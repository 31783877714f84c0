package sifensim_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

type sim struct {
	*sifensim.Server
	url    string
	clock  *throttle.ManualClock
	client *sifen.Client
}

func start(t *testing.T, cfg sifensim.Config) *sim {
	t.Helper()
	clock := throttle.NewManualClock(throttletest.Epoch)
	cfg.Clock, cfg.Advance = clock.Now, clock.Advance
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := sifensim.NewServer(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: ts.URL + "/{env}", HTTPClient: ts.Client()})
	require.NoError(t, err)
	return &sim{Server: s, url: ts.URL, clock: clock, client: c}
}

// send zips and sends an rLoteDE document as it is (no local checks).
func (s *sim) send(t *testing.T, env sifen.Env, doc []byte) sifen.EnvioLoteResponse {
	t.Helper()
	z, err := sifen.ZipLote(doc)
	require.NoError(t, err)
	resp, err := s.client.RecepcionLote(context.Background(), env, z)
	require.NoError(t, err)
	return resp
}

// post sends a raw body to a service path and returns the status and body.
func (s *sim) post(t *testing.T, path, contentType string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(s.url+path, contentType, bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// stats reads GET /sim/stats over HTTP.
func (s *sim) stats(t *testing.T) sifensim.Stats {
	t.Helper()
	resp, err := http.Get(s.url + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st sifensim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func TestRecepcionQueuesAndProcesses(t *testing.T) {
	s := start(t, sifensim.Config{Processing: 2 * time.Second})
	ctx := context.Background()
	docs := sifentest.Docs("88888801", 1, 3)

	resp := s.send(t, sifen.EnvTest, sifentest.Lote(docs...))
	require.Equal(t, sifensim.CodeLotQueued, resp.Code)
	require.Equal(t, "Lote recibido con éxito", resp.Message)
	require.Len(t, resp.LotNumber, 17)
	lot := resp.LotNumber

	r, err := s.client.ConsultaLote(ctx, sifen.EnvTest, lot)
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeLotProcessing, r.Code)
	require.Empty(t, r.Results)
	de, err := s.client.ConsultaDE(ctx, sifen.EnvTest, docs[0].CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDENotFound, de.Code, "not found while processing")

	s.clock.Advance(2 * time.Second)
	r, err = s.client.ConsultaLote(ctx, sifen.EnvTest, lot)
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeLotDone, r.Code)
	require.Len(t, r.Results, 3)
	for i, res := range r.Results {
		require.Equal(t, docs[i].CDC(), res.CDC)
		require.Equal(t, sifensim.ResultApproved, res.Status)
		require.NotEmpty(t, res.AuthNumber)
	}
	de, err = s.client.ConsultaDE(ctx, sifen.EnvTest, docs[0].CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDEFound, de.Code)
	require.Contains(t, de.Content, docs[0].CDC())

	// The other environment knows nothing of it.
	de, err = s.client.ConsultaDE(ctx, sifen.EnvProd, docs[0].CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDENotFound, de.Code)
	r, err = s.client.ConsultaLote(ctx, sifen.EnvProd, lot)
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeLotUnknown, r.Code)

	s.clock.Advance(48*time.Hour + time.Second)
	r, err = s.client.ConsultaLote(ctx, sifen.EnvTest, lot)
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeLotTooLate, r.Code)

	st := s.stats(t)
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionLote, "test", "88888801", sifensim.CodeLotQueued))
	require.Equal(t, int64(3), st.Count(sifensim.ServiceConsultaLote, "test", "", ""))
	require.Equal(t, int64(3), st.Count(sifensim.ServiceConsultaDE, "", "", ""))
	require.Equal(t, st.Total, st.ByService[sifensim.ServiceRecepcionLote]+st.ByService[sifensim.ServiceConsultaLote]+st.ByService[sifensim.ServiceConsultaDE])
}

func TestRecepcionLotRules(t *testing.T) {
	big := sifentest.Docs("80069563", 1, 40)
	for i := range big {
		big[i].Filler = 40_000
	}
	envelope := func(xde string) []byte {
		b, err := sifen.MarshalSOAP(&sifen.EnvioLote{ID: "1", XDE: xde})
		require.NoError(t, err)
		return b
	}
	zipped := func(doc []byte) string {
		z, err := sifen.ZipLote(doc)
		require.NoError(t, err)
		return base64.StdEncoding.EncodeToString(z)
	}
	for _, tc := range []struct {
		name    string
		xde     string
		wantMsg string
	}{
		{"TooManyDEs", zipped(sifentest.Lote(sifentest.Docs("80069563", 1, 51)...)), "el lote contiene 51 DE (máximo 50); RUC 80069563 bloqueado por 10m0s"},
		{"MixedTypes", zipped(sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2, Type: 5})), "el lote contiene DE de distintos tipos"},
		{"MixedRUC", zipped(sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2, RUC: "88888801"})), "el lote contiene DE de distintos emisores"},
		{"RepeatedCDC", zipped(sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 1})), "el lote repite el CDC"},
		{"TooBig", zipped(sifentest.Lote(big...)), "el mensaje tiene"},
		{"Empty", zipped([]byte(`<rLoteDE/>`)), "el lote no contiene DE"},
		{"Malformed", zipped([]byte(`<rLoteDE xmlns="`)), "XML mal formado"},
		{"NotZip", base64.StdEncoding.EncodeToString([]byte("plain text")), "xDE no es un archivo ZIP"},
		{"NotBase64", "%%%", "xDE no es base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, sifensim.Config{})
			status, body := s.post(t, "/test"+sifen.RecepcionPath, sifen.SOAPContentType, envelope(tc.xde))
			require.Equal(t, http.StatusOK, status)
			r, _, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse]([]byte(body))
			require.NoError(t, err)
			require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
			require.Contains(t, r.Message, "Lote no encolado para procesamiento: "+tc.wantMsg)
			require.Empty(t, r.LotNumber)
			require.Equal(t, int64(1), s.stats(t).Count(sifensim.ServiceRecepcionLote, "test", "", sifensim.CodeLotNotQueued))
			if !strings.HasPrefix(tc.wantMsg, "xDE") && tc.name != "Empty" && tc.name != "Malformed" {
				// A broken lot rule blocks the RUC.
				r := s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 77}))
				require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
				require.Contains(t, r.Message, "bloqueado hasta")
			} else {
				// An empty or unreadable lot names no RUC: nothing is blocked
				// (SIFEN, which knows the issuer from the certificate, would).
				r := s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 77}))
				require.Equal(t, sifensim.CodeLotQueued, r.Code, r.Message)
			}
		})
	}
}

func TestRecepcionBlocksFastRUC(t *testing.T) {
	s := start(t, sifensim.Config{Interval: 10 * time.Second, Block: 10 * time.Minute})
	a := sifentest.Docs("80069563", 1, 12)
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvTest, sifentest.Lote(a[0])).Code)
	// Another RUC, and the same RUC in prod, are not affected.
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{RUC: "88888801"})).Code)
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvProd, sifentest.Lote(a[0])).Code)

	s.clock.Advance(3 * time.Second)
	r := s.send(t, sifen.EnvTest, sifentest.Lote(a[1]))
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "envíos demasiado frecuentes (3s desde la respuesta al lote anterior, mínimo 10s); RUC 80069563 bloqueado por 10m0s")

	s.clock.Advance(10 * time.Second)
	r = s.send(t, sifen.EnvTest, sifentest.Lote(a[2]))
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "RUC 80069563 bloqueado hasta")

	s.clock.Advance(10*time.Minute - 10*time.Second)
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvTest, sifentest.Lote(a[3])).Code)

	st := s.stats(t)
	require.Equal(t, int64(2), st.Count(sifensim.ServiceRecepcionLote, "test", "80069563", sifensim.CodeLotQueued))
	require.Equal(t, int64(2), st.Count(sifensim.ServiceRecepcionLote, "test", "80069563", sifensim.CodeLotNotQueued))
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionLote, "prod", "80069563", sifensim.CodeLotQueued))
	require.Equal(t, int64(1), st.Count(sifensim.ServiceRecepcionLote, "test", "88888801", sifensim.CodeLotQueued))
	require.Equal(t, int64(5), st.ByRUC["80069563"])

	// A second offence within 24 h blocks twice as long (10, 20, ... 60 min).
	r = s.send(t, sifen.EnvTest, sifentest.Lote(a[4]))
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "bloqueado por 20m0s")
	prev := 20 * time.Minute
	for level, want := range []time.Duration{30 * time.Minute, 40 * time.Minute, 50 * time.Minute, time.Hour, time.Hour} {
		s.clock.Advance(prev - time.Second)
		require.Contains(t, s.send(t, sifen.EnvTest, sifentest.Lote(a[5+level])).Message, "bloqueado hasta")
		s.clock.Advance(time.Second)
		r = s.send(t, sifen.EnvTest, sifentest.Lote(a[5+level]))
		require.Equal(t, sifensim.CodeLotQueued, r.Code, r.Message)
		r = s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 100 + level}))
		require.Contains(t, r.Message, fmt.Sprintf("bloqueado por %s", want))
		prev = want
	}
}

func TestRecepcionBlocksRepeatedLot(t *testing.T) {
	s := start(t, sifensim.Config{Interval: 10 * time.Second, Block: 30 * time.Minute, Processing: time.Hour})
	lot := sifentest.Lote(sifentest.Docs("80069563", 1, 2)...)
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvTest, lot).Code)
	s.clock.Advance(time.Minute)
	r := s.send(t, sifen.EnvTest, lot)
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "lote reenviado")
	require.Contains(t, r.Message, "bloqueado por 30m0s")
	s.clock.Advance(29 * time.Minute)
	r = s.send(t, sifen.EnvTest, sifentest.Lote(sifentest.Doc{Number: 9}))
	require.Contains(t, r.Message, "bloqueado hasta")
	s.clock.Advance(time.Hour)
	r = s.send(t, sifen.EnvTest, lot)
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "lote reenviado", "the same lot, processed or not, is never taken twice")
	require.Contains(t, r.Message, "bloqueado por 1h0m0s", "a recurrence blocks twice as long")
}

func TestRecepcionCDCInProcessing(t *testing.T) {
	s := start(t, sifensim.Config{Interval: time.Second, Processing: time.Minute})
	docs := sifentest.Docs("80069563", 1, 2)
	require.Equal(t, sifensim.CodeLotQueued, s.send(t, sifen.EnvTest, sifentest.Lote(docs[0])).Code)
	s.clock.Advance(2 * time.Second)
	r := s.send(t, sifen.EnvTest, sifentest.Lote(docs...))
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "el CDC "+docs[0].CDC()+" está en procesamiento")
}

func TestProcessingRejects(t *testing.T) {
	s := start(t, sifensim.Config{Interval: time.Second, Processing: time.Second, Reject: func(_ string, de sifensim.DE) (string, string, bool) {
		return "1111", "rechazo de prueba", de.CDC == sifentest.Doc{Number: 2}.CDC()
	}})
	ctx := context.Background()
	docs := sifentest.Docs("80069563", 1, 2)
	first := s.send(t, sifen.EnvTest, sifentest.Lote(docs[0]))
	s.clock.Advance(2 * time.Second)
	// docs[0] is approved by now; sending it again in another lot gets a
	// duplicate rejection for it alone.
	second := s.send(t, sifen.EnvTest, sifentest.Lote(docs...))
	require.Equal(t, sifensim.CodeLotQueued, second.Code)
	s.clock.Advance(2 * time.Second)

	r, err := s.client.ConsultaLote(ctx, sifen.EnvTest, first.LotNumber)
	require.NoError(t, err)
	require.Equal(t, sifensim.ResultApproved, r.Results[0].Status)
	r, err = s.client.ConsultaLote(ctx, sifen.EnvTest, second.LotNumber)
	require.NoError(t, err)
	require.Equal(t, []sifen.DEResult{
		{CDC: docs[0].CDC(), Status: sifensim.ResultRejected, Messages: []sifen.ResultMessage{{Code: "1001", Message: "CDC duplicado"}}},
		{CDC: docs[1].CDC(), Status: sifensim.ResultRejected, Messages: []sifen.ResultMessage{{Code: "1111", Message: "rechazo de prueba"}}},
	}, r.Results)
	de, err := s.client.ConsultaDE(ctx, sifen.EnvTest, docs[1].CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDENotFound, de.Code)
	de, err = s.client.ConsultaDE(ctx, sifen.EnvTest, docs[0].CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDEFound, de.Code)
}

func TestBeforeRecepcionDrops(t *testing.T) {
	var seen []sifensim.Recepcion
	s := start(t, sifensim.Config{BeforeRecepcion: func(_ context.Context, r sifensim.Recepcion) error {
		seen = append(seen, r)
		return errors.New("lost in transit")
	}})
	doc := sifentest.Doc{}
	z, err := sifen.ZipLote(sifentest.Lote(doc))
	require.NoError(t, err)
	_, err = s.client.RecepcionLote(context.Background(), sifen.EnvTest, z)
	var re *sifen.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
	require.Equal(t, []sifensim.Recepcion{{Env: "test", RUC: "80069563-1", CDCs: []string{doc.CDC()}}}, seen)

	de, err := s.client.ConsultaDE(context.Background(), sifen.EnvTest, doc.CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDENotFound, de.Code)
	require.Equal(t, int64(1), s.stats(t).Count(sifensim.ServiceRecepcionLote, "test", "80069563", "dropped"))
}

func TestEnvelopeFaults(t *testing.T) {
	s := start(t, sifensim.Config{})
	valid, err := sifen.MarshalSOAP(&sifen.ConsultaDE{ID: "1", CDC: sifentest.Doc{}.CDC()})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, path, contentType string
		body                    []byte
		wantStatus              int
		wantBody                string
	}{
		{"OK", sifen.ConsultaPath, sifen.SOAPContentType, valid, http.StatusOK, "0420"},
		{"ApplicationXML", "/test" + sifen.ConsultaPath, "application/xml; charset=utf-8", valid, http.StatusOK, "0420"},
		{"SOAP11", "/test" + sifen.ConsultaPath, "text/xml; charset=utf-8", valid, http.StatusUnsupportedMediaType, "application/soap+xml"},
		// A request SIFEN cannot read: rRetEnviDe 0160 on HTTP 400, as SIFEN answers it.
		{"NotXML", "/test" + sifen.ConsultaPath, sifen.SOAPContentType, []byte("hello"), http.StatusBadRequest, "<ns2:rRetEnviDe"},
		{"WrongBody", "/test" + sifen.RecepcionPath, sifen.SOAPContentType, valid, http.StatusBadRequest, "<ns2:dCodRes>0160</ns2:dCodRes>"},
		{"UnknownEnv", "/homolog" + sifen.ConsultaPath, sifen.SOAPContentType, valid, http.StatusNotFound, "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := s.post(t, tc.path, tc.contentType, tc.body)
			require.Equal(t, tc.wantStatus, status, body)
			require.Contains(t, body, tc.wantBody)
		})
	}
	resp, err := http.Get(s.url + "/test" + sifen.ConsultaPath)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, int64(5), s.stats(t).Count(sifensim.ServiceConsultaDE, "", "", ""))
}

func TestClockEndpoint(t *testing.T) {
	s := start(t, sifensim.Config{})
	status, body := s.post(t, "/sim/clock?advance=10m", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, throttletest.Epoch.Add(10*time.Minute).Format(time.RFC3339Nano))
	require.Equal(t, throttletest.Epoch.Add(10*time.Minute), s.clock.Now())
	status, _ = s.post(t, "/sim/clock?advance=-1m", "", nil)
	require.Equal(t, http.StatusBadRequest, status)

	real, err := sifensim.NewServer(sifensim.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(real)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/sim/clock?advance=1m", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestClose(t *testing.T) {
	s := start(t, sifensim.Config{})
	require.NoError(t, s.Close())
	resp, err := http.Get(s.url + "/sim/stats")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func TestNewServerRejectsBadConfig(t *testing.T) {
	_, err := sifensim.NewServer(sifensim.Config{Env: "homolog"})
	require.ErrorContains(t, err, "environment")
	_, err = sifensim.NewServer(sifensim.Config{Block: -time.Second})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "sifensim:"))
}

func TestOpenServesUntilClose(t *testing.T) {
	s, err := sifensim.NewServer(sifensim.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.Equal(t, "", s.URL())
	require.NoError(t, s.Open("127.0.0.1:0"))
	url := s.URL()
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)

	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: url + "/{env}"})
	require.NoError(t, err)
	resp, err := c.ConsultaDE(context.Background(), sifen.EnvProd, sifentest.Doc{}.CDC())
	require.NoError(t, err)
	require.Equal(t, sifensim.CodeDENotFound, resp.Code)
	require.Equal(t, int64(1), s.Stats().Count(sifensim.ServiceConsultaDE, "prod", "", sifensim.CodeDENotFound))

	require.NoError(t, s.Close())
	_, err = http.Get(url + "/sim/stats")
	require.Error(t, err, "the listener is closed")
	require.NoError(t, s.Close(), "a second Close does nothing")
}

// TestCloseRightAfterOpen: closing before the serving goroutine has run
// stops the server cleanly.
func TestCloseRightAfterOpen(t *testing.T) {
	for range 50 {
		s, err := sifensim.NewServer(sifensim.Config{})
		require.NoError(t, err)
		require.NoError(t, s.Open("127.0.0.1:0"))
		require.NoError(t, s.Close())
	}
}

// TestOpenLoopbackOnly: the simulator answers without authentication, so
// it refuses to listen anywhere but on this machine.
func TestOpenLoopbackOnly(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" = opens
	}{
		{"127.0.0.1:0", ""},
		{"localhost:0", ""},
		{"0.0.0.0:0", "loopback only"},
		{":0", "loopback only"},
		{"192.0.2.1:0", "loopback only"},
		{"127.0.0.1", "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			s, err := sifensim.NewServer(sifensim.Config{})
			require.NoError(t, err)
			defer s.Close()
			err = s.Open(tt.addr)
			if tt.want == "" {
				require.NoError(t, err)
				require.NotEmpty(t, s.URL())
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, s.URL(), "nothing listens")
		})
	}
}

// Issue 22: the lot's SOAP message may be at most 1,000,000 bytes as
// received (DNIT's guide, "Lote no encolado para procesamiento", e: "no
// debe superar 1000 KB"); one byte more is 0301 and blocks the RUC.
func TestRecepcionMessageLimitIsAMillionBytes(t *testing.T) {
	s := start(t, sifensim.Config{})
	// padded is the siRecepLoteDE of doc, with spaces after the envelope
	// to make it exactly size bytes.
	padded := func(doc sifentest.Doc, size int) []byte {
		z, err := sifen.ZipLote(sifentest.Lote(doc))
		require.NoError(t, err)
		b, err := sifen.MarshalSOAP(&sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(z)})
		require.NoError(t, err)
		require.Less(t, len(b), size)
		return append(b, bytes.Repeat([]byte(" "), size-len(b))...)
	}
	read := func(body string) sifen.EnvioLoteResponse {
		r, _, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse]([]byte(body))
		require.NoError(t, err)
		return *r
	}

	status, body := s.post(t, "/test"+sifen.RecepcionPath, sifen.SOAPContentType, padded(sifentest.Doc{Number: 1}, sifensim.MaxMessageBytes+1))
	require.Equal(t, http.StatusOK, status)
	r := read(body)
	require.Equal(t, sifensim.CodeLotNotQueued, r.Code)
	require.Contains(t, r.Message, "el mensaje tiene 1000001 bytes (máximo 1000000); RUC 80069563 bloqueado por 10m0s")

	status, body = s.post(t, "/test"+sifen.RecepcionPath, sifen.SOAPContentType, padded(sifentest.Doc{RUC: "88888801", Number: 2}, sifensim.MaxMessageBytes))
	require.Equal(t, http.StatusOK, status)
	r = read(body)
	require.Equal(t, sifensim.CodeLotQueued, r.Code, r.Message)
}

// Issue 22: a request SIFEN cannot read gets its generic rRetEnviDe, which
// the client reads as SIFEN's refusal with its code, on every service.
func TestMalformedRequestGetsRetEnviDe(t *testing.T) {
	s := start(t, sifensim.Config{})
	for _, path := range []string{sifen.RecepcionPath, sifen.ConsultaLotePath, sifen.ConsultaPath} {
		status, body := s.post(t, "/test"+path, sifen.SOAPContentType, []byte(`<soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope"><soap:Body><rEnvioLote>`))
		require.Equal(t, http.StatusBadRequest, status, path)
		_, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse]([]byte(body))
		require.Nil(t, fault)
		var refused *sifen.RemoteError
		require.ErrorAs(t, err, &refused, path)
		require.Equal(t, "0160", refused.Code)
		require.Equal(t, "XML Mal Formado.", refused.Message)
		require.Equal(t, "Rechazado", refused.State)
	}
	require.Equal(t, int64(3), s.stats(t).Count("", "test", "", "0160"))
}

// Issue 22: siConsDE 0422 carries the DE's protocol: xContenDE holds the
// DE and the dProtAut its lot's result gave it.
func TestConsultaDEFoundCarriesDProtAut(t *testing.T) {
	s := start(t, sifensim.Config{Processing: time.Second,
		Observe: func(_ string, de sifensim.DE) (string, string, bool) {
			return "1005", "Transmisión extemporánea del DE", de.CDC == sifentest.Doc{Number: 2}.CDC()
		}})
	ctx := context.Background()
	docs := sifentest.Docs("80069563", 1, 2)
	resp := s.send(t, sifen.EnvTest, sifentest.Lote(docs...))
	require.Equal(t, sifensim.CodeLotQueued, resp.Code)
	s.clock.Advance(time.Second)
	lot, err := s.client.ConsultaLote(ctx, sifen.EnvTest, resp.LotNumber)
	require.NoError(t, err)
	require.Len(t, lot.Results, 2)
	require.Equal(t, sifensim.ResultApprovedWithObs, lot.Results[1].Status)
	for i, res := range lot.Results {
		de, err := s.client.ConsultaDE(ctx, sifen.EnvTest, docs[i].CDC())
		require.NoError(t, err)
		require.Equal(t, sifensim.CodeDEFound, de.Code)
		require.Contains(t, de.Content, docs[i].CDC())
		require.NotEmpty(t, res.AuthNumber)
		require.Equal(t, res.AuthNumber, de.AuthNumber(), "DE %d", i+1)
	}
}
