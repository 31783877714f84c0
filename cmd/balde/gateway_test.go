package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// freeLoopbackAddr returns a loopback address nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// "balde gateway dict" in front of the simulator: ready, a plain lookup
// goes through and is answered by the DICT, /metrics counts it, and the
// command ends cleanly when its context does.
func TestGatewayDictServesLookupsAndProbes(t *testing.T) {
	sim := startDictSim(t, "A", false)
	addr := freeLoopbackAddr(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	var stdout, stderr bytes.Buffer
	m := NewMain(nil, &stdout, &stderr, func(string) string { return "" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- m.Run(ctx, []string{"gateway", "dict", "--addr", addr, "--db", db, "--dict-url", sim.URL(), "--dict-participant", "12345678"})
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	require.Eventually(t, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "the gateway never got ready: %s", &stderr)

	req, err := http.NewRequest(http.MethodGet, base+"/api/v2/entries/maria.souza@example.com", nil)
	require.NoError(t, err)
	req.Header.Set(dict.HeaderPayerID, "52998224725")
	req.Header.Set(dict.HeaderEndToEndID, fmt.Sprintf("E12345678%s%011d", time.Now().UTC().Format("200601021504"), 1))
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var entry dict.GetEntryResponse
	require.NoError(t, dict.Unmarshal(body, &entry))
	require.Equal(t, "maria.souza@example.com", entry.Entry.Key)

	resp, err = client.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(metrics), "ENTRIES_READ_PARTICIPANT_ANTISCAN")

	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop")
	}
	require.Contains(t, stdout.String(), "DICT gateway on http://"+addr)
}

func TestGatewayUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"NoService", []string{"gateway"}},
		{"UnknownService", []string{"gateway", "ftp"}},
		{"NoDictURL", []string{"gateway", "dict"}},
		{"BadAddr", []string{"gateway", "dict", "--dict-url", "http://127.0.0.1:1", "--addr", "nowhere"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := NewMain(nil, &stdout, &stderr, func(string) string { return "" }).Run(context.Background(), tt.args)
			require.Equal(t, ExitUsage, code, "%s", &stderr)
		})
	}
}

// "balde gateway sifen" in front of the simulator: a lot posted as any
// SOAP client posts it is queued (0300), the same lot again is a fault.
func TestGatewaySifenSendsALot(t *testing.T) {
	sim := startSifenSim(t, sifensim.Config{})
	addr := freeLoopbackAddr(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	var stdout, stderr bytes.Buffer
	m := NewMain(nil, &stdout, &stderr, func(string) string { return "" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- m.Run(ctx, []string{"gateway", "sifen", "--addr", addr, "--db", db, "--sifen-url", sim.URL, "--env", "test"})
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 10 * time.Second}
	require.Eventually(t, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "the gateway never got ready: %s", &stderr)

	z, err := sifen.ZipLote(sifentest.Lote(sifentest.Doc{Number: 7}))
	require.NoError(t, err)
	soap, err := sifen.MarshalSOAP(sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(z)})
	require.NoError(t, err)
	post := func() (int, []byte) {
		resp, err := client.Post(base+sifen.RecepcionPath, sifen.SOAPContentType, bytes.NewReader(soap))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	status, body := post()
	require.Equal(t, http.StatusOK, status, "%s", body)
	answer, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](body)
	require.NoError(t, err)
	require.Nil(t, fault)
	require.Equal(t, sifen.CodeLotQueued, answer.Code)
	status, body = post()
	require.Equal(t, http.StatusConflict, status, "%s", body)

	cancel()
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, "%s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}
