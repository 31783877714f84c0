package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
)

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--entries", "../../dict/testdata/entries.csv", "--category", "H", "--fake-clock"}, w, io.Discard)
		w.Close()
	}()
	var line string
	var err error
	waitfor.Do(t, 10*time.Second, func() { line, err = bufio.NewReader(out).ReadString('\n') }, "dictsim printing its address")
	require.NoError(t, err)
	require.Contains(t, line, "(category H, fake clock true)")
	url := strings.Fields(line)[3]
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), line)

	resp, err := http.Post(url+"/sim/clock?advance=8m", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, waitfor.Recv(t, done, 10*time.Second, "dictsim stopping once canceled"))
}

func TestRunUsage(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--help"}, io.Discard, &stderr)
	require.Error(t, err)
	require.Contains(t, stderr.String(), "Example:")
	require.Error(t, run(context.Background(), []string{"extra"}, io.Discard, io.Discard))
	require.ErrorContains(t, run(context.Background(), []string{"--category", "A B"}, io.Discard, io.Discard), "is not A..H")
	require.ErrorContains(t, run(context.Background(), []string{"--addr", "0.0.0.0:8181"}, io.Discard, io.Discard), "loopback only")
}
