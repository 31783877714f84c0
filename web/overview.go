package web

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// overviewPage is admin_overview.html: per policy, the decisions of a
// window, admitted and refused by reason.
type overviewPage struct {
	layout
	Windows  []navLink
	Policies []decisionsView
	// Total is the row of every policy together.
	Total decisionsView
}

// decisionsView is one policy's line of the overview.
type decisionsView struct {
	Policy      string
	PolicyParts []string // split at "_", for line breaks
	ListURL     string   // the policy's buckets, worst first
	Admitted    string
	Refused     string
	Share       string // refused share, "39,3 %"
	ShareClass  string // sev-high past 10 %, sev-medium past 1 %
	// Empty, Cooldown, Blocked are the refusals by reason.
	Empty, Cooldown, Blocked string
}

// showOverview is GET /admin/overview: the decisions per policy over
// ?window= (default hour), read from the ledger: admitted, refused, the
// refused share and the refusals by reason.
func (s *Server) showOverview(w http.ResponseWriter, r *http.Request) error {
	l := s.layout(r, "adminOverview", "admin_overview.html")
	window, windows, err := s.chartWindowOf(r, l.T, "adminOverview")
	if err != nil {
		return err
	}
	if err := s.Limiter.FlushRefusals(r.Context()); err != nil {
		return err
	}
	at := s.now()
	decisions, err := s.Reader.Decisions(r.Context(), s.Policies, at.Add(-window.Span))
	if err != nil {
		return err
	}
	p := overviewPage{layout: l, Windows: windows}
	total := inspect.PolicyDecisions{Refused: map[throttle.LedgerReason]int64{}}
	for _, d := range decisions {
		p.Policies = append(p.Policies, s.newDecisionsView(l.T, d))
		total.Admitted += d.Admitted
		for k, n := range d.Refused {
			total.Refused[k] += n
		}
	}
	p.Total = s.newDecisionsView(l.T, total)
	p.Live = s.live(r)
	return s.renderLive(w, r, p, l.T.Zoned(at), map[string]string{"live-overview": "overview"})
}

// newDecisionsView renders d in tr's language.
func (s *Server) newDecisionsView(tr *i18n.Printer, d inspect.PolicyDecisions) decisionsView {
	v := decisionsView{
		Policy:   d.Policy,
		Admitted: tr.Int(d.Admitted),
		Refused:  tr.Int(d.RefusedTotal()),
		Share:    tr.PerMille(d.RefusedPerMille()),
		Empty:    tr.Int(d.Refused[throttle.LedgerRefusedEmpty]),
		Cooldown: tr.Int(d.Refused[throttle.LedgerRefusedCooldown]),
		Blocked:  tr.Int(d.Refused[throttle.LedgerRefusedBlocked]),
	}
	if d.Policy != "" {
		v.PolicyParts = strings.Split(d.Policy, "_")
		v.ListURL = s.pathWithQuery("adminBuckets", url.Values{"policy": {d.Policy}, "tab": {"all"}, "sort": {string(inspect.SortSeverity)}})
	}
	switch pm := d.RefusedPerMille(); {
	case pm > 100:
		v.ShareClass = "sev-high"
	case pm > 10:
		v.ShareClass = "sev-medium"
	}
	return v
}

// chartWindowOf reads ?window= (defaultChartWindow when absent), and links
// every window on the route named with pairs (Server.path), in tr's
// language, the one read marked current.
func (s *Server) chartWindowOf(r *http.Request, tr *i18n.Printer, route string, pairs ...string) (chartWindow, []navLink, error) {
	w := r.URL.Query().Get("window")
	i := slices.IndexFunc(chartWindows, func(c chartWindow) bool { return c.Name == cmp.Or(w, defaultChartWindow.Name) })
	if i < 0 {
		return chartWindow{}, nil, fmt.Errorf("%w: window %q (want 5m, 15m, hour, day or week)", errBadRequest, w)
	}
	var links []navLink
	for _, c := range chartWindows {
		links = append(links, navLink{Label: tr.Sprintf(c.Label), Current: c == chartWindows[i],
			URL: s.pathWithQuery(route, url.Values{"window": {c.Name}}, pairs...)})
	}
	return chartWindows[i], links, nil
}
