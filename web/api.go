package web

import (
	"net/http"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// APIBucket is one bucket in the JSON API and in the CLI's --json (one set
// of field names for both): the bucket document of a token-bucket service, with the policy
// and waits a monitor needs. Durations are in seconds; severity is the
// level now.
type APIBucket struct {
	Policy     string `json:"policy"`
	Env        string `json:"env"`
	Identifier string `json:"identifier"`
	Tokens     int64  `json:"tokens"`
	Capacity   int64  `json:"capacity"`
	// RefillTokens are added per RefillPeriodSeconds, in RefillMode
	// ("continuous", "stepwise", "rolling").
	RefillTokens        int64   `json:"refill_tokens"`
	RefillPeriodSeconds float64 `json:"refill_period_seconds"`
	RefillMode          string  `json:"refill_mode"`
	// Severity is "Healthy", "Medium", "High" or "Critical"; SeverityLevel
	// is its alert number (1..4, 0 unknown; throttle.Severity).
	Severity      string `json:"severity"`
	SeverityLevel int    `json:"severity_level"`
	// State is "blocked", "cooling down", "negative" or "".
	State string `json:"state"`
	// Scope is whom the bucket belongs to (PSP, USER, RUC, LOT, IP, TOKEN)
	// or "".
	Scope           string  `json:"scope,omitempty"`
	CooldownSeconds float64 `json:"cooldown_remaining_seconds"`
	BlockSeconds    float64 `json:"block_remaining_seconds"`
	// BlockLevel counts the escalating blocks in a row (a SIFEN RUC's
	// 0301s); OnTheWire is set while a request admitted on the key holds
	// it until its answer.
	BlockLevel        int64      `json:"block_level,omitempty"`
	OnTheWire         bool       `json:"on_the_wire,omitempty"`
	RetryAfterSeconds float64    `json:"retry_after_seconds"`
	UntilFullSeconds  float64    `json:"until_full_seconds"`
	LastSentAt        *time.Time `json:"last_sent_at"`
	SendCount         int64      `json:"send_count"`
	// Stored is false for a key with no row (a full bucket); Orphan is set
	// for a row whose policy is no longer known.
	Stored bool `json:"stored"`
	Orphan bool `json:"orphan,omitempty"`
	// Shadow: the policy is in shadow mode (docs/decisions/0200).
	Shadow bool      `json:"shadow,omitempty"`
	At     time.Time `json:"at"`
}

// NewAPIBucket renders st for the API; scope may be nil.
func NewAPIBucket(st throttle.BucketState, scope func(throttle.Key) string) APIBucket {
	b := APIBucket{
		Policy:              st.Key.Policy,
		Env:                 st.Key.Env,
		Identifier:          st.Key.Identifier,
		Tokens:              st.Tokens,
		Capacity:            st.Policy.Capacity,
		RefillTokens:        st.Policy.RefillTokens,
		RefillPeriodSeconds: st.Policy.RefillPeriod.Seconds(),
		Severity:            st.Severity.String(),
		SeverityLevel:       int(st.Severity),
		State:               st.Condition().String(),
		CooldownSeconds:     st.CooldownLeft.Seconds(),
		BlockSeconds:        st.BlockLeft.Seconds(),
		RetryAfterSeconds:   st.RetryAfter.Seconds(),
		UntilFullSeconds:    st.UntilFull.Seconds(),
		BlockLevel:          st.BlockLevel,
		OnTheWire:           st.UntilReleased(st.At) > 0,
		SendCount:           st.SendCount,
		Stored:              st.Stored,
		Orphan:              st.Orphan,
		Shadow:              st.Shadow,
		At:                  st.At.UTC(),
	}
	if !st.Orphan {
		b.RefillMode = st.Policy.Refill.String()
	}
	if scope != nil {
		b.Scope = scope(st.Key)
	}
	if !st.LastSentAt.IsZero() {
		t := st.LastSentAt.UTC()
		b.LastSentAt = &t
	}
	return b
}

// APIBucketList is the answer of GET /api/buckets (every bucket,
// one page at a time) and of "balde buckets list --json".
type APIBucketList struct {
	Buckets []APIBucket `json:"buckets"`
	// Next is the cursor (key order) or page number (sorted) of the next
	// page, NextURL the same as a path with the filter kept; both are
	// absent on the last page. Partial is set when a filter stopped at
	// inspect.MaxScan rows.
	Next    string `json:"next,omitempty"`
	NextURL string `json:"next_url,omitempty"`
	Partial bool   `json:"partial,omitempty"`
}

// listAPIBuckets is GET /api/buckets with the admin list's query (see
// bucketQuery: policy, env, identifier, severity, state, sort, after,
// page, limit); every policy (a lot waiting for its result is no bucket).
func (s *Server) listAPIBuckets(w http.ResponseWriter, r *http.Request) error {
	lq, err := bucketQuery(r)
	if err != nil {
		return err
	}
	lq.Tab = "all"
	list, err := s.list(r.Context(), lq)
	if err != nil {
		return err
	}
	out := NewAPIBucketList(list.States, s.Scope)
	out.Partial = list.Partial
	if list.Next != nil {
		out.Next = list.Next.Get("after")
		if out.Next == "" {
			out.Next = list.Next.Get("page")
		}
		list.Next.Del("trail")
		out.NextURL = s.pathWithQuery("apiBuckets", list.Next)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// getAPIBucket is GET /api/buckets/{policy}/{env}/{identifier} : one bucket's
// state. A key with no row is a full bucket
// ("stored": false); an unknown policy is a 404.
func (s *Server) getAPIBucket(w http.ResponseWriter, r *http.Request) error {
	key, err := bucketKey(r)
	if err != nil {
		return err
	}
	st, err := s.Limiter.State(r.Context(), key)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, NewAPIBucket(st, s.Scope))
	return nil
}
