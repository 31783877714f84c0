package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/balde-throttle/balde/throttle"
)

// bucketsPage is admin_buckets.html.
type bucketsPage struct {
	layout
	Summary   *summary
	Filter    throttle.Filter
	Policies  []string
	ShowScope bool
	Buckets   []bucketView

	ListURL      string
	NextURL      string
	FirstURL     string
	RefreshURL   string
	NoRefreshURL string
}

func (bucketsPage) templateFile() string { return "admin_buckets.html" }

// autoRefreshSeconds is the period of the bucket list's auto-refresh.
const autoRefreshSeconds = 10

// bucketFilter reads a bucket listing's query, shared by the admin page and
// the JSON API: policy, env, identifier (a prefix), after (the opaque
// cursor of the previous page's last key) and limit (1..1000, default 50).
func bucketFilter(r *http.Request) (throttle.Filter, error) {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), throttle.DefaultPageSize, throttle.MaxPageSize)
	if err != nil {
		return throttle.Filter{}, err
	}
	after, err := throttle.DecodeCursor(q.Get("after"))
	if err != nil {
		return throttle.Filter{}, err
	}
	return throttle.Filter{
		Policy:           q.Get("policy"),
		Env:              q.Get("env"),
		IdentifierPrefix: q.Get("identifier"),
		After:            after,
		Limit:            limit,
	}, nil
}

// filterQuery is the query of f without its cursor: what a link to
// another page of the same listing keeps.
func filterQuery(f throttle.Filter) url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"policy": f.Policy, "env": f.Env, "identifier": f.IdentifierPrefix} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if f.Limit != throttle.DefaultPageSize {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// showAdminBuckets is GET /admin/buckets: the summary and one page of
// stored buckets, filtered by policy, env and identifier prefix, in key
// order. Pagination is by keyset: ?after= is the opaque cursor of the last
// key of the previous page, so a page costs the same at any depth.
func (s *Server) showAdminBuckets(w http.ResponseWriter, r *http.Request) error {
	f, err := bucketFilter(r)
	if err != nil {
		return err
	}
	list, err := s.Limiter.List(r.Context(), f)
	if err != nil {
		return err
	}
	sum, err := s.currentSummary(r.Context())
	if err != nil {
		return err
	}

	p := bucketsPage{
		layout:    s.layout(r, "adminBuckets"),
		Summary:   sum,
		Filter:    f,
		Policies:  slices.Sorted(slices.Values(s.Policies)),
		ShowScope: s.Scope != nil,
		ListURL:   s.path("adminBuckets"),
	}
	for _, st := range list.States {
		p.Buckets = append(p.Buckets, s.newBucketView(st))
	}

	// Links keep the filter; each adds or drops one parameter.
	base := filterQuery(f)
	refreshing := r.URL.Query().Get("refresh") != ""
	if refreshing {
		p.Refresh = autoRefreshSeconds
		base.Set("refresh", "1")
	}
	with := func(key, value string) string {
		v := url.Values{}
		for k, vs := range base {
			v[k] = slices.Clone(vs)
		}
		if value == "" {
			v.Del(key)
		} else {
			v.Set(key, value)
		}
		return s.pathWithQuery("adminBuckets", v)
	}
	if list.Next != "" {
		p.NextURL = with("after", list.Next)
	}
	if f.After != (throttle.Key{}) {
		p.FirstURL = with("after", "")
	}
	p.RefreshURL = with("refresh", "1")
	p.NoRefreshURL = with("refresh", "")
	return s.render(w, http.StatusOK, p)
}

// bucketPage is admin_bucket.html.
type bucketPage struct {
	layout
	Bucket bucketView
	Flash  string
	Chart  balanceChart
	Ledger []ledgerView

	ListURL   string
	ResetURL  string
	NewestURL string
	OlderURL  string
}

func (bucketPage) templateFile() string { return "admin_bucket.html" }

// ledgerView is one ledger row on the bucket page.
type ledgerView struct {
	At      string
	Reason  string
	Delta   string
	Balance int64
	Count   int64
	Ref     string
	Class   string
}

// ledgerPageSize is how many ledger rows the bucket page shows (and draws).
const ledgerPageSize = 100

// showAdminBucket is GET /admin/buckets/{policy}/{env}/{identifier}: the
// bucket's state, a chart of its balance and its recent ledger (?before=
// an entry id pages to older entries). A key with no row is a full bucket;
// an unknown policy is a 404.
func (s *Server) showAdminBucket(w http.ResponseWriter, r *http.Request) error {
	key, err := bucketKey(r)
	if err != nil {
		return err
	}
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		before, err = strconv.ParseInt(b, 10, 64)
		if err != nil || before < 1 {
			return fmt.Errorf("%w: before %q is not a ledger entry id", ErrBadRequest, b)
		}
	}
	st, err := s.Limiter.State(r.Context(), key)
	if err != nil {
		return err
	}
	entries, err := s.Limiter.Ledger(r.Context(), throttle.LedgerQuery{Key: &key, BeforeID: before, Limit: ledgerPageSize})
	if err != nil {
		return err
	}
	// The chart always shows the newest entries up to now.
	recent := entries
	if before != 0 {
		if recent, err = s.Limiter.Ledger(r.Context(), throttle.LedgerQuery{Key: &key, Limit: ledgerPageSize}); err != nil {
			return err
		}
	}

	p := bucketPage{
		layout:   s.layout(r, "adminBuckets"),
		Bucket:   s.newBucketView(st),
		Chart:    newBalanceChart(recent, st),
		ListURL:  s.path("adminBuckets"),
		ResetURL: s.bucketPath("adminResetConfirm", key),
	}
	if r.URL.Query().Get("reset") == "1" {
		p.Flash = "The bucket was reset: it is full, with no cooldown or block. The ledger records who did it."
	}
	for _, e := range entries {
		p.Ledger = append(p.Ledger, newLedgerView(e))
	}
	if len(entries) == ledgerPageSize {
		p.OlderURL = s.pathWithQuery("adminBucket", url.Values{"before": {strconv.FormatInt(entries[len(entries)-1].ID, 10)}},
			"policy", key.Policy, "env", key.Env, "identifier", key.Identifier)
	}
	if before != 0 {
		p.NewestURL = s.bucketPath("adminBucket", key)
	}
	return s.render(w, http.StatusOK, p)
}

func newLedgerView(e throttle.LedgerEntry) ledgerView {
	v := ledgerView{
		At:      e.At.UTC().Format(TimeLayout),
		Reason:  e.Reason.String(),
		Delta:   fmt.Sprintf("%+d", e.Delta),
		Balance: e.Balance,
		Count:   e.Count,
		Ref:     e.Ref,
	}
	switch {
	case slices.Contains(throttle.RefusalReasons, e.Reason):
		v.Class = "ledger-refusal"
	case e.Reason == throttle.LedgerReset:
		v.Class = "ledger-reset"
	}
	return v
}

// resetPage is admin_reset.html: the confirmation step of a reset.
type resetPage struct {
	layout
	Bucket    bucketView
	ListURL   string
	DetailURL string
	ResetURL  string
}

func (resetPage) templateFile() string { return "admin_reset.html" }

// confirmReset is GET /admin/buckets/{policy}/{env}/{identifier}/reset: it
// asks for confirmation; the form posts to the same path.
func (s *Server) confirmReset(w http.ResponseWriter, r *http.Request) error {
	key, err := bucketKey(r)
	if err != nil {
		return err
	}
	st, err := s.Limiter.State(r.Context(), key)
	if err != nil {
		return err
	}
	return s.render(w, http.StatusOK, resetPage{
		layout:    s.layout(r, "adminBuckets"),
		Bucket:    s.newBucketView(st),
		ListURL:   s.path("adminBuckets"),
		DetailURL: s.bucketPath("adminBucket", key),
		ResetURL:  s.bucketPath("adminReset", key),
	})
}

// resetBucket is POST /admin/buckets/{policy}/{env}/{identifier}/reset
// with confirm=yes: it fills the bucket and clears its cooldown and block
// (throttle.Limiter.Reset, recorded in the ledger with the admin's name),
// then redirects (303) to the bucket's page.
func (s *Server) resetBucket(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	key, err := bucketKey(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return fmt.Errorf("%w: a reset must be confirmed (confirm=yes)", ErrBadRequest)
	}
	user := requestInfoFrom(r.Context()).user
	if _, err := s.Limiter.Reset(r.Context(), key, user); err != nil {
		return err
	}
	s.Logger.Info("bucket reset", slog.String("key", key.String()), slog.String("user", user))
	http.Redirect(w, r, s.pathWithQuery("adminBucket", url.Values{"reset": {"1"}},
		"policy", key.Policy, "env", key.Env, "identifier", key.Identifier), http.StatusSeeOther)
	return nil
}

// bucketKey reads the key of a per-bucket route. An invalid key (empty,
// too long, control characters) is a bad request.
func bucketKey(r *http.Request) (throttle.Key, error) {
	vars, err := pathVars(r)
	if err != nil {
		return throttle.Key{}, err
	}
	k := throttle.Key{Policy: vars["policy"], Env: vars["env"], Identifier: vars["identifier"]}
	return k, k.Validate()
}
