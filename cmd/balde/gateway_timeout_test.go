package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen/sifensim"
)

// TestGatewaysAreHardened: both gateways listen on web.NewHTTPServer's
// server (decision 0126): a client that sends its headers a byte at a time
// (a slowloris) is disconnected once the 10 s header bound has passed, and
// headers past 64 KiB are refused (431) without reaching the gateway.
// Before, the gateways ran on a server of their own with net/http's 1 MiB
// header cap: the 100 KiB headers reached the gateway.
func TestGatewaysAreHardened(t *testing.T) {
	dictSim := startDictSim(t, "A", false)
	sifenSim := startSifenSim(t, sifensim.Config{})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dict", []string{"gateway", "dict", "--no-client-auth", "--dict-url", dictSim.URL(), "--dict-participant", "12345678"}},
		{"sifen", []string{"gateway", "sifen", "--no-client-auth", "--sifen-url", sifenSim.URL, "--env", "test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := freeLoopbackAddr(t)
			var stdout, stderr bytes.Buffer
			m := NewMain(nil, &stdout, &stderr, func(string) string { return "" })
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() {
				done <- m.Run(ctx, append(tc.args, "--addr", addr, "--db", "sqlite://"+filepath.Join(t.TempDir(), "balde.db")))
			}()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Error("the gateway did not stop")
				}
			}()
			client := &http.Client{Timeout: 10 * time.Second}
			require.Eventually(t, func() bool {
				resp, err := client.Get("http://" + addr + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 20*time.Second, 50*time.Millisecond, "the gateway never got ready: %s", &stderr)

			req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/livez", nil)
			require.NoError(t, err)
			req.Header.Set("X-Padding", strings.Repeat("a", 100<<10))
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode, "100 KiB of headers")

			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			go func() { // a byte every 200 ms: 60 s for the request line alone
				for _, b := range []byte("GET /livez HTTP/1.1\r\nHost: balde\r\nX-Padding: " + strings.Repeat("a", 300)) {
					if _, err := conn.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}()
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(readHeaderTimeout+10*time.Second)))
			_, err = http.ReadResponse(bufio.NewReader(conn), nil) // a 408, or the connection closed
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the gateway kept the slow client past its bound: %v", err)
			elapsed := time.Since(start)
			require.GreaterOrEqual(t, elapsed, readHeaderTimeout-time.Second, "cut before the bound")
			require.Less(t, elapsed, readHeaderTimeout+5*time.Second, "cut within the bound")
		})
	}
}

// readHeaderTimeout is web.NewHTTPServer's bound on a request's line and
// headers.
const readHeaderTimeout = 10 * time.Second
