package report

import (
	"flag"
	"io"
	"time"

	"github.com/balde-throttle/balde/internal/settings"
)

// DefaultMaxWait is --max-wait's default: SIFEN's cooldown many times over
// and a local block after a 0301.
const DefaultMaxWait = 15 * time.Minute

// WaitFlags are the batch commands' --wait, --no-wait, --max-wait and
// --progress.
type WaitFlags struct {
	Wait, NoWait bool
	MaxWait      time.Duration
	Progress     bool
}

// Add registers the flags on fs, --max-wait DefaultMaxWait by default.
func (w *WaitFlags) Add(fs *flag.FlagSet) {
	w.MaxWait = DefaultMaxWait
	fs.BoolVar(&w.Wait, "wait", false, "when the throttle refuses an item, sleep exactly until it would be admitted and retry (the default)")
	fs.BoolVar(&w.NoWait, "no-wait", false, "when the throttle refuses an item, report it blocked and go on with the next")
	fs.Var(settings.FlagOf(&w.MaxWait, settings.ParseDuration, nil), "max-wait", "the most one item may wait in all; an item that would wait longer is reported blocked")
	fs.BoolVar(&w.Progress, "progress", false, `write a JSON line {"progress": {...}} on stderr when a wait starts and every 10s of it (the default with --json when stderr is a terminal)`)
}

// ProgressTo is stderr with --progress, or with JSON on a terminal; else nil.
func (w *WaitFlags) ProgressTo(stderr io.Writer, mode Mode) io.Writer {
	if w.Progress || (mode == JSON && IsTerminal(stderr)) {
		return stderr
	}
	return nil
}
