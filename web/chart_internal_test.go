package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// What was seen: stepwise refill drawn as a slope, the 0 and -1 labels on
// top of each other, and a chart of the last 100 rows (milliseconds of a
// busy bucket) instead of a time window.
func TestBalanceChartStepsWindowAndLabels(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	p := throttle.Policy{Name: "ENTRIES_READ_USER_ANTISCAN", Capacity: 100, RefillTokens: 2, RefillPeriod: time.Minute, Refill: throttle.RefillStepwise}
	k := throttle.Key{Policy: p.Name, Env: "prod", Identifier: "x"}
	from := now.Add(-time.Hour)
	entries := []throttle.LedgerEntry{
		{Key: k, At: now.Add(-10 * time.Minute), Delta: -101, Balance: -1, Reason: throttle.LedgerPenalty, Count: 1},
		{Key: k, At: now.Add(-5*time.Minute - 30*time.Second), Balance: -1, Reason: throttle.LedgerRefusedEmpty, Count: 3},
	}
	st := throttle.BucketState{Bucket: throttle.Bucket{Key: k, Tokens: 9}, Policy: p, At: now}
	c := newBalanceChart(i18n.New(i18n.English, nil), inspect.FoldLedger(entries, inspect.LedgerWindowQuery{Key: k, From: from, To: now, Slots: chartSlots}), st)

	pts := strings.Fields(c.Points)
	// From 100 down to -1, then +2 at each whole minute: 10 steps of a
	// horizontal and a vertical segment each, ending at 9 tokens... 19.
	require.Greater(t, len(pts), 20, "stepwise refill is drawn as steps: %s", c.Points)
	xs := map[string]int{}
	for _, pt := range pts {
		xs[strings.Split(pt, ",")[0]]++
	}
	vertical := 0
	for _, n := range xs {
		if n >= 2 {
			vertical++
		}
	}
	require.GreaterOrEqual(t, vertical, 10, "each step is vertical: %s", c.Points)

	require.Len(t, c.Refusals, 1)
	require.Contains(t, c.Refusals[0].Label, "3 refused")

	// The x axis spans the window, not the rows.
	require.Equal(t, from.UTC().Format(i18n.TimeLayout), c.FromText)
	require.Equal(t, "11:00 UTC", c.XLabels[0].Text)
	require.Equal(t, "12:00 UTC", c.XLabels[2].Text)

	// No two y labels closer than 12 px: "0" and "-1" of a 100-token
	// scale would overlap, so only one of them is drawn.
	var texts []string
	for i, a := range c.YLabels {
		texts = append(texts, a.Text)
		for _, b := range c.YLabels[i+1:] {
			ya, yb := parse(t, a.Y), parse(t, b.Y)
			require.GreaterOrEqual(t, abs(ya-yb), 12.0, "%s and %s overlap", a.Text, b.Text)
		}
	}
	require.Contains(t, texts, "0")
	require.Contains(t, texts, "100")
}

func parse(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	_, err := fmtSscan(s, &f)
	require.NoError(t, err)
	return f
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

var fmtSscan = func(s string, f *float64) (int, error) { return fmt.Sscan(s, f) }
