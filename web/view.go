package web

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// bucketView is one bucket as the admin pages show it: the state, and its
// cells in the page's language.
type bucketView struct {
	throttle.BucketState
	PolicyParts []string // the policy name split at "_", for line breaks
	Scope       string

	Negative bool
	// TokensText, CapacityText and SendsText are in the page's language.
	TokensText, CapacityText, SendsText string
	FillPercent                         int64  // 0..100, for the fill bar
	FillLabel                           string // "45% full", translated: the bar's text for screen readers
	Refill                              string
	PolicyText                          string
	Severity                            string
	SevClass                            string
	Wait                                string // "cooldown 8s", "blocked 4m12s" or ""
	State                               string // "blocked", "cooling down", "negative" or "", translated
	StateClass                          string
	RetryAfter                          string
	UntilFull                           string
	LastSent                            string
	LastSentAgo                         string // "4.8s ago", "never": the list's short form
	LastSentAt                          string // the instant in UTC (and the zone), "" for never

	DetailURL    string // "" for orphans (their policy is unknown)
	DocumentsURL string // for a SIFEN RUC's gate: the RUC's documents
}

// newBucketViewIn renders a state for a page in tr's language.
func (s *Server) newBucketViewIn(st throttle.BucketState, tr *i18n.Printer) bucketView {
	now := st.At
	v := bucketView{
		BucketState: st,
		PolicyParts: strings.Split(st.Key.Policy, "_"),
		Negative:    st.Tokens < 0,
		TokensText:  tr.Int(st.Tokens),
		SendsText:   tr.Int(st.SendCount),
		Severity:    tr.Sprintf(st.Severity.String()),
		SevClass:    severityClass(st.Severity),
		LastSent:    view.WhenIn(tr, tr.Zoned, st.LastSentAt, now),
	}
	if s.Scope != nil {
		v.Scope = s.Scope(st.Key)
	}
	if !st.Orphan {
		v.Refill = view.FormatRefillIn(tr, st.Policy)
		v.PolicyText = view.FormatPolicyIn(tr, st.Policy)
		v.FillPercent = fillPercent(st.Tokens, st.Policy.Capacity)
		v.FillLabel = tr.Sprintf("%d%% full", v.FillPercent)
		v.CapacityText = tr.Int(st.Policy.Capacity)
		v.DetailURL = s.bucketPath("adminBucket", st.Key)
	} else {
		v.Severity = tr.Sprintf("Unknown policy")
	}
	v.Wait = view.FormatBucketWaitIn(tr, st)
	// Never "full again: now" next to "blocked 8m7s".
	v.RetryAfter, v.UntilFull = waitIn(tr, st.RetryAfter), waitIn(tr, max(st.UntilFull, st.BlockLeft, st.CooldownLeft))
	if st.Key.Policy == sifen.PolicyRecepcionLote {
		// The SIFEN gate blocks only after SIFEN's 0301: say so, and the level.
		switch {
		case st.BlockLeft > 0 && st.BlockLevel > 0:
			v.Wait = tr.Sprintf("blocked %s after SIFEN's 0301 (block %d in a row)", view.FormatWait(st.BlockLeft), st.BlockLevel)
		case st.BlockLeft > 0:
			v.Wait = tr.Sprintf("blocked %s after SIFEN's 0301", view.FormatWait(st.BlockLeft))
		}
		if s.Sifen != nil {
			v.DocumentsURL = s.pathWithQuery("documents", url.Values{"ruc": {st.Key.Identifier}, "env": {st.Key.Env}})
		}
	}
	v.LastSentAgo = tr.Sprintf("never")
	if !st.LastSentAt.IsZero() {
		v.LastSentAt = tr.Zoned(st.LastSentAt)
		v.LastSentAgo = tr.Sprintf("%s ago", view.FormatWait(max(now.Sub(st.LastSentAt), 0)))
	}
	if c := st.Condition(); c != throttle.ConditionAny {
		v.State, v.StateClass = tr.Sprintf(c.String()), "state-"+c.Param()
	}
	return v
}

// listLinkQuery is what the pager links of a list keep of its query q:
// the named filters that are set, and the page size unless it is def.
func listLinkQuery(q url.Values, limit, def int, filters ...string) url.Values {
	out := url.Values{}
	for _, name := range filters {
		if v := q.Get(name); v != "" {
			out.Set(name, v)
		}
	}
	if limit != def {
		out.Set("limit", strconv.Itoa(limit))
	}
	return out
}

// bucketPath builds the URL of a per-bucket route.
func (s *Server) bucketPath(name string, k throttle.Key) string {
	return s.path(name, "policy", k.Policy, "env", k.Env, "identifier", k.Identifier)
}

// severityClass is the CSS class of a severity level.
func severityClass(sev throttle.Severity) string {
	if !slices.Contains(throttle.Severities, sev) {
		return "sev-unknown"
	}
	return "sev-" + strings.ToLower(sev.String())
}

// fillPercent is tokens as a whole percentage of capacity, rounded to the
// nearest and clamped to 0..100; only an empty bucket is 0 and only a full
// one 100.
func fillPercent(tokens, capacity int64) int64 {
	if capacity <= 0 || tokens <= 0 {
		return 0
	}
	if tokens >= capacity {
		return 100
	}
	return min(max((tokens*200+capacity)/(2*capacity), 1), 99)
}

// waitIn is FormatWaitOrNow in tr's language: "in 8s", "now".
func waitIn(tr *i18n.Printer, d time.Duration) string {
	if d <= 0 {
		return tr.Sprintf("now")
	}
	return tr.Sprintf("in %s", view.FormatWait(d))
}
