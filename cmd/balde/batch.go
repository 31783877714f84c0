package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
	"github.com/balde-throttle/balde/web/i18n"
)

// What the batch commands (sifen-send, dict-lookup) share: how they read
// time and wait, the --wait/--no-wait/--max-wait flags, and how they
// report items (a progress bar on a terminal, plain lines otherwise, JSON
// lines with --json) and the summary.

// batchClock is how a batch command reads time and waits: Main.Clock and
// Main.Sleep, as Main.batchClock fills them in. The engine's clock and the
// sleep must agree: a command sleeps exactly the RetryAfter the limiter
// computed, then asks again.
type batchClock struct {
	// Now is the engine's clock (engineOptions.Clock); nil is the system
	// clock.
	Now throttle.Clock
	// Sleep waits d, or less when ctx ends first (it then returns
	// ctx.Err()). When a reporter was made with this clock, its waits go
	// through the reporter, which redraws the progress bar with the time
	// left and adds the time actually waited to the summary.
	Sleep func(ctx context.Context, d time.Duration) error

	hook *waitHook // shared by the copies of one batchClock
}

// waitHook routes a batchClock's sleeps through the reporter made with it.
type waitHook struct {
	sleep func(ctx context.Context, d time.Duration) error // the underlying wait
	rep   *reporter
}

// batchClock returns m's clock and sleep, a real wait when m.Sleep is nil.
func (m *Main) batchClock() batchClock {
	base := m.Sleep
	if base == nil {
		base = sleepContext
	}
	h := &waitHook{sleep: base}
	return batchClock{Now: m.Clock, hook: h, Sleep: func(ctx context.Context, d time.Duration) error {
		if h.rep != nil {
			return h.rep.sleep(ctx, d, h.sleep)
		}
		return h.sleep(ctx, d)
	}}
}

// now reads c.Now, or the system clock.
func (c batchClock) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// sleepContext waits d or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DefaultMaxWait is the most a batch command waits for one item, over all
// its retries, unless --max-wait says otherwise. It covers SIFEN's
// cooldown many times over and a local block after a 0301 (10 min).
const DefaultMaxWait = 15 * time.Minute

// waitFlags are --wait, --no-wait and --max-wait.
type waitFlags struct {
	wait, noWait bool
	maxWait      time.Duration
	progress     bool
}

func (w *waitFlags) add(fs *flag.FlagSet) {
	w.maxWait = DefaultMaxWait
	fs.BoolVar(&w.wait, "wait", false, "when the throttle refuses an item, sleep exactly until it would be admitted and retry (the default)")
	fs.BoolVar(&w.noWait, "no-wait", false, "when the throttle refuses an item, report it blocked and go on with the next")
	fs.Var(durationFlag(&w.maxWait), "max-wait", "the most one item may wait in all; an item that would wait longer is reported blocked")
	fs.BoolVar(&w.progress, "progress", false, `write a JSON line {"progress": {...}} on stderr when a wait starts and every 10s of it (the default with --json when stderr is a terminal)`)
}

// progressTo is where a reporter in mode writes its progress lines: stderr
// with --progress, or with --json when stderr is a terminal; else nowhere.
func (w *waitFlags) progressTo(m *Main, mode outputMode) io.Writer {
	if w.progress || (mode == modeJSON && isTerminal(m.Stderr)) {
		return m.Stderr
	}
	return nil
}

// resolve returns whether to wait, and for how long at most per item.
func (w *waitFlags) resolve(cmd string) (bool, time.Duration, error) {
	if w.wait && w.noWait {
		return false, 0, UsageError("%s: --wait and --no-wait contradict each other", cmd)
	}
	return !w.noWait, w.maxWait, nil
}

// result is how one item of a batch ended.
type result string

const (
	resultSent    result = "sent"    // sent, and answered
	resultBlocked result = "blocked" // not sent: the throttle refused it (or it is in flight elsewhere)
	resultSkipped result = "skipped" // nothing to do: already sent
	resultFailed  result = "failed"  // sent or tried, without success
	resultInvalid result = "invalid" // bad input: nothing was sent
)

// summary is the end of a batch: counts by result, the time spent waiting
// and in all. It is printed as a line, or as one JSON object
// {"summary": {...}} after the items' JSON lines.
type summary struct {
	Total   int `json:"total"`
	Sent    int `json:"sent"`
	Blocked int `json:"blocked"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	Invalid int `json:"invalid"`
	// NotProcessed counts items left untouched by an interruption.
	NotProcessed int `json:"not_processed"`
	// WaitS is the time actually spent waiting for the throttle (less than
	// planned when a wait was interrupted), ElapsedS the whole run.
	WaitS       float64 `json:"wait_s"`
	ElapsedS    float64 `json:"elapsed_s"`
	Interrupted bool    `json:"interrupted"`
}

// undone counts the items that are not done: exit code 1 when positive.
func (s summary) undone() int { return s.Blocked + s.Failed + s.Invalid + s.NotProcessed }

// String renders the summary line in English.
func (s summary) String() string { return s.text(i18n.New(i18n.English, nil)) }

// text renders the summary line in tr's language.
func (s summary) text(tr *i18n.Printer) string {
	line := tr.Sprintf("%d sent, %d blocked, %d skipped, %d failed", s.Sent, s.Blocked, s.Skipped, s.Failed)
	if s.Invalid > 0 {
		line += tr.Sprintf(", %d invalid", s.Invalid)
	}
	line += tr.Sprintf(" of %d in %s; waited %s", s.Total, fmtSeconds(s.ElapsedS), fmtSeconds(s.WaitS))
	if s.Interrupted {
		line += tr.Sprintf("; interrupted, %d not processed", s.NotProcessed)
	}
	return line
}

// fmtSeconds renders seconds as a Go duration rounded for people.
func fmtSeconds(s float64) string {
	return web.FormatWait(time.Duration(s * float64(time.Second)))
}

// seconds converts a duration to seconds, rounded to the millisecond, for
// the JSON output.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// outputMode is how a reporter writes.
type outputMode int

const (
	modePlain outputMode = iota // one log line per item (stdout is not a terminal: CI, cron, a pipe)
	modeBar                     // a progress bar with counts and ETA; notable items as lines above it
	modeJSON                    // one JSON object per line per item, then the summary object
)

// chooseMode picks the output mode for w: JSON when asked, a bar when w is
// a terminal, plain lines otherwise.
func chooseMode(w io.Writer, jsonOut bool) outputMode {
	switch {
	case jsonOut:
		return modeJSON
	case isTerminal(w):
		return modeBar
	}
	return modePlain
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// reporter writes a batch's items, waits and summary. Not safe for
// concurrent use (a batch handles one item at a time).
type reporter struct {
	tr    *i18n.Printer // the language of the lines people read (not of JSON)
	w     io.Writer
	mode  outputMode
	bar   *progressbar.ProgressBar
	clock batchClock
	start time.Time
	sum   summary
	why   string        // the reason of the wait announced last
	waitd time.Duration // time actually waited, summed
	// progress, when set, receives a JSON line per wait as it starts and
	// every progressTick during it (--progress, or --json with stderr a
	// terminal): what --json leaves silent during a long wait.
	progress io.Writer
}

// progressTick is how often a wait is reported on the progress writer.
const progressTick = 10 * time.Second

// progressEvent is a JSON line of the progress writer:
// {"progress": {"event": "waiting", "why", "wait_s", "left_s", "done", "total"}}.
type progressEvent struct {
	Event string  `json:"event"`
	Why   string  `json:"why"`
	WaitS float64 `json:"wait_s"`
	LeftS float64 `json:"left_s"`
	Done  int     `json:"done"`
	Total int     `json:"total"`
}

// tellProgress writes a wait of d with left to go on the progress writer.
func (r *reporter) tellProgress(d, left time.Duration) {
	s := r.sum
	writeJSONLine(r.progress, map[string]progressEvent{"progress": {Event: "waiting", Why: r.why, WaitS: seconds(d), LeftS: seconds(left),
		Done: s.Sent + s.Blocked + s.Skipped + s.Failed + s.Invalid, Total: s.Total}})
}

// barTick is how often the bar is redrawn during a wait.
const barTick = time.Second

// newReporter returns a reporter of total items writing to w in mode, its
// lines for people in tr's language (nil: English).
func newReporter(w io.Writer, mode outputMode, total int, what string, clock batchClock, tr *i18n.Printer) *reporter {
	if tr == nil {
		tr = i18n.New(i18n.English, nil)
	}
	r := &reporter{tr: tr, w: w, mode: mode, clock: clock, start: clock.now(), sum: summary{Total: total}}
	if clock.hook != nil {
		clock.hook.rep = r
	}
	if mode == modeBar {
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

// item records one item's result: counted, and written as line (plain),
// as a line above the bar when it is not a plain success (bar), or as obj
// (JSON).
func (r *reporter) item(res result, line string, obj any) {
	switch res {
	case resultSent:
		r.sum.Sent++
	case resultBlocked:
		r.sum.Blocked++
	case resultSkipped:
		r.sum.Skipped++
	case resultFailed:
		r.sum.Failed++
	case resultInvalid:
		r.sum.Invalid++
	}
	switch r.mode {
	case modePlain:
		fmt.Fprintln(r.w, line)
	case modeJSON:
		writeJSONLine(r.w, obj)
	case modeBar:
		if res != resultSent && res != resultSkipped {
			r.above(line)
		}
		r.bar.Describe(r.counts())
		// The bar is not throttled: a throttled Add skips drawing, and
		// the count shown then stays stale through the next wait.
		_ = r.bar.Add(1)
	}
}

// waiting announces a wait that is about to start: a plain line, or a
// line above the bar (the bar then counts it down, see sleep).
func (r *reporter) waiting(d time.Duration, why string) {
	r.why = why
	if r.progress != nil {
		r.tellProgress(d, d)
	}
	switch r.mode {
	case modePlain:
		fmt.Fprintln(r.w, r.tr.Sprintf("waiting %s: %s", web.FormatWait(d), why))
	case modeBar:
		r.above(r.tr.Sprintf("waiting %s: %s", web.FormatWait(d), why))
	}
}

// sleep waits d with base, redrawing the bar every barTick with the time
// left, and adds the time actually waited (by the batch clock) to the
// summary, also when ctx ends the wait early.
func (r *reporter) sleep(ctx context.Context, d time.Duration, base func(context.Context, time.Duration) error) error {
	start := r.clock.now()
	defer func() {
		r.waitd += max(r.clock.now().Sub(start), 0)
		r.sum.WaitS = seconds(r.waitd)
		if r.mode == modeBar {
			r.bar.Describe(r.counts())
			_ = r.bar.RenderBlank()
		}
	}()
	if r.mode != modeBar {
		if r.progress == nil {
			return base(ctx, d)
		}
		for left := d; left > 0; {
			if left < d {
				r.tellProgress(d, left)
			}
			if err := base(ctx, min(left, progressTick)); err != nil {
				return err
			}
			left = d - r.clock.now().Sub(start)
		}
		return nil
	}
	for left := d; left > 0; {
		r.bar.Describe(r.tr.Sprintf("waiting %s (%s) · %s", web.FormatWait(left), r.why, r.counts()))
		_ = r.bar.RenderBlank()
		step := min(left, barTick)
		if err := base(ctx, step); err != nil {
			return err
		}
		left = d - r.clock.now().Sub(start)
	}
	return nil
}

// note writes an event that is not an item (a resolved document): a plain
// line, a line above the bar, or nothing in JSON mode.
func (r *reporter) note(line string) {
	switch r.mode {
	case modePlain:
		fmt.Fprintln(r.w, line)
	case modeBar:
		r.above(line)
	}
}

// above prints line above the progress bar.
func (r *reporter) above(line string) {
	_ = r.bar.Clear()
	fmt.Fprintln(r.w, line)
	_ = r.bar.RenderBlank()
}

func (r *reporter) counts() string {
	return r.tr.Sprintf("sent %d, blocked %d, skipped %d, failed %d", r.sum.Sent, r.sum.Blocked, r.sum.Skipped, r.sum.Failed)
}

// finish writes the summary and returns it. notProcessed items were left
// untouched by an interruption.
func (r *reporter) finish(interrupted bool, notProcessed int) summary {
	r.sum.Interrupted, r.sum.NotProcessed = interrupted, notProcessed
	r.sum.ElapsedS = seconds(r.clock.now().Sub(r.start))
	switch r.mode {
	case modeJSON:
		writeJSONLine(r.w, struct {
			Summary summary `json:"summary"`
		}{r.sum})
	case modeBar:
		if !r.bar.IsFinished() {
			_ = r.bar.Exit()
			fmt.Fprintln(r.w)
		}
		fmt.Fprintln(r.w, r.sum.text(r.tr))
	default:
		fmt.Fprintln(r.w, r.sum.text(r.tr))
	}
	return r.sum
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(strconv.Quote(err.Error()))
	}
	b = append(b, '\n')
	_, _ = w.Write(b)
}

// batchExit is a batch's error from its summary: nil when every item is
// done, exit code 1 naming what is not, in tr's language.
func batchExit(cmd string, s summary, tr *i18n.Printer) error {
	if s.undone() == 0 {
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
	return &ExitError{Code: ExitFailed, Err: errors.New(tr.Sprintf("%s: %d of %d not done: %s", cmd, s.undone(), s.Total, strings.Join(parts, ", ")))}
}
