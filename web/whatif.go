package web

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/internal/whatif"
)

// whatifPage is admin_whatif.html: the question and, once asked, the
// replay's report (docs/decisions/0150).
type whatifPage struct {
	layout
	FormURL    string
	Policies   []option
	Categories []option
	From, To   string // datetime-local, in the page's zone
	// The other numbers, as typed.
	Capacity, RefillTokens, RefillPeriod, Interval string
	Error                                          string // why the question cannot be answered (a 400)
	Report                                         *view.Whatif
}

const whatifLayout = "2006-01-02T15:04"

// showWhatif is GET /admin/whatif: the form; with ?policy= (one or more),
// the period's decisions of those policies (?from=, ?to=: the last 24
// hours by default) replayed under the numbers asked. A question that
// cannot be answered is a 400 with the reason on the form.
func (s *Server) showWhatif(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	l := s.layout(r, "adminWhatif", "admin_whatif.html")
	zone := l.T.Location()
	p := whatifPage{layout: l, FormURL: s.path("adminWhatif"), Capacity: q.Get("capacity"), RefillTokens: q.Get("refill_tokens"),
		RefillPeriod: q.Get("refill_period"), Interval: q.Get("interval")}
	chosen := q["policy"]
	for _, name := range s.Policies {
		p.Policies = append(p.Policies, option{Value: name, Label: name, Selected: slices.Contains(chosen, name)})
	}
	category := q.Get("category")
	p.Categories = append(p.Categories, option{Label: l.T.Sprintf("as recorded"), Selected: category == ""})
	for _, c := range dict.Categories {
		p.Categories = append(p.Categories, option{Value: c, Label: c, Selected: c == category})
	}
	query := whatif.Query{Policies: chosen, Scenario: whatif.Scenario{Category: category}}
	var err error
	if query.To, err = whatif.ParseWhen(q.Get("to"), s.now(), zone); err != nil {
		return errors.Join(errBadRequest, err)
	}
	if query.From, err = whatif.ParseWhen(q.Get("from"), query.To.Add(-24*time.Hour), zone); err != nil {
		return errors.Join(errBadRequest, err)
	}
	p.From, p.To = query.From.In(zone).Format(whatifLayout), query.To.In(zone).Format(whatifLayout)
	sc := &query.Scenario
	for _, f := range []struct {
		v   string
		int *int64
		dur *time.Duration
	}{{p.Capacity, &sc.Capacity, nil}, {p.RefillTokens, &sc.RefillTokens, nil}, {p.RefillPeriod, nil, &sc.RefillPeriod}, {p.Interval, nil, &sc.Interval}} {
		switch {
		case f.v == "":
		case f.int != nil:
			if *f.int, err = strconv.ParseInt(f.v, 10, 64); err != nil {
				return errors.Join(errBadRequest, err)
			}
		default:
			if *f.dur, err = time.ParseDuration(f.v); err != nil {
				return errors.Join(errBadRequest, err)
			}
		}
	}
	if len(chosen) == 0 {
		return s.render(w, http.StatusOK, p)
	}
	cfg := whatif.Config{Source: s.Reader, Limiter: s.Limiter}
	if s.Dict != nil {
		cfg.Dict = s.Dict.Catalog()
	}
	rep, err := whatif.Run(r.Context(), cfg, query)
	if errors.Is(err, whatif.ErrInvalid) {
		p.Error = err.Error()
		return s.render(w, s.prepareError(w, r, errors.Join(errBadRequest, err)).status, p)
	}
	if err != nil {
		return err
	}
	p.Report = view.NewWhatif(l.T, rep)
	return s.render(w, http.StatusOK, p)
}
