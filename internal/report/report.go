// Package report draws what balde's batch commands do: one line per item,
// a progress bar on a terminal, or JSON lines; the throttle's waits,
// counted down; and the summary by result. The batches themselves run in
// sifen and dict. A Reporter is not safe for concurrent use.
package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// Clock is how a batch reads time (Now, the engine's; nil: the system's)
// and waits: Sleep waits d or until ctx ends, through the Reporter made
// with this clock, which counts it down and sums it.
type Clock struct {
	Now   throttle.Clock
	Sleep throttle.Sleep

	hook *waitHook // shared by the copies of one Clock
}

// waitHook routes a Clock's sleeps through the Reporter made with it.
type waitHook struct {
	sleep throttle.Sleep // the underlying wait
	rep   *Reporter
}

// NewClock returns a Clock over now and sleep (nil: a real wait).
func NewClock(now throttle.Clock, sleep throttle.Sleep) Clock {
	if sleep == nil {
		sleep = throttle.SleepContext
	}
	h := &waitHook{sleep: sleep}
	return Clock{Now: now, hook: h, Sleep: func(ctx context.Context, d time.Duration) error {
		if h.rep != nil {
			return h.rep.sleep(ctx, d, h.sleep)
		}
		return h.sleep(ctx, d)
	}}
}

// BaseSleep is the sleep under c, which no Reporter sees, for waits side
// by side (dict.Batch); add them with Reporter.AddWait.
func (c Clock) BaseSleep() throttle.Sleep {
	if c.hook == nil {
		return c.Sleep
	}
	return c.hook.sleep
}

// Time reads c.Now, or the system clock.
func (c Clock) Time() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Result is how one item of a batch ended.
type Result string

const (
	Sent    Result = "sent"    // sent, and answered
	Blocked Result = "blocked" // not sent: the throttle refused it (or it is in flight elsewhere)
	Skipped Result = "skipped" // nothing to do: already sent
	Failed  Result = "failed"  // sent or tried, without success
	Invalid Result = "invalid" // bad input: nothing was sent
	// Interrupted: stopped while it waited for the throttle, nothing sent;
	// counted in Summary.NotProcessed, never as blocked.
	Interrupted Result = "interrupted"
)

// Summary is the end of a batch, printed as a line or as one JSON object
// {"summary": {...}}.
type Summary struct {
	Total   int `json:"total"`
	Sent    int `json:"sent"`
	Blocked int `json:"blocked"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	Invalid int `json:"invalid"`
	// NotProcessed counts the items an interruption left untouched.
	NotProcessed int `json:"not_processed"`
	// WaitS is the time actually waited for the throttle, ElapsedS the
	// run's, in seconds.
	WaitS       float64 `json:"wait_s"`
	ElapsedS    float64 `json:"elapsed_s"`
	Interrupted bool    `json:"interrupted"`
}

// Undone counts the items blocked, failed, invalid or not processed.
func (s Summary) Undone() int { return s.Blocked + s.Failed + s.Invalid + s.NotProcessed }

// Done counts the items reported so far.
func (s Summary) Done() int { return s.Sent + s.Blocked + s.Skipped + s.Failed + s.Invalid }

// String renders the summary line in English.
func (s Summary) String() string { return s.Text(i18n.New(i18n.English, nil)) }

// Text renders the summary line in tr's language:
// "12 sent, 1 blocked, 3 skipped, 0 failed of 16 in 31s; waited 30s".
func (s Summary) Text(tr *i18n.Printer) string {
	line := tr.Sprintf("%d sent, %d blocked, %d skipped, %d failed", s.Sent, s.Blocked, s.Skipped, s.Failed)
	if s.Invalid > 0 {
		line += tr.Sprintf(", %d invalid", s.Invalid)
	}
	line += tr.Sprintf(" of %d in %s; waited %s", s.Total, FormatSeconds(s.ElapsedS), FormatSeconds(s.WaitS))
	if s.Interrupted {
		line += tr.Sprintf("; interrupted, %d not processed", s.NotProcessed)
	}
	return line
}

// Err is nil when Undone is 0, else "WHAT: 4 of 5 not done: 2 blocked, 1
// failed, 1 not processed (interrupted)" in tr's language.
func (s Summary) Err(what string, tr *i18n.Printer) error {
	if s.Undone() == 0 {
		return nil
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{s.Blocked, "%d blocked"}, {s.Failed, "%d failed"}, {s.Invalid, "%d invalid"}, {s.NotProcessed, "%d not processed (interrupted)"}} {
		if p.n > 0 {
			parts = append(parts, tr.Sprintf(p.what, p.n))
		}
	}
	return errors.New(tr.Sprintf("%s: %d of %d not done: %s", what, s.Undone(), s.Total, strings.Join(parts, ", ")))
}

// FormatSeconds renders seconds as a Go duration rounded for people.
func FormatSeconds(s float64) string {
	return view.FormatWait(time.Duration(s * float64(time.Second)))
}

// Mode is how a Reporter writes.
type Mode int

const (
	Plain Mode = iota // one log line per item (output is not a terminal: CI, cron, a pipe)
	Bar               // a progress bar with counts and ETA; notable items as lines above it
	JSON              // one JSON object per line per item, then the summary object
)

// ChooseMode picks JSON when asked, else Bar on a terminal, else Plain.
func ChooseMode(w io.Writer, jsonOut bool) Mode {
	switch {
	case jsonOut:
		return JSON
	case IsTerminal(w):
		return Bar
	}
	return Plain
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Reporter writes a batch's items, waits and summary.
type Reporter struct {
	// Tr is the language of the lines people read (never of JSON).
	Tr *i18n.Printer
	// Progress, when set, receives {"progress": ProgressEvent} as a wait
	// starts and every ProgressTick during it.
	Progress io.Writer

	w     io.Writer
	mode  Mode
	bar   *progressbar.ProgressBar
	clock Clock
	start time.Time
	sum   Summary
	why   string        // the reason of the wait announced last
	waitd time.Duration // time actually waited, summed
}

// barTick is how often the bar is redrawn during a wait.
const barTick = time.Second

// ProgressTick is how often a wait is reported on Reporter.Progress.
const ProgressTick = 10 * time.Second

// ProgressEvent is a line of Reporter.Progress.
type ProgressEvent struct {
	Event string  `json:"event"` // "waiting"
	Why   string  `json:"why"`
	WaitS float64 `json:"wait_s"`
	LeftS float64 `json:"left_s"`
	Done  int     `json:"done"`
	Total int     `json:"total"`
}

// New returns a Reporter of total items writing to w in mode, in tr's
// language (nil: English); what names the bar. clock's waits go through it.
func New(w io.Writer, mode Mode, total int, what string, clock Clock, tr *i18n.Printer) *Reporter {
	tr = cmp.Or(tr, i18n.New(i18n.English, nil))
	r := &Reporter{Tr: tr, w: w, mode: mode, clock: clock, start: clock.Time(), sum: Summary{Total: total}}
	if clock.hook != nil {
		clock.hook.rep = r
	}
	if mode == Bar {
		r.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return r
}

// AddWait adds d, waited with Clock.BaseSleep, to the time waited.
func (r *Reporter) AddWait(d time.Duration) {
	r.waitd += d
	r.sum.WaitS = view.Seconds(r.waitd)
}

// Item counts one item's result and writes line (Plain; Bar unless sent
// or skipped) or obj (JSON).
func (r *Reporter) Item(res Result, line string, obj any) {
	s := &r.sum
	counts := map[Result]*int{Sent: &s.Sent, Blocked: &s.Blocked, Skipped: &s.Skipped, Failed: &s.Failed, Invalid: &s.Invalid, Interrupted: &s.NotProcessed}
	if n := counts[res]; n != nil {
		*n++
	}
	switch r.mode {
	case Plain:
		fmt.Fprintln(r.w, line)
	case JSON:
		WriteJSONLine(r.w, obj)
	case Bar:
		if res != Sent && res != Skipped {
			r.above(line)
		}
		r.bar.Describe(r.counts())
		// Not throttled: a skipped draw leaves the count stale.
		_ = r.bar.Add(1)
	}
}

// Waiting announces a wait of d about to start, as a Note and a progress
// line.
func (r *Reporter) Waiting(d time.Duration, why string) {
	r.why = why
	if r.Progress != nil {
		r.tellProgress(d, d)
	}
	r.Note(r.Tr.Sprintf("waiting %s: %s", view.FormatWait(d), why))
}

// tellProgress writes a wait of d with left to go on r.Progress.
func (r *Reporter) tellProgress(d, left time.Duration) {
	WriteJSONLine(r.Progress, map[string]ProgressEvent{"progress": {Event: "waiting", Why: r.why, WaitS: view.Seconds(d), LeftS: view.Seconds(left),
		Done: r.sum.Done(), Total: r.sum.Total}})
}

// sleep waits d with base, redrawing the bar or writing progress lines
// with the time left, and adds the time actually waited to the summary.
func (r *Reporter) sleep(ctx context.Context, d time.Duration, base throttle.Sleep) error {
	start := r.clock.Time()
	defer func() {
		r.AddWait(max(r.clock.Time().Sub(start), 0))
		if r.mode == Bar {
			r.bar.Describe(r.counts())
			_ = r.bar.RenderBlank()
		}
	}()
	if r.mode != Bar && r.Progress == nil {
		return base(ctx, d)
	}
	tick := barTick
	if r.mode != Bar {
		tick = ProgressTick
	}
	for left := d; left > 0; {
		if r.mode == Bar {
			r.bar.Describe(r.Tr.Sprintf("waiting %s (%s) · %s", view.FormatWait(left), r.why, r.counts()))
			_ = r.bar.RenderBlank()
		} else if left < d {
			r.tellProgress(d, left)
		}
		if err := base(ctx, min(left, tick)); err != nil {
			return err
		}
		left = d - r.clock.Time().Sub(start)
	}
	return nil
}

// Note writes a line that is not an item, except in JSON mode.
func (r *Reporter) Note(line string) {
	switch r.mode {
	case Plain:
		fmt.Fprintln(r.w, line)
	case Bar:
		r.above(line)
	}
}

// above prints line above the progress bar.
func (r *Reporter) above(line string) {
	_ = r.bar.Clear()
	fmt.Fprintln(r.w, line)
	_ = r.bar.RenderBlank()
}

func (r *Reporter) counts() string {
	return r.Tr.Sprintf("sent %d, blocked %d, skipped %d, failed %d", r.sum.Sent, r.sum.Blocked, r.sum.Skipped, r.sum.Failed)
}

// Finish writes the summary and returns it, with notProcessed more items
// not processed.
func (r *Reporter) Finish(interrupted bool, notProcessed int) Summary {
	r.sum.Interrupted = interrupted
	r.sum.NotProcessed += notProcessed
	r.sum.ElapsedS = view.Seconds(r.clock.Time().Sub(r.start))
	switch r.mode {
	case JSON:
		WriteJSONLine(r.w, struct {
			Summary Summary `json:"summary"`
		}{r.sum})
		return r.sum
	case Bar:
		if !r.bar.IsFinished() {
			_ = r.bar.Exit()
			fmt.Fprintln(r.w)
		}
	}
	fmt.Fprintln(r.w, r.sum.Text(r.Tr))
	return r.sum
}

// WriteJSONLine writes v as one line of JSON, or its error quoted.
func WriteJSONLine(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(strconv.Quote(err.Error()))
	}
	b = append(b, '\n')
	_, _ = w.Write(b)
}
