package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// Panel is an extra box of the admin summary: the DICT participant's
// category, an anti-scan monitor. Rows are label/value pairs; Class colours
// a value like a severity ("sev-high", ...).
//
// Titles, labels, values and notes are English: a text in the catalog
// (internal/i18n) is shown in the reader's language. With LabelArgs, ValueArgs
// or NoteArgs the text is a format (its catalog key) and the arguments are
// formatted in the reader's language; without, it is shown as a fixed text.
type Panel struct {
	Title    string
	Rows     []PanelRow
	Note     string
	NoteArgs []any
}

// PanelRow is one line of a Panel.
type PanelRow struct {
	Label, Value, Class  string
	LabelArgs, ValueArgs []any
}

// PanelFunc computes a Panel. It runs with the summary, which is cached
// for Server.SummaryTTL, so it may run a counting query.
type PanelFunc func(ctx context.Context) (Panel, error)

// summary is the top of the admin bucket list.
type summary struct {
	// BySeverity counts buckets by their severity now (inspect.Reader.CountNow),
	// then the blocked and negative ones; each card links to the list
	// filtered on it.
	BySeverity       []severityCount
	Total            int64
	Partial          bool
	RefusalsLastHour int64
	Panels           []Panel
	At               time.Time
	// Stale, set on a copy the page shows, is the age of a summary older
	// than Server.SummaryTTL ("45s"), shown with it: its recount did not
	// end within defaultSummaryWait. "" for a summary within its TTL.
	Stale string
}

type severityCount struct {
	Label string // English; the template translates it
	Class string
	Count int64
	URL   string
}

// summaryCache keeps the last summary. Counting buckets by severity scans
// every row (about 0.35 s at a million rows on SQLite): while a summary
// takes less than Server.SummaryFresh to compute, every request computes it
// (a small installation always sees fresh numbers); once it takes longer,
// the admin page shows the cached summary within Server.SummaryTTL, and
// past it waits for a recount at most defaultSummaryWait, then shows the old one
// marked stale with its age (docs/decisions/0140).
type summaryCache struct {
	mu   sync.Mutex
	val  *summary
	took time.Duration // how long the last computation took
	// done is closed when the recount running now ends; nil when none runs.
	done chan struct{}
	// wait bounds how long a page waits for a recount (0:
	// defaultSummaryWait); tests shorten it.
	wait time.Duration
}

// defaultSummaryWait is how long a page waits for the recount of a summary
// past its TTL before it shows the old one marked stale: a count of a
// million buckets (0.35 s) is waited for.
const defaultSummaryWait = time.Second

// currentSummary returns the summary a page shows: computed now while that
// is cheap, else the cached one within its TTL, else the recount when it
// ends within defaultSummaryWait (or ctx), else a copy of the cached one marked
// Stale. It computes the first one when there is none yet.
func (s *Server) currentSummary(ctx context.Context) (*summary, error) {
	if s.SummaryTTL <= 0 {
		return s.computeSummary(ctx)
	}
	c := &s.summary
	c.mu.Lock()
	v, took := c.val, c.took
	c.mu.Unlock()
	if v == nil || took < s.SummaryFresh {
		start := time.Now()
		v, err := s.computeSummary(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.took = time.Since(start)
		if c.val == nil || c.val.At.Before(v.At) {
			c.val = v
		}
		c.mu.Unlock()
		return v, nil
	}
	if s.now().Sub(v.At) < s.SummaryTTL {
		return v, nil
	}
	wait := c.wait
	if wait == 0 {
		wait = defaultSummaryWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for waiting := true; ; {
		// A recount joined while it ran may itself be past the TTL (it
		// began long ago): then another, while the wait lasts. One that
		// failed (the old summary stays) ends the wait.
		before := v
		select {
		case <-s.refreshSummaryInBackground():
		case <-timer.C:
			waiting = false
		case <-ctx.Done():
			waiting = false
		}
		c.mu.Lock()
		v = c.val
		c.mu.Unlock()
		age := s.now().Sub(v.At)
		if age < s.SummaryTTL {
			return v, nil
		}
		if !waiting || v == before {
			stale := *v
			stale.Stale = view.FormatWait(age)
			return &stale, nil
		}
	}
}

// refreshSummaryInBackground recomputes the summary unless caching is off,
// and returns a channel closed when the recount ends: the one running
// already, if any (nil when caching is off: never closed). Failures are
// logged; the old summary stays.
func (s *Server) refreshSummaryInBackground() <-chan struct{} {
	if s.SummaryTTL <= 0 || s.bgCtx == nil {
		return nil
	}
	c := &s.summary
	c.mu.Lock()
	if c.done != nil {
		defer c.mu.Unlock()
		return c.done
	}
	done := make(chan struct{})
	c.done = done
	c.mu.Unlock()
	s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(s.bgCtx, time.Minute)
		defer cancel()
		start := time.Now()
		v, err := s.computeSummary(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		defer close(done)
		c.done = nil
		c.took = time.Since(start)
		if err != nil {
			if s.bgCtx.Err() == nil {
				s.Logger.Warn("admin summary", slog.Any("error", err))
			}
			return
		}
		if c.val == nil || c.val.At.Before(v.At) {
			c.val = v
		}
	})
	return done
}

// computeSummary counts every stored bucket by severity, the refusals of
// the last hour (those other processes answered from memory reach the
// ledger within a minute), and runs the panels.
func (s *Server) computeSummary(ctx context.Context) (*summary, error) {
	at := s.now()
	counts, err := s.Reader.CountNow(ctx, inspect.Filter{})
	if err != nil {
		return nil, err
	}
	// Refusals answered from the limiter's memory reach the ledger in
	// groups; write this process's now so that the count includes them.
	if err := s.Limiter.FlushRefusals(ctx); err != nil {
		return nil, err
	}
	refusals, err := s.Reader.CountLedger(ctx, inspect.LedgerQuery{
		Reasons: throttle.RefusalReasons,
		Since:   at.Add(-time.Hour),
	})
	if err != nil {
		return nil, err
	}
	v := &summary{RefusalsLastHour: refusals, At: at, Total: counts.Total, Partial: counts.Partial}
	list := func(k, val string) string {
		return s.pathWithQuery("adminBuckets", url.Values{k: {val}, "tab": {"all"}, "sort": {string(inspect.SortSeverity)}})
	}
	for _, sev := range throttle.Severities {
		v.BySeverity = append(v.BySeverity, severityCount{Label: sev.String(), Class: severityClass(sev),
			Count: counts.BySeverity[sev], URL: list("severity", strings.ToLower(sev.String()))})
	}
	v.BySeverity = append(v.BySeverity,
		severityCount{Label: "Blocked", Class: countClass(counts.Blocked, "sev-high"), Count: counts.Blocked, URL: list("state", "blocked")},
		severityCount{Label: "Negative", Class: countClass(counts.Negative, "sev-critical"), Count: counts.Negative, URL: list("state", "negative")})
	for _, f := range s.Panels {
		p, err := f(ctx)
		if err != nil {
			return nil, fmt.Errorf("web: summary panel: %w", err)
		}
		v.Panels = append(v.Panels, p)
	}
	return v, nil
}

// countClass is class when n > 0.
func countClass(n int64, class string) string {
	if n > 0 {
		return class
	}
	return ""
}
