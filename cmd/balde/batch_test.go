package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestChooseMode(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	tests := []struct {
		name string
		w    io.Writer
		json bool
		want outputMode
	}{
		{"BufferIsPlain", &bytes.Buffer{}, false, modePlain},
		{"FileIsPlain", f, false, modePlain},
		{"JSONWins", f, true, modeJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, chooseMode(tt.w, tt.json))
		})
	}
}

func TestReporterBar(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeTime(testEpoch)
	m := &Main{Clock: clock.Now, Sleep: clock.sleep}
	bc := m.batchClock()
	r := newReporter(&out, modeBar, 3, "sifen-send", bc)
	r.item(resultSent, "sent a.xml", nil)
	r.waiting(7*time.Second, "cooldown on SIFEN_RECEPCION_LOTE/test/80069563")
	require.NoError(t, bc.Sleep(context.Background(), 7*time.Second))
	r.item(resultFailed, "failed b.xml code=0301", nil)
	r.item(resultSent, "sent c.xml", nil)
	sum := r.finish(false, 0)

	require.Equal(t, summary{Total: 3, Sent: 2, Failed: 1, WaitS: 7, ElapsedS: 7}, sum)
	s := out.String()
	require.Contains(t, s, "(3/3)", "the bar shows the count")
	require.Contains(t, s, "\rfailed b.xml code=0301\n", "a failure is printed above the bar")
	require.NotContains(t, s, "sent a.xml", "a success only moves the bar")
	require.True(t, strings.HasSuffix(s, "\n2 sent, 0 blocked, 0 skipped, 1 failed of 3 in 7s; waited 7s\n"), "%q", s)
}

// What was seen: the bar froze at 0/10 through a two-minute wait with 8
// results written, the waits never appeared, and "waited 12m0s" in a run of
// 2m10s counted the waits planned, not those done.
func TestReporterBarDuringWaits(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeTime(testEpoch)
	m := &Main{Clock: clock.Now, Sleep: clock.sleep}
	bc := m.batchClock()
	r := newReporter(&out, modeBar, 10, "sifen-send", bc)
	for range 8 {
		r.item(resultSent, "sent", nil)
	}
	r.waiting(3*time.Second, "cooldown on SIFEN_RECEPCION_LOTE/test/80069563")
	require.NoError(t, bc.Sleep(context.Background(), 3*time.Second))
	s := out.String()
	require.Contains(t, s, "(8/10)", "the count is drawn before the wait")
	require.Contains(t, s, "\rwaiting 3s: cooldown on SIFEN_RECEPCION_LOTE/test/80069563\n", "the wait is printed above the bar")
	for _, left := range []string{"waiting 3s (", "waiting 2s (", "waiting 1s ("} {
		require.Contains(t, s, left, "the bar counts the wait down")
	}
	require.Equal(t, []time.Duration{time.Second, time.Second, time.Second}, clock.slept())

	// A wait of 12 min interrupted after 1 s counts 1 s.
	stop := &Main{Clock: clock.Now, Sleep: func(context.Context, time.Duration) error {
		clock.Advance(time.Second) // Ctrl-C after 1 s
		return context.Canceled
	}}
	bc2 := stop.batchClock()
	r2 := newReporter(&bytes.Buffer{}, modePlain, 1, "sifen-send", bc2)
	r2.waiting(12*time.Minute, "blocked")
	require.ErrorIs(t, bc2.Sleep(context.Background(), 12*time.Minute), context.Canceled)
	require.Equal(t, 1.0, r2.finish(true, 1).WaitS)
}

func TestSummaryExit(t *testing.T) {
	require.NoError(t, batchExit("x", summary{Total: 2, Sent: 1, Skipped: 1}))
	err := batchExit("x", summary{Total: 5, Sent: 1, Blocked: 2, Failed: 1, NotProcessed: 1, Interrupted: true})
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitFailed, ee.Code)
	require.EqualError(t, err, "x: 4 of 5 not done: 2 blocked, 1 failed, 1 not processed (interrupted)")
}
