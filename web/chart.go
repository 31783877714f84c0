package web

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// balanceChart is a small server-rendered SVG line chart of a bucket's
// balance: for each ledger entry the balance just before it (Balance -
// Delta) and right after it, so a take is a vertical drop and the refill
// between two entries a rising line; then the current balance. The refill
// is drawn straight (exact for continuous refill below capacity; stepwise
// refill climbs in steps under the line).
type balanceChart struct {
	Empty bool

	Width, Height         int
	Left, Right           int
	Top, Bottom           int
	PlotWidth, PlotHeight int
	LabelX                int
	CapY, ZeroY           string
	Points                string
	Dots                  []chartDot
	CapLabel, MinLabel    string
	FromText, ToText      string
}

type chartDot struct {
	X, Y  string
	Label string
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 720
	chartHeight = 220
	chartLeft   = 56
	chartRight  = 710
	chartTop    = 10
	chartBottom = 190
)

// newBalanceChart draws entries (newest first, as Limiter.Ledger returns
// them) up to the current state.
func newBalanceChart(entries []throttle.LedgerEntry, st throttle.BucketState) balanceChart {
	c := balanceChart{
		Width: chartWidth, Height: chartHeight,
		Left: chartLeft, Right: chartRight, Top: chartTop, Bottom: chartBottom,
		PlotWidth: chartRight - chartLeft, PlotHeight: chartBottom - chartTop,
		LabelX: 4,
	}
	if len(entries) == 0 {
		c.Empty = true
		return c
	}
	// label is "" for the points before an entry: they get no dot.
	type point struct {
		at      time.Time
		balance int64
		label   string
	}
	pts := make([]point, 0, 2*len(entries)+1)
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Delta != 0 {
			pts = append(pts, point{e.At, e.Balance - e.Delta, ""})
		}
		label := fmt.Sprintf("%s: %s %+d → %d", e.At.UTC().Format(TimeLayout), e.Reason, e.Delta, e.Balance)
		if e.Count > 1 {
			label += fmt.Sprintf(" (%d events)", e.Count)
		}
		pts = append(pts, point{e.At, e.Balance, label})
	}
	if st.At.After(pts[len(pts)-1].at) {
		pts = append(pts, point{st.At, st.Tokens, fmt.Sprintf("%s: now %d", st.At.UTC().Format(TimeLayout), st.Tokens)})
	}

	hi, lo := max(st.Policy.Capacity, 1), int64(0)
	for _, p := range pts {
		hi, lo = max(hi, p.balance), min(lo, p.balance)
	}
	t0, t1 := pts[0].at, pts[len(pts)-1].at
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		return chartLeft + float64(t.Sub(t0))/float64(span)*float64(chartRight-chartLeft)
	}
	y := func(v int64) float64 {
		return chartBottom - float64(v-lo)/float64(hi-lo)*float64(chartBottom-chartTop)
	}

	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		px, py := num(x(p.at)), num(y(p.balance))
		b.WriteString(px + "," + py)
		if p.label != "" {
			c.Dots = append(c.Dots, chartDot{X: px, Y: py, Label: p.label})
		}
	}
	c.Points = b.String()
	c.CapY, c.ZeroY = num(y(hi)), num(y(0))
	c.CapLabel = strconv.FormatInt(hi, 10)
	if lo < 0 {
		c.MinLabel = strconv.FormatInt(lo, 10)
	}
	c.FromText, c.ToText = t0.UTC().Format(TimeLayout), t1.UTC().Format(TimeLayout)
	return c
}

// num renders an SVG coordinate with one decimal.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
