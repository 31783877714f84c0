package main

import (
	"flag"
	"io"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
)

// What the batch commands (sifen-send, dict-lookup) share: their clock,
// the --wait/--no-wait/--max-wait/--progress flags and the exit code of a
// summary. The drawing (bar, plain lines, JSON lines, summary) is package
// report's.

// batchClock returns m's clock and sleep (report.NewClock), a real wait
// when m.Sleep is nil.
func (m *Main) batchClock() report.Clock { return report.NewClock(m.Clock, m.Sleep) }

// DefaultMaxWait is the most a batch command waits for one item, over all
// its retries, unless --max-wait says otherwise. It covers SIFEN's
// cooldown many times over and a local block after a 0301 (10 min).
const DefaultMaxWait = 15 * time.Minute

// waitFlags are --wait, --no-wait, --max-wait and --progress.
type waitFlags struct {
	wait, noWait bool
	maxWait      time.Duration
	progress     bool
}

func (w *waitFlags) add(fs *flag.FlagSet) {
	w.maxWait = DefaultMaxWait
	fs.BoolVar(&w.wait, "wait", false, "when the throttle refuses an item, sleep exactly until it would be admitted and retry (the default)")
	fs.BoolVar(&w.noWait, "no-wait", false, "when the throttle refuses an item, report it blocked and go on with the next")
	fs.Var(settings.FlagOf(&w.maxWait, settings.ParseDuration, nil), "max-wait", "the most one item may wait in all; an item that would wait longer is reported blocked")
	fs.BoolVar(&w.progress, "progress", false, `write a JSON line {"progress": {...}} on stderr when a wait starts and every 10s of it (the default with --json when stderr is a terminal)`)
}

// resolve returns whether to wait, and for how long at most per item.
func (w *waitFlags) resolve(cmd string) (bool, time.Duration, error) {
	if w.wait && w.noWait {
		return false, 0, UsageError("%s: --wait and --no-wait contradict each other", cmd)
	}
	return !w.noWait, w.maxWait, nil
}

// progressTo is where a reporter in mode writes its progress lines: stderr
// with --progress, or with --json when stderr is a terminal; else nowhere.
func (w *waitFlags) progressTo(m *Main, mode report.Mode) io.Writer {
	if w.progress || (mode == report.JSON && report.IsTerminal(m.Stderr)) {
		return m.Stderr
	}
	return nil
}

// batchExit is a batch's error from its summary (report.Summary.Err):
// nil when every item is done, else exit code 1 naming what is not.
func batchExit(cmd string, s report.Summary, tr *i18n.Printer) error {
	if err := s.Err(cmd, tr); err != nil {
		return &ExitError{Code: ExitFailed, Err: err}
	}
	return nil
}
