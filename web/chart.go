package web

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// chartWindow is a time window of the balance chart.
type chartWindow struct {
	Name  string // "hour", "day", "week": the ?window= value
	Label string // "last hour", ...
	Span  time.Duration
}

// chartWindows are the windows the bucket page offers, shortest first.
var chartWindows = []chartWindow{
	{"5m", "last 5 minutes", 5 * time.Minute},
	{"15m", "last 15 minutes", 15 * time.Minute},
	{"hour", "last hour", time.Hour},
	{"day", "last day", 24 * time.Hour},
	{"week", "last week", 7 * 24 * time.Hour},
}

var defaultChartWindow = chartWindows[2]

// chartSlots is how many time slots the store folds a chart's window into
// (10 s each for the hour), about 1.8 px each on the plot.
const chartSlots = 360

// balanceChart is a server-rendered SVG chart of a bucket's balance over a
// time window, from the ledger folded into chartSlots slots by the store:
// each slot a vertical move from Open through Low and High to Close, the
// refill between slots drawn as the policy gives it (steps or a slope),
// refusals as red marks under the plot, one per pixel column; axis labels
// never overlap.
type balanceChart struct {
	Empty bool

	Width, Height         int
	Left, Right           int
	Top                   int
	PlotWidth, PlotHeight int
	LabelX                int
	CapY, ZeroY           string
	Points                string
	Dots                  []chartDot
	Refusals              []chartMark
	YLabels               []chartLabel
	XLabels               []chartLabel
	FromText, ToText      string
	Partial               bool // the store read only the newest MaxRows rows of the window
	MaxRows               int
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
	maxDots     = 300 // slots drawn with a hover dot
)

type chartPoint struct {
	at      time.Time
	balance int64
}

// newBalanceChart draws w (a window ending at st.At, now) under st's
// policy, ending at st.
func newBalanceChart(tr *i18n.Printer, w inspect.LedgerWindow, st throttle.BucketState) balanceChart {
	c := balanceChart{
		Width: chartWidth, Height: chartHeight,
		Left: chartLeft, Right: chartRight, Top: chartTop,
		PlotWidth: chartRight - chartLeft, PlotHeight: chartBottom - chartTop,
		LabelX: chartLeft - 6, Partial: w.Partial, MaxRows: inspect.MaxWindowRows,
	}
	from, to := w.Query.From, st.At
	if len(w.Slots) == 0 || !to.After(from) {
		c.Empty = true
		return c
	}
	p := st.Policy
	var pts []chartPoint
	var changed, refused []inspect.LedgerSlot
	for _, sl := range w.Slots {
		if sl.Refused > 0 {
			refused = append(refused, sl)
		}
		if sl.Changes == 0 {
			continue
		}
		if len(pts) == 0 {
			pts = append(pts, chartPoint{sl.First, sl.Open})
		} else {
			pts = refill(pts, p, sl.First, sl.Open)
		}
		// An aggregated row carries the minute it began: its time may be
		// before the slot's earlier change.
		last := maxTime(sl.First, sl.Last)
		if sl.Changes > 1 {
			mid := sl.First.Add(last.Sub(sl.First) / 2)
			pts = append(pts, chartPoint{mid, sl.Max}, chartPoint{mid, sl.Min})
		}
		pts = append(pts, chartPoint{last, sl.Close})
		changed = append(changed, sl)
	}
	if len(pts) == 0 {
		// Only refusals in the window: the balance line is the state now.
		pts = append(pts, chartPoint{refused[0].FirstRefused, st.Tokens})
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
	for _, sl := range changed[max(0, len(changed)-maxDots):] {
		c.Dots = append(c.Dots, chartDot{X: num(x(maxTime(sl.First, sl.Last))), Y: num(y(sl.Close)), Label: slotLabel(tr, sl)})
	}

	// Refusals: one mark per pixel column under the plot; the slots are
	// oldest first, so a column's slots are adjacent.
	type col struct {
		k     int
		n     int64
		first time.Time
	}
	var cols []col
	for _, sl := range refused {
		if k := int(math.Round(x(sl.FirstRefused))); len(cols) == 0 || cols[len(cols)-1].k != k {
			cols = append(cols, col{k: k, first: sl.FirstRefused})
		}
		cols[len(cols)-1].n += sl.Refused
	}
	for _, cl := range cols {
		c.Refusals = append(c.Refusals, chartMark{
			X: num(float64(cl.k) - 1.5), Y: num(chartBottom + 2), W: "3", H: strconv.Itoa(markHeight),
			Label: tr.Zoned(cl.first) + ": " + tr.Sprintf("%d refused", cl.n),
		})
	}

	c.CapY, c.ZeroY = num(y(hi)), num(y(0))
	placed := []float64{}
	addY := func(v int64) {
		py := y(v)
		if slices.ContainsFunc(placed, func(q float64) bool { return math.Abs(q-py) < 12 }) {
			return
		}
		placed = append(placed, py)
		c.YLabels = append(c.YLabels, chartLabel{X: strconv.Itoa(c.LabelX), Y: num(py + 4), Text: strconv.FormatInt(v, 10), Anchor: "end"})
	}
	addY(0)
	addY(hi)
	if lo < 0 {
		addY(lo)
	}
	if hi >= 4 {
		addY(hi / 2)
	}

	// The axis is in the reader's zone (i18n.Printer.Zoned), its ends
	// name it; a window of minutes shows seconds.
	zone := tr.Location()
	layout := "15:04"
	if span <= 15*time.Minute {
		layout = "15:04:05"
	}
	if span > 36*time.Hour {
		layout = "Jan 2 15:04"
	}
	labelY := strconv.Itoa(chartBottom + markHeight + 18)
	c.XLabels = []chartLabel{
		{X: strconv.Itoa(chartLeft), Y: labelY, Text: from.In(zone).Format(layout + " MST"), Anchor: "start"},
		{X: num(float64(chartLeft+chartRight) / 2), Y: labelY, Text: from.Add(span / 2).In(zone).Format(layout), Anchor: "middle"},
		{X: strconv.Itoa(chartRight), Y: labelY, Text: to.In(zone).Format(layout + " MST"), Anchor: "end"},
	}
	c.FromText, c.ToText = tr.Zoned(from), tr.Zoned(to)
	return c
}

// slotLabel is the hover text of a slot's dot, in tr's language and zone:
// the change itself when the slot holds one, else its range.
func slotLabel(tr *i18n.Printer, sl inspect.LedgerSlot) string {
	if sl.Changes == 1 {
		label := fmt.Sprintf("%s: %s %+d → %d", tr.Zoned(sl.Last), tr.Text(sl.LastReason.String()), sl.Close-sl.Open, sl.Close)
		if sl.Events > 1 {
			label += " " + tr.Sprintf("(%d events)", sl.Events)
		}
		return label
	}
	return tr.Sprintf("%s to %s: %d events, %d → %d (lowest %d, highest %d)",
		tr.Zoned(sl.First), tr.Zoned(maxTime(sl.First, sl.Last)), sl.Events, sl.Open, sl.Close, sl.Min, sl.Max)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
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
		j, lo, hi := i, i, i
		for ; j < len(pts) && int(x(pts[j].at)) == k; j++ {
			if pts[j].balance < pts[lo].balance {
				lo = j
			}
			if pts[j].balance > pts[hi].balance {
				hi = j
			}
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
