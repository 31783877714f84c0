package web

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// bucketsPage is admin_buckets.html.
type bucketsPage struct {
	layout
	Summary   *summary
	Query     listQuery
	Policies  []string
	ShowScope bool
	Buckets   []bucketView
	// Tabs are "Buckets" and, with SIFEN, "SIFEN lots": the lots waiting
	// for their result (Lots).
	Tabs []navLink
	Lots []lotView
	// Partial: a filter read MaxScan rows without filling the page (or,
	// sorted, without reaching the end).
	Partial bool

	Severities []option
	States     []option
	Sorts      []option

	ListURL, NextURL, PrevURL, FirstURL string
	RefreshURL, NoRefreshURL            string
	// Refreshing: auto-refresh is on, the table updates in place.
	Refreshing bool
	PageText   string
}

// option is one choice of a select.
type option struct {
	Value, Label string
	Selected     bool
}

// lotView is one SIFEN lot waiting for its result, on the lots tab.
type lotView struct {
	sifen.LotRef
	SentAt    string
	NextQuery string // "next query at <instant> (in 4m)" or "next query now"
}

// listQuery is a bucket listing's query, shared by the admin page and the
// JSON API.
type listQuery struct {
	Filter          inspect.Filter
	Severity, State string // the read-time filters as given (lowercase)
	Sort            inspect.SortBy
	Page            int // of a sorted listing, from 1
	// After is the keyset cursor (key order) and Trail the cursors of the
	// pages before it ("-" for the first).
	After string
	Trail []string
	Tab   string // "" or "all" (buckets), or "lots"
	query url.Values
}

// maxTrail bounds the pages "previous" can walk back.
const maxTrail = 50

// bucketQuery reads a bucket listing's query: policy, env, identifier (a
// prefix), severity (healthy|medium|high|critical, the level now), state
// (blocked|cooling|negative), sort (key|severity|last_send|tokens), tab
// (lots|all), limit (1..1000, default 50), and either after (the opaque
// cursor of the previous page's last key; trail lists the cursors before
// it) in key order or page (1..) when sorted.
func bucketQuery(r *http.Request) (listQuery, error) {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), inspect.DefaultPageSize, inspect.MaxPageSize)
	if err != nil {
		return listQuery{}, err
	}
	after, err := inspect.DecodeCursor(q.Get("after"))
	if err != nil {
		return listQuery{}, err
	}
	lq := listQuery{
		Filter: inspect.Filter{
			Policy:           q.Get("policy"),
			Env:              q.Get("env"),
			IdentifierPrefix: q.Get("identifier"),
			After:            after,
			Limit:            limit,
		},
		Severity: strings.ToLower(q.Get("severity")),
		State:    q.Get("state"),
		After:    q.Get("after"),
		Tab:      q.Get("tab"),
		Page:     1,
		query:    q,
	}
	var sevErr, condErr, sortErr error
	if lq.Severity != "" {
		lq.Filter.Severity, sevErr = throttle.ParseSeverity(lq.Severity)
	}
	lq.Filter.Condition, condErr = inspect.ParseCondition(lq.State)
	lq.Sort, sortErr = inspect.ParseSortBy(q.Get("sort"))
	if err := cmp.Or(sevErr, condErr, sortErr); err != nil {
		return listQuery{}, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if p := q.Get("page"); p != "" {
		if lq.Page, err = strconv.Atoi(p); err != nil || lq.Page < 1 {
			return listQuery{}, fmt.Errorf("%w: page %q is not a number from 1", errBadRequest, p)
		}
	}
	if t := q.Get("trail"); t != "" {
		lq.Trail = strings.Split(t, ",")
		lq.Trail = lq.Trail[max(0, len(lq.Trail)-maxTrail):]
	}
	if !slices.Contains([]string{"", "all", "lots"}, lq.Tab) {
		return listQuery{}, fmt.Errorf("%w: tab %q (want lots or all)", errBadRequest, lq.Tab)
	}
	return lq, nil
}

// values is the query of lq without its position (after, trail, page):
// what a link to another page of the same listing keeps.
func (lq listQuery) values() url.Values {
	return listLinkQuery(lq.query, lq.Filter.Limit, inspect.DefaultPageSize, "policy", "env", "identifier", "severity", "state", "sort", "tab")
}

// listing is one page of a listing and the links around it.
type listing struct {
	States                 []throttle.BucketState
	Next, Prev, First      url.Values // nil: no such page
	Partial                bool
	PageNumber, PageOffset int // PageOffset: the rows before the page
}

// list runs lq: in key order by keyset, or sorted by reading every
// matching bucket (at most inspect.MaxScan) and cutting a page.
func (s *Server) list(ctx context.Context, lq listQuery) (listing, error) {
	var out listing
	with := func(kv ...string) url.Values {
		v := lq.values()
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v
	}
	if lq.Sort != inspect.SortKey {
		f := lq.Filter
		f.After = throttle.Key{}
		all, partial, err := s.Reader.ListAll(ctx, f)
		if err != nil {
			return out, err
		}
		inspect.SortStates(all, lq.Sort)
		size := lq.Filter.Limit
		from := min((lq.Page-1)*size, len(all))
		out.States, out.Partial = all[from:min(from+size, len(all))], partial
		out.PageNumber, out.PageOffset = lq.Page, from
		if from+size < len(all) {
			out.Next = with("page", strconv.Itoa(lq.Page+1))
		}
		if lq.Page > 1 {
			out.Prev = with("page", strconv.Itoa(lq.Page-1))
			out.First = with()
		}
		return out, nil
	}
	page, err := s.Reader.List(ctx, lq.Filter)
	if err != nil {
		return out, err
	}
	out.States, out.Partial = page.States, page.Partial
	out.PageNumber, out.PageOffset = len(lq.Trail)+1, len(lq.Trail)*lq.Filter.Limit
	if page.Next != "" {
		trail := append(slices.Clone(lq.Trail[max(0, len(lq.Trail)-maxTrail+1):]), cmp.Or(lq.After, "-"))
		out.Next = with("after", page.Next, "trail", strings.Join(trail, ","))
	}
	if lq.After != "" {
		out.First = with()
		out.Prev = with()
		if n := len(lq.Trail); n > 0 && lq.Trail[n-1] != "-" {
			out.Prev = with("after", lq.Trail[n-1], "trail", strings.Join(lq.Trail[:n-1], ","))
		}
	}
	return out, nil
}

// showAdminBuckets is GET /admin/buckets: the summary and one page of
// stored buckets (see bucketQuery), or with ?tab=lots the SIFEN lots
// waiting for their result.
func (s *Server) showAdminBuckets(w http.ResponseWriter, r *http.Request) error {
	lq, err := bucketQuery(r)
	if err != nil {
		return err
	}
	var list listing
	if lq.Tab != "lots" {
		if list, err = s.list(r.Context(), lq); err != nil {
			return err
		}
	}
	sum, err := s.currentSummary(r.Context())
	if err != nil {
		return err
	}

	p := bucketsPage{
		layout:    s.layout(r, "adminBuckets", "admin_buckets.html"),
		Summary:   sum,
		Query:     lq,
		Policies:  slices.Sorted(slices.Values(s.Policies)),
		ShowScope: s.Scope != nil,
		ListURL:   s.path("adminBuckets"),
		Partial:   list.Partial,
	}
	tr := p.T
	for _, st := range list.States {
		p.Buckets = append(p.Buckets, s.newBucketViewIn(st, tr))
	}
	p.Severities = append(p.Severities, option{Value: "", Label: tr.Sprintf("any")})
	for _, sev := range throttle.Severities {
		v := strings.ToLower(sev.String())
		p.Severities = append(p.Severities, option{Value: v, Label: tr.Sprintf(sev.String()), Selected: v == lq.Severity})
	}
	p.States = append(p.States, option{Value: "", Label: tr.Sprintf("any")})
	for _, c := range []throttle.Condition{throttle.ConditionBlocked, throttle.ConditionCoolingDown, throttle.ConditionNegative} {
		p.States = append(p.States, option{Value: c.Param(), Label: tr.Sprintf(c.String()), Selected: c == lq.Filter.Condition})
	}
	for _, o := range []struct {
		by    inspect.SortBy
		label string
	}{{inspect.SortKey, "key"}, {inspect.SortSeverity, "severity (worst first)"}, {inspect.SortLastSend, "last send (newest first)"}, {inspect.SortTokens, "fill (emptiest first)"}} {
		p.Sorts = append(p.Sorts, option{Value: string(o.by), Label: tr.Sprintf(o.label), Selected: o.by == lq.Sort})
	}

	mainTab := lq.values()
	mainTab.Del("tab")
	p.Tabs = []navLink{{Label: tr.Sprintf("Buckets"), URL: s.pathWithQuery("adminBuckets", mainTab), Current: lq.Tab != "lots"}}
	if s.Sifen != nil {
		p.Tabs = append(p.Tabs, navLink{Label: tr.Sprintf("SIFEN lots"), URL: s.pathWithQuery("adminBuckets", url.Values{"tab": {"lots"}}), Current: lq.Tab == "lots"})
		if lq.Tab == "lots" {
			if p.Lots, err = s.lotViews(r.Context(), lq.Filter.Env, tr); err != nil {
				return err
			}
		}
	}

	p.Refreshing = r.URL.Query().Get("refresh") != ""
	link := func(v url.Values) string {
		if v == nil {
			return ""
		}
		if p.Refreshing {
			v.Set("refresh", "1")
		}
		return s.pathWithQuery("adminBuckets", v)
	}
	p.NextURL, p.PrevURL, p.FirstURL = link(list.Next), link(list.Prev), link(list.First)
	here := r.URL.Query()
	here.Set("refresh", "1")
	p.RefreshURL = s.pathWithQuery("adminBuckets", here)
	here.Del("refresh")
	p.NoRefreshURL = s.pathWithQuery("adminBuckets", here)
	if len(p.Buckets) > 0 {
		from := list.PageOffset + 1
		p.PageText = tr.Sprintf("Page %d (rows %d–%d)", list.PageNumber, from, from+len(p.Buckets)-1)
	}
	// ?live=1 is the update in place (static/live.js) of the summary, and
	// of the table while auto-refresh is on.
	p.Live = s.live(r)
	ids := map[string]string{"live-summary": "summary"}
	if p.Refreshing && lq.Tab != "lots" {
		ids["live-list"] = "bucketlist"
	}
	return s.renderLive(w, r, p, tr.Zoned(sum.At), ids)
}

// lotViews lists the SIFEN lots waiting for their result (of env, or all
// when ""), with when each is queried next.
func (s *Server) lotViews(ctx context.Context, env string, tr *i18n.Printer) ([]lotView, error) {
	lots, err := s.Sifen.Lots(ctx)
	if err != nil {
		return nil, err
	}
	now := s.Limiter.Now()
	var out []lotView
	for _, l := range lots {
		if env != "" && string(l.Env) != env {
			continue
		}
		v := lotView{LotRef: l, SentAt: view.WhenIn(tr, tr.Zoned, l.SentAt, now)}
		if wait := l.NextQueryAt.Sub(now); wait > 0 {
			v.NextQuery = tr.Sprintf("next query at %s (in %s)", tr.Zoned(l.NextQueryAt), view.FormatWait(wait))
		} else {
			v.NextQuery = tr.Sprintf("next query now")
		}
		out = append(out, v)
	}
	return out, nil
}

// bucketPage is admin_bucket.html.
type bucketPage struct {
	layout
	Bucket  bucketView
	Flash   string
	Chart   balanceChart
	Windows []navLink
	Ledger  []ledgerView

	ListURL, ResetURL, NewestURL, OlderURL string
	// ShadowURL switches the policy's shadow mode ("": it may not).
	// NeedReason: the audit trail is on, and the form asks why.
	ShadowURL  string
	NeedReason bool
}

// ledgerView is one ledger row on the bucket page.
type ledgerView struct {
	throttle.LedgerEntry
	At     string
	Reason string
	Delta  string
	Class  string
}

const ledgerPageSize = 100

// showAdminBucket is GET /admin/buckets/{policy}/{env}/{identifier}: the
// bucket's state, a chart of its balance and its ledger (?before= pages).
// An unknown policy is a 404.
func (s *Server) showAdminBucket(w http.ResponseWriter, r *http.Request) error {
	key, st, err := s.routeBucket(r)
	if err != nil {
		return err
	}
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		before, err = strconv.ParseInt(b, 10, 64)
		if err != nil || before < 1 {
			return fmt.Errorf("%w: before %q is not a ledger entry id", errBadRequest, b)
		}
	}
	l := s.layout(r, "adminBuckets", "admin_bucket.html")
	window, windows, err := s.chartWindowOf(r, l.T, "adminBucket", "policy", key.Policy, "env", key.Env, "identifier", key.Identifier)
	if err != nil {
		return err
	}
	entries, err := s.Reader.Ledger(r.Context(), inspect.LedgerQuery{Key: &key, BeforeID: before, Limit: ledgerPageSize})
	if err != nil {
		return err
	}
	folded, err := s.Reader.LedgerWindow(r.Context(), inspect.LedgerWindowQuery{
		Key: key, From: st.At.Add(-window.Span), To: st.At, Slots: chartSlots,
	})
	if err != nil {
		return err
	}

	p := bucketPage{
		layout:   l,
		Bucket:   s.newBucketViewIn(st, l.T),
		Chart:    newBalanceChart(l.T, folded, st),
		Windows:  windows,
		ListURL:  s.path("adminBuckets"),
		ResetURL: s.bucketPath("adminResetConfirm", key),
	}
	if s.Shadows != nil && s.Shadows.CheckShadow(key.Policy) == nil {
		p.ShadowURL, p.NeedReason = s.path("adminShadow", "policy", key.Policy), s.Audit != nil
	}
	switch r.URL.Query().Get("shadow") {
	case "on":
		p.Flash = l.T.Sprintf("The policy is in shadow mode: its buckets decide as usual, their refusals are recorded as shadow refusals, and the requests are admitted.")
	case "off":
		p.Flash = l.T.Sprintf("The policy enforces again: its buckets refuse.")
	}
	if r.URL.Query().Get("reset") == "1" {
		p.Flash = l.T.Sprintf("The bucket was reset: it is full, with no cooldown or block. The ledger records who did it.")
		if key.Policy == sifen.PolicyRecepcionLote {
			p.Flash = l.T.Sprintf("The RUC's gate was reset: balde's own wait is over. A block SIFEN itself imposed after a 0301 is not lifted by it, and a lot still on the wire holds the RUC until its answer.")
		}
	}
	for _, e := range entries {
		p.Ledger = append(p.Ledger, newLedgerView(l.T, e))
	}
	if len(entries) == ledgerPageSize {
		p.OlderURL = s.bucketPath("adminBucket", key) + "?before=" + strconv.FormatInt(inspect.NextLedgerCursor(entries), 10)
	}
	if before != 0 {
		p.NewestURL = s.bucketPath("adminBucket", key)
	}
	p.Live = s.live(r)
	ids := map[string]string{"live-state": "state", "live-chart": "chart"}
	if before == 0 {
		ids["live-ledger"] = "ledger"
	}
	return s.renderLive(w, r, p, l.T.Zoned(st.At), ids)
}

// newLedgerView is e as the bucket page shows it.
func newLedgerView(tr *i18n.Printer, e throttle.LedgerEntry) ledgerView {
	v := ledgerView{
		LedgerEntry: e,
		At:          tr.Zoned(e.At),
		Reason:      tr.Text(e.Reason.String()),
		Delta:       tr.Sprintf("%+d", e.Delta),
	}
	switch {
	case slices.Contains(throttle.RefusalReasons, e.Reason):
		v.Class = "ledger-refusal"
	case e.Reason == throttle.LedgerReset:
		v.Class = "ledger-reset"
	case slices.Contains(throttle.ShadowReasons, e.Reason):
		v.Class = "ledger-shadow"
	}
	return v
}

// resetPage is admin_reset.html: the confirmation step of a reset.
type resetPage struct {
	layout
	Bucket bucketView
	// RemoteNote says, for a SIFEN RUC's gate, what the reset does not do.
	RemoteNote        string
	ListURL, ResetURL string
	NeedReason        bool
}

// confirmReset is GET …/reset: the confirmation form.
func (s *Server) confirmReset(w http.ResponseWriter, r *http.Request) error {
	key, st, err := s.routeBucket(r)
	if err != nil {
		return err
	}
	l := s.layout(r, "adminBuckets", "admin_reset.html")
	p := resetPage{
		layout:     l,
		Bucket:     s.newBucketViewIn(st, l.T),
		ListURL:    s.path("adminBuckets"),
		ResetURL:   s.bucketPath("adminReset", key),
		NeedReason: s.Audit != nil,
	}
	if key.Policy == sifen.PolicyRecepcionLote {
		p.RemoteNote = l.T.Sprintf("This bucket is a SIFEN RUC's gate. The reset ends balde's own wait: the interval since SIFEN's last answer and the local block after a 0301. It does not lift a block SIFEN itself imposed after a 0301: SIFEN may answer 0301 again, and the next 0301 blocks longer (%d in a row so far). A lot still on the wire keeps holding the RUC until its answer.", st.BlockLevel)
	}
	return s.render(w, http.StatusOK, p)
}

// resetBucket is POST …/reset with confirm=yes and reason= (required with
// the audit trail): throttle.Limiter.Reset in the admin's name, then 303
// to the bucket's page.
func (s *Server) resetBucket(w http.ResponseWriter, r *http.Request) error {
	key, before, err := s.routeBucket(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return fmt.Errorf("%w: a reset must be confirmed (confirm=yes)", errBadRequest)
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if s.Audit != nil && reason == "" {
		return fmt.Errorf("%w: a reset needs a reason, recorded in the audit trail", errBadRequest)
	}
	info := requestInfoFrom(r.Context())
	after, err := s.Limiter.Reset(r.Context(), key, info.user)
	if err != nil {
		return err
	}
	info.outcome = audit.ResetOutcome(before.Tokens, after.Tokens)
	s.Logger.Info("bucket reset", slog.String("key", key.String()), slog.String("user", info.user), slog.String("reason", reason))
	http.Redirect(w, r, s.bucketPath("adminBucket", key)+"?reset=1", http.StatusSeeOther)
	return nil
}

// bucketKey reads the key of a per-bucket route; an invalid one is a bad
// request.
func bucketKey(r *http.Request) (throttle.Key, error) {
	vars, err := pathVars(r)
	if err != nil {
		return throttle.Key{}, err
	}
	k := throttle.Key{Policy: vars["policy"], Env: vars["env"], Identifier: vars["identifier"]}
	return k, k.Validate()
}

// routeBucket is the key a per-bucket route names and its state now: a
// bad request for an invalid key, 404 for an unknown policy.
func (s *Server) routeBucket(r *http.Request) (throttle.Key, throttle.BucketState, error) {
	key, err := bucketKey(r)
	if err != nil {
		return key, throttle.BucketState{}, err
	}
	st, err := s.Limiter.State(r.Context(), key)
	return key, st, err
}
