package web

import (
	"cmp"
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

// Panel is an extra box of the admin summary. Rows are label/value pairs;
// Class colours a value like a severity ("sev-high", ...). Texts are
// English, shown in the reader's language when the catalog has them; with
// LabelArgs, ValueArgs or NoteArgs the text is a format.
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

// PanelFunc computes a Panel, cached with the summary.
type PanelFunc func(ctx context.Context) (Panel, error)

// summary is the top of the admin bucket list.
type summary struct {
	// BySeverity counts buckets by their severity now, then the blocked
	// and negative ones.
	BySeverity       []severityCount
	Total            int64
	Partial          bool
	RefusalsLastHour int64
	Panels           []Panel
	At               time.Time
	// Stale is the age ("45s") of a summary past Server.SummaryTTL whose
	// recount did not end in time.
	Stale string
}

type severityCount struct {
	Label string // English; the template translates it
	Class string
	Count int64
	URL   string
}

// summaryCache keeps the last summary (docs/decisions/0140).
type summaryCache struct {
	mu   sync.Mutex
	val  *summary
	took time.Duration // how long the last computation took
	// done is closed when the recount running now ends; nil when none runs.
	done chan struct{}
	wait time.Duration // a page's wait for a recount (0: defaultSummaryWait)
}

const defaultSummaryWait = time.Second

// currentSummary returns the summary a page shows: computed now while that
// takes less than SummaryFresh, else the cached one within its TTL, else
// the recount when it ends within the wait, else the cached one marked
// Stale.
func (s *Server) currentSummary(ctx context.Context) (*summary, error) {
	if s.SummaryTTL <= 0 {
		return s.computeSummary(ctx)
	}
	c := &s.summary
	c.mu.Lock()
	v, took := c.val, c.took
	c.mu.Unlock()
	if v == nil || took < s.SummaryFresh {
		return s.recount(ctx)
	}
	if s.now().Sub(v.At) < s.SummaryTTL {
		return v, nil
	}
	timer := time.NewTimer(cmp.Or(c.wait, defaultSummaryWait))
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

// refreshSummaryInBackground recomputes the summary (unless caching is
// off: nil) and returns a channel closed when the recount, or the one
// running already, ends. Failures are logged.
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
		if _, err := s.recount(ctx); err != nil && s.bgCtx.Err() == nil {
			s.Logger.Warn("admin summary", slog.Any("error", err))
		}
		c.mu.Lock()
		c.done = nil
		c.mu.Unlock()
		close(done)
	})
	return done
}

// recount computes the summary and keeps it unless a newer one is kept,
// and how long it took, failed or not.
func (s *Server) recount(ctx context.Context) (*summary, error) {
	start := time.Now()
	v, err := s.computeSummary(ctx)
	c := &s.summary
	c.mu.Lock()
	defer c.mu.Unlock()
	c.took = time.Since(start)
	if err == nil && (c.val == nil || c.val.At.Before(v.At)) {
		c.val = v
	}
	return v, err
}

// computeSummary counts every stored bucket by severity and the refusals
// of the last hour, and runs the panels.
func (s *Server) computeSummary(ctx context.Context) (*summary, error) {
	at := s.now()
	counts, err := s.Reader.CountNow(ctx, inspect.Filter{})
	if err != nil {
		return nil, err
	}
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
