package web_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/web"
)

// TestReadHeaderTimeout: a client that sends its request headers a byte at
// a time (a slowloris, holding a connection and a goroutine for as long as
// it likes) is disconnected once the server's ReadHeaderTimeout has
// passed, while a client that sends them at once is answered. serve uses
// NewServer's default, DefaultReadHeaderTimeout.
func TestReadHeaderTimeout(t *testing.T) {
	require.Equal(t, 10*time.Second, web.NewServer().ReadHeaderTimeout, "serve's bound")
	const timeout = 300 * time.Millisecond
	e := newEnv(t, withServer(func(s *web.Server) { s.ReadHeaderTimeout = timeout }))
	addr := strings.TrimPrefix(e.server.URL(), "http://")
	request := "GET /livez HTTP/1.1\r\nHost: balde\r\nX-Padding: " + strings.Repeat("a", 200) + "\r\n\r\n"

	for _, tc := range []struct {
		name       string
		gap        time.Duration // between two bytes of the request
		wantClosed bool
	}{
		{name: "PromptClientAnswered", gap: 0},
		{name: "SlowlorisDisconnected", gap: 20 * time.Millisecond, wantClosed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			stopped := make(chan time.Duration, 1) // when the writer could write no more
			go func() {
				defer close(stopped)
				if tc.gap == 0 {
					_, _ = conn.Write([]byte(request))
					return
				}
				// 200+ bytes at 20 ms: about 5 s, far beyond the bound.
				for i := range len(request) {
					if _, err := conn.Write([]byte{request[i]}); err != nil {
						stopped <- time.Since(start)
						return
					}
					time.Sleep(tc.gap)
				}
			}()
			// Every read has a deadline: the test never waits unbounded.
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(timeout+5*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			elapsed := time.Since(start)
			if !tc.wantClosed {
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
				return
			}
			if err == nil { // net/http says 400 before closing; 408 would do too
				resp.Body.Close()
				require.Contains(t, []int{http.StatusBadRequest, http.StatusRequestTimeout}, resp.StatusCode)
				require.True(t, resp.Close, "the server says it closes the connection")
			} else {
				var ne net.Error
				require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection past %s: %v", timeout+5*time.Second, err)
			}
			require.GreaterOrEqual(t, elapsed, timeout-50*time.Millisecond, "closed before the bound")
			require.Less(t, elapsed, timeout+2*time.Second, "closed within the bound (with a margin for a loaded machine)")
			t.Logf("slowloris disconnected after %s (ReadHeaderTimeout %s)", elapsed.Round(time.Millisecond), timeout)
			select { // the writer notices, within a deadline
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("the slow writer was still writing 10 s after the server closed")
			}
		})
	}
}
