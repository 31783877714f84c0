package report_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/throttle"
)

// fakeClock is a clock whose sleeps only advance it, recording each.
type fakeClock struct {
	*throttle.ManualClock
	mu     sync.Mutex
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{ManualClock: throttle.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))}
}

func (f *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.mu.Unlock()
	f.Advance(d)
	return nil
}

func (f *fakeClock) slept() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

func TestChooseMode(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	tests := []struct {
		name string
		w    io.Writer
		json bool
		want report.Mode
	}{
		{"BufferIsPlain", &bytes.Buffer{}, false, report.Plain},
		{"FileIsPlain", f, false, report.Plain},
		{"JSONWins", f, true, report.JSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, report.ChooseMode(tt.w, tt.json))
		})
	}
}

func TestReporterBar(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeClock()
	bc := report.NewClock(clock.Now, clock.sleep)
	r := report.New(&out, report.Bar, 3, "sifen-send", bc, nil)
	r.Item(report.Sent, "sent a.xml", nil)
	r.Waiting(7*time.Second, "cooldown on SIFEN_RECEPCION_LOTE/test/80069563")
	require.NoError(t, bc.Sleep(context.Background(), 7*time.Second))
	r.Item(report.Failed, "failed b.xml code=0301", nil)
	r.Item(report.Sent, "sent c.xml", nil)
	sum := r.Finish(false, 0)

	require.Equal(t, report.Summary{Total: 3, Sent: 2, Failed: 1, WaitS: 7, ElapsedS: 7}, sum)
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
	clock := newFakeClock()
	bc := report.NewClock(clock.Now, clock.sleep)
	r := report.New(&out, report.Bar, 10, "sifen-send", bc, nil)
	for range 8 {
		r.Item(report.Sent, "sent", nil)
	}
	r.Waiting(3*time.Second, "cooldown on SIFEN_RECEPCION_LOTE/test/80069563")
	require.NoError(t, bc.Sleep(context.Background(), 3*time.Second))
	s := out.String()
	require.Contains(t, s, "(8/10)", "the count is drawn before the wait")
	require.Contains(t, s, "\rwaiting 3s: cooldown on SIFEN_RECEPCION_LOTE/test/80069563\n", "the wait is printed above the bar")
	for _, left := range []string{"waiting 3s (", "waiting 2s (", "waiting 1s ("} {
		require.Contains(t, s, left, "the bar counts the wait down")
	}
	require.Equal(t, []time.Duration{time.Second, time.Second, time.Second}, clock.slept())

	// A wait of 12 min interrupted after 1 s counts 1 s.
	bc2 := report.NewClock(clock.Now, func(context.Context, time.Duration) error {
		clock.Advance(time.Second) // Ctrl-C after 1 s
		return context.Canceled
	})
	r2 := report.New(&bytes.Buffer{}, report.Plain, 1, "sifen-send", bc2, nil)
	r2.Waiting(12*time.Minute, "blocked")
	require.ErrorIs(t, bc2.Sleep(context.Background(), 12*time.Minute), context.Canceled)
	require.Equal(t, 1.0, r2.Finish(true, 1).WaitS)
}

func TestSummaryErr(t *testing.T) {
	tr := i18n.New(i18n.English, nil)
	require.NoError(t, report.Summary{Total: 2, Sent: 1, Skipped: 1}.Err("x", tr), "skipped is done")
	err := report.Summary{Total: 6, Sent: 1, Blocked: 2, Failed: 1, Invalid: 1, NotProcessed: 1, Interrupted: true}.Err("x", tr)
	require.EqualError(t, err, "x: 5 of 6 not done: 2 blocked, 1 failed, 1 invalid, 1 not processed (interrupted)")
}
