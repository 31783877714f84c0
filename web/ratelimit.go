package web

import (
	"fmt"
	"net/http"

	"github.com/balde-throttle/balde/throttle"
)

// limitInbound charges one request to the client's inbound bucket (its API
// token's when it carries a configured one, its IP's otherwise) and refuses
// it with 429 when the limit is exceeded or the client is blocked.
//
// Every limited response carries the IETF RateLimit headers
// (draft-ietf-httpapi-ratelimit-headers), e.g.
//
//	RateLimit-Policy: "ip";q=120;w=60
//	RateLimit: "ip";r=42;t=18
//
// q is the limit, w the window in seconds, r the requests left and t the
// seconds until the window is whole again (on a refusal r is 0 and t the
// wait). A refusal also carries Retry-After: the remaining block time,
// rounded up to whole seconds. When the store is down and the policy fails
// open, the request passes with RateLimit-Policy only (nothing is known
// about the bucket).
func (s *Server) limitInbound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := s.Inbound
		if in == nil || !in.applies(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		info := requestInfoFrom(r.Context())
		key, name, p := in.key(r.Header.Get(TokenHeader), limitIdentifier(info.clientIP))
		d, err := in.Limiter.Take(r.Context(), "", throttle.Charge{Key: key, Cost: 1})
		if err != nil {
			s.Error(w, r, err)
			return
		}
		setRateLimitHeaders(w.Header(), name, p, d)
		if !d.Allowed {
			s.Error(w, r, &RateLimitError{Policy: name, RetryAfter: d.RetryAfter})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// setRateLimitHeaders writes RateLimit-Policy and RateLimit for decision d
// of the inbound policy p, named name in the headers.
func setRateLimitHeaders(h http.Header, name string, p throttle.Policy, d throttle.Decision) {
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", name, p.Capacity, ceilSeconds(p.RefillPeriod)))
	if d.FailOpen {
		return
	}
	remaining, reset := max(d.Remaining, 0), d.ResetAfter
	if !d.Allowed {
		remaining, reset = 0, max(d.RetryAfter, d.ResetAfter)
	}
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", name, remaining, ceilSeconds(reset)))
}
