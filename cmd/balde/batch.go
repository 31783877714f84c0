package main

import (
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
)

// What the batch commands (sifen-send, dict-lookup) share: their clock,
// the --wait/--no-wait/--max-wait/--progress flags (report.WaitFlags) and
// the exit code of a summary. The drawing (bar, plain lines, JSON lines, summary) is package
// report's.

// batchClock returns m's clock and sleep (report.NewClock), a real wait
// when m.Sleep is nil.
func (m *Main) batchClock() report.Clock { return report.NewClock(m.Clock, m.Sleep) }

// waitOf returns whether to wait, and for how long at most per item.
func waitOf(w report.WaitFlags, cmd string) (bool, time.Duration, error) {
	if w.Wait && w.NoWait {
		return false, 0, UsageError("%s: --wait and --no-wait contradict each other", cmd)
	}
	return !w.NoWait, w.MaxWait, nil
}

// batchExit is a batch's error from its summary (report.Summary.Err):
// nil when every item is done, else exit code 1 naming what is not.
func batchExit(cmd string, s report.Summary, tr *i18n.Printer) error {
	if err := s.Err(cmd, tr); err != nil {
		return &ExitError{Code: ExitFailed, Err: err}
	}
	return nil
}
