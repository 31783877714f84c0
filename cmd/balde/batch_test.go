package main

import (
	"bytes"
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
	r := newReporter(&out, modeBar, 3, "sifen-send", batchClock{Now: clock.Now})
	r.item(resultSent, "sent a.xml", nil)
	r.waiting(7*time.Second, "cooldown on SIFEN_RECEPCION_LOTE/test/80069563")
	clock.Advance(7 * time.Second)
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

func TestSummaryExit(t *testing.T) {
	require.NoError(t, batchExit("x", summary{Total: 2, Sent: 1, Skipped: 1}))
	err := batchExit("x", summary{Total: 5, Sent: 1, Blocked: 2, Failed: 1, NotProcessed: 1, Interrupted: true})
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitFailed, ee.Code)
	require.EqualError(t, err, "x: 4 of 5 not done: 2 blocked, 1 failed, 1 not processed (interrupted)")
}
