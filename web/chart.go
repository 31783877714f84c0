package web

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// chartWindow is a time window of the balance chart.
type chartWindow struct {
	Name  string // "hour", "day", "week": the ?window= value
	Label string // "last hour", ...
	Span  time.Duration
}

// chartWindows are the windows the bucket page offers; the first is the
// default.
var chartWindows = []chartWindow{
	{"hour", "last hour", time.Hour},
	{"day", "last day", 24 * time.Hour},
	{"week", "last week", 7 * 24 * time.Hour},
}

// maxChartRows bounds the ledger rows one chart reads (a week of
// per-minute aggregated takes is 10,080).
const maxChartRows = 20_000

// balanceChart is a server-rendered SVG chart of a bucket's balance over a
// time window (now-Span .. now), built from the ledger rows of the window
// (routine takes aggregated per minute when BALDE_LEDGER says so):
//
//   - each entry is a vertical move from the balance before it (Balance -
//     Delta) to the balance after it;
//   - between entries the refill is drawn as the policy gives it: in steps
//     for stepwise refill (RefillTokens at each whole RefillPeriod), as a
//     slope up to the capacity for continuous refill;
//   - refusals are red marks under the plot, one per pixel column, with
//     how many in its title;
//   - axis labels never overlap (a label closer than 12 px to one already
//     placed is left out).
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
	Refusals              []chartMark
	YLabels               []chartLabel
	XLabels               []chartLabel
	FromText, ToText      string
	Partial               bool
}

type chartDot struct {
	X, Y  string
	Label string
}

type chartMark struct {
	X, Y, W, H string
	Label      string
}

type chartLabel struct {
	X, Y   string
	Text   string
	Anchor string // "start", "middle", "end"
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 720
	chartHeight = 236
	chartLeft   = 56
	chartRight  = 710
	chartTop    = 10
	chartBottom = 190
	markHeight  = 8
	maxDots     = 300 // entries drawn with a hover dot
)

type chartPoint struct {
	at      time.Time
	balance int64
}

// newBalanceChart draws entries (oldest first, all within from..st.At)
// under st's policy, ending at st (now).
func newBalanceChart(entries []throttle.LedgerEntry, st throttle.BucketState, from time.Time) balanceChart {
	c := balanceChart{
		Width: chartWidth, Height: chartHeight,
		Left: chartLeft, Right: chartRight, Top: chartTop, Bottom: chartBottom,
		PlotWidth: chartRight - chartLeft, PlotHeight: chartBottom - chartTop,
		LabelX: chartLeft - 6,
	}
	to := st.At
	if len(entries) == 0 || !to.After(from) {
		c.Empty = true
		return c
	}
	p := st.Policy
	var pts []chartPoint
	var refusals []throttle.LedgerEntry
	var dotted []throttle.LedgerEntry
	for _, e := range entries {
		if slices.Contains(throttle.RefusalReasons, e.Reason) {
			refusals = append(refusals, e)
			continue
		}
		before := e.Balance - e.Delta
		if len(pts) == 0 {
			pts = append(pts, chartPoint{e.At, before})
		} else {
			pts = refill(pts, p, e.At, before)
		}
		pts = append(pts, chartPoint{e.At, e.Balance})
		dotted = append(dotted, e)
	}
	if len(pts) == 0 {
		// Only refusals in the window: the balance line is the state now.
		pts = append(pts, chartPoint{refusals[0].At, refusals[0].Balance})
	}
	pts = refill(pts, p, to, st.Tokens)
	pts = append(pts, chartPoint{to, st.Tokens})

	hi, lo := max(p.Capacity, 1), int64(0)
	for _, q := range pts {
		hi, lo = max(hi, q.balance), min(lo, q.balance)
	}
	span := to.Sub(from)
	x := func(t time.Time) float64 {
		return chartLeft + float64(t.Sub(from))/float64(span)*float64(chartRight-chartLeft)
	}
	y := func(v int64) float64 {
		return chartBottom - float64(v-lo)/float64(hi-lo)*float64(chartBottom-chartTop)
	}

	var b strings.Builder
	lastX, lastY := "", ""
	for _, q := range thin(pts, x) {
		px, py := num(x(q.at)), num(y(q.balance))
		if px == lastX && py == lastY {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(px + "," + py)
		lastX, lastY = px, py
	}
	c.Points = b.String()
	if len(dotted) > maxDots {
		dotted = dotted[len(dotted)-maxDots:]
	}
	for _, e := range dotted {
		label := fmt.Sprintf("%s: %s %+d → %d", e.At.UTC().Format(TimeLayout), e.Reason, e.Delta, e.Balance)
		if e.Count > 1 {
			label += fmt.Sprintf(" (%d events)", e.Count)
		}
		c.Dots = append(c.Dots, chartDot{X: num(x(e.At)), Y: num(y(e.Balance)), Label: label})
	}

	// Refusals: one mark per pixel column under the plot.
	type col struct {
		n     int64
		first time.Time
	}
	cols := map[int]*col{}
	var order []int
	for _, e := range refusals {
		k := int(math.Round(x(e.At)))
		if cols[k] == nil {
			cols[k] = &col{first: e.At}
			order = append(order, k)
		}
		cols[k].n += max(e.Count, 1)
	}
	for _, k := range order {
		cl := cols[k]
		c.Refusals = append(c.Refusals, chartMark{
			X: num(float64(k) - 1.5), Y: num(chartBottom + 2), W: "3", H: strconv.Itoa(markHeight),
			Label: fmt.Sprintf("%s: %d refused", cl.first.UTC().Format(TimeLayout), cl.n),
		})
	}

	c.CapY, c.ZeroY = num(y(hi)), num(y(0))
	placed := []float64{}
	addY := func(v int64) {
		py := y(v)
		for _, q := range placed {
			if math.Abs(q-py) < 12 {
				return
			}
		}
		placed = append(placed, py)
		c.YLabels = append(c.YLabels, chartLabel{X: strconv.Itoa(c.LabelX), Y: num(py + 4), Text: strconv.FormatInt(v, 10), Anchor: "end"})
	}
	addY(0)
	addY(hi)
	if lo < 0 {
		addY(lo)
	}
	if mid := hi / 2; hi >= 4 {
		addY(mid)
	}

	layout := "15:04"
	if span > 36*time.Hour {
		layout = "Jan 2 15:04"
	}
	labelY := strconv.Itoa(chartBottom + markHeight + 18)
	c.XLabels = []chartLabel{
		{X: strconv.Itoa(chartLeft), Y: labelY, Text: from.UTC().Format(layout) + " UTC", Anchor: "start"},
		{X: num(float64(chartLeft+chartRight) / 2), Y: labelY, Text: from.Add(span / 2).UTC().Format(layout), Anchor: "middle"},
		{X: strconv.Itoa(chartRight), Y: labelY, Text: to.UTC().Format(layout) + " UTC", Anchor: "end"},
	}
	c.FromText, c.ToText = from.UTC().Format(TimeLayout), to.UTC().Format(TimeLayout)
	return c
}

// maxStepsPerGap bounds the steps drawn between two entries; past it the
// refill is drawn as a slope.
const maxStepsPerGap = 500

// refill appends the points of the refill from the last point of pts up
// to at, where the balance is next known to be target: in steps for
// stepwise refill, a slope up to the capacity otherwise.
func refill(pts []chartPoint, p throttle.Policy, at time.Time, target int64) []chartPoint {
	last := pts[len(pts)-1]
	if !at.After(last.at) || p.RefillPeriod <= 0 || p.RefillTokens <= 0 {
		return append(pts, chartPoint{at, target})
	}
	switch p.Refill {
	case throttle.RefillStepwise:
		bal := last.balance
		steps := int64(at.Sub(last.at) / p.RefillPeriod)
		if steps <= maxStepsPerGap {
			for k := int64(1); k <= steps && bal < p.Capacity; k++ {
				t := last.at.Add(time.Duration(k) * p.RefillPeriod)
				pts = append(pts, chartPoint{t, bal})
				bal = min(bal+p.RefillTokens, p.Capacity)
				pts = append(pts, chartPoint{t, bal})
			}
			return append(pts, chartPoint{at, bal})
		}
	case throttle.RefillContinuous:
		if last.balance < p.Capacity {
			full := last.at.Add(time.Duration(float64(p.Capacity-last.balance) / float64(p.RefillTokens) * float64(p.RefillPeriod)))
			if full.Before(at) {
				pts = append(pts, chartPoint{full, p.Capacity})
			}
		}
	}
	return append(pts, chartPoint{at, target})
}

// thin keeps a long series drawable: past 2000 points it keeps, per pixel
// column, the first, lowest, highest and last point, in time order.
func thin(pts []chartPoint, x func(time.Time) float64) []chartPoint {
	if len(pts) <= 2000 {
		return pts
	}
	var out []chartPoint
	for i := 0; i < len(pts); {
		k := int(x(pts[i].at))
		j := i
		lo, hi := i, i
		for j < len(pts) && int(x(pts[j].at)) == k {
			if pts[j].balance < pts[lo].balance {
				lo = j
			}
			if pts[j].balance > pts[hi].balance {
				hi = j
			}
			j++
		}
		keep := []int{i, lo, hi, j - 1}
		slices.Sort(keep)
		for _, idx := range slices.Compact(keep) {
			out = append(out, pts[idx])
		}
		i = j
	}
	return out
}

// num renders an SVG coordinate with one decimal.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
