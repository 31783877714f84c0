package web

import (
	"net/http"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// apiBucket is one bucket in the JSON API: seed 003's bucket document, with
// the policy and waits a monitor needs. Durations are in seconds.
type apiBucket struct {
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
	// is seed 003's AlertSeverity number (1..4, 0 unknown).
	Severity          string     `json:"severity"`
	SeverityLevel     int        `json:"severity_level"`
	CooldownSeconds   float64    `json:"cooldown_remaining_seconds"`
	BlockSeconds      float64    `json:"block_remaining_seconds"`
	RetryAfterSeconds float64    `json:"retry_after_seconds"`
	UntilFullSeconds  float64    `json:"until_full_seconds"`
	LastSentAt        *time.Time `json:"last_sent_at"`
	SendCount         int64      `json:"send_count"`
	// Stored is false for a key with no row (a full bucket); Orphan is set
	// for a row whose policy is no longer known.
	Stored bool      `json:"stored"`
	Orphan bool      `json:"orphan,omitempty"`
	At     time.Time `json:"at"`
}

func newAPIBucket(st throttle.BucketState) apiBucket {
	b := apiBucket{
		Policy:              st.Key.Policy,
		Env:                 st.Key.Env,
		Identifier:          st.Key.Identifier,
		Tokens:              st.Tokens,
		Capacity:            st.Policy.Capacity,
		RefillTokens:        st.Policy.RefillTokens,
		RefillPeriodSeconds: st.Policy.RefillPeriod.Seconds(),
		Severity:            st.Severity.String(),
		SeverityLevel:       int(st.Severity),
		CooldownSeconds:     st.CooldownLeft.Seconds(),
		BlockSeconds:        st.BlockLeft.Seconds(),
		RetryAfterSeconds:   st.RetryAfter.Seconds(),
		UntilFullSeconds:    st.UntilFull.Seconds(),
		SendCount:           st.SendCount,
		Stored:              st.Stored,
		Orphan:              st.Orphan,
		At:                  st.At.UTC(),
	}
	if !st.Orphan {
		b.RefillMode = st.Policy.Refill.String()
	}
	if !st.LastSentAt.IsZero() {
		t := st.LastSentAt.UTC()
		b.LastSentAt = &t
	}
	return b
}

// apiBucketList is the answer of GET /api/buckets (seed 003's
// GetAllBuckets, one page at a time).
type apiBucketList struct {
	Buckets []apiBucket `json:"buckets"`
	// Next is the cursor of the next page, NextURL the same as a path with
	// the filter kept; both are absent on the last page.
	Next    string `json:"next,omitempty"`
	NextURL string `json:"next_url,omitempty"`
}

// listAPIBuckets is GET /api/buckets?policy=&env=&identifier=&after=&limit=:
// stored buckets in key order, keyset-paginated (limit 1..1000, default 50).
// identifier is a prefix.
func (s *Server) listAPIBuckets(w http.ResponseWriter, r *http.Request) error {
	f, err := bucketFilter(r)
	if err != nil {
		return err
	}
	page, err := s.Limiter.List(r.Context(), f)
	if err != nil {
		return err
	}
	out := apiBucketList{Buckets: make([]apiBucket, 0, len(page.States))}
	for _, st := range page.States {
		out.Buckets = append(out.Buckets, newAPIBucket(st))
	}
	if page.Next != "" {
		next := filterQuery(f)
		next.Set("after", page.Next)
		out.Next, out.NextURL = page.Next, s.pathWithQuery("apiBuckets", next)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// getAPIBucket is GET /api/buckets/{policy}/{env}/{identifier} (seed 003's
// GetBucket): one bucket's state. A key with no row is a full bucket
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
	s.writeJSON(w, r, http.StatusOK, newAPIBucket(st))
	return nil
}
