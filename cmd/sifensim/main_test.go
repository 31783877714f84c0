package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
)

// startRun runs the command in the background and returns its base URL and
// a function that stops it and returns run's error.
func startRun(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	var line string
	var err error
	waitfor.Do(t, 10*time.Second, func() { line, err = bufio.NewReader(pr).ReadString('\n') }, "sifensim printing its address")
	require.NoError(t, err)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	require.True(t, ok, line)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return url, func() error {
		cancel()
		return waitfor.Recv(t, done, 10*time.Second, "sifensim stopping once canceled")
	}
}

func TestRunServesAndStops(t *testing.T) {
	url, stop := startRun(t, "--addr", "127.0.0.1:0", "--fake-clock", "--interval", "30s")
	resp, err := http.Get(url + "/sim/stats")
	require.NoError(t, err)
	var stats map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&stats))
	resp.Body.Close()
	require.Equal(t, float64(0), stats["total"])

	resp, err = http.Post(url+"/sim/clock?advance=10m", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, stop())
}

func TestRunRealClockHasNoClockEndpoint(t *testing.T) {
	url, stop := startRun(t, "--addr", "127.0.0.1:0")
	resp, err := http.Post(url+"/sim/clock?advance=10m", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.NoError(t, stop())
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--addr", "0.0.0.0:8282"},
		{"--addr", "nohost"},
		{"--block", "-1s"},
		{"--nope"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		require.Error(t, err, "%v", args)
	}
}
