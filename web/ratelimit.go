package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/gorilla/mux"

	"github.com/balde-throttle/balde/internal/storebound"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// limitInbound charges one request to the client's inbound bucket (the
// admin's own on an admin route carrying the admin credential, else its
// API token's, else its IP's) and refuses it with 429 when the limit is
// exceeded or the client is blocked. A request the same Inbound already
// charged passes uncharged. Every limited response carries the IETF
// RateLimit headers, e.g.
//
//	RateLimit-Policy: "ip";q=120;w=60
//	RateLimit: "ip";r=42;t=18
//
// and a refusal Retry-After. When the store is down and the policy fails
// open, the request passes with RateLimit-Policy only.
func (s *Server) limitInbound(next http.Handler, rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := s.Inbound
		if in == nil || in.charged(r) || !in.applies(s.BasePath+r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		var admin string
		if rt.admin {
			admin = s.knownAdmin(r)
		}
		in.charge(w, r, requestInfoFrom(r.Context()).clientIP, admin, s.Error, next)
	})
}

// routedAdmin returns the admin an application's request to one of s's
// admin routes carries, or "" (for Inbound.Middleware).
func (s *Server) routedAdmin(r *http.Request) string {
	var m mux.RouteMatch
	if !s.router.Match(s.relative(r), &m) || m.Route == nil ||
		!slices.ContainsFunc(s.table, func(rt route) bool { return rt.admin && rt.name == m.Route.GetName() }) {
		return ""
	}
	return s.knownAdmin(r)
}

// Middleware is the inbound limiter for any router: every request under
// Paths and not exempt is charged to its client's bucket (the named
// client's, its API token's, else its IP's), answered with the RateLimit
// headers, and refused with InboundConfig.Refused when the limit is
// exceeded or the client is blocked. A Server using the same Inbound
// behind it does not charge a request again, and a request to its admin
// routes is charged as the Server would. Put it before the app's
// authentication. It panics when built without in.Limiter.
func (in *Inbound) Middleware(next http.Handler) http.Handler {
	if in.Limiter == nil {
		panic("web: Inbound.Middleware: the inbound limiter needs its throttle.Limiter")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if in.charged(r) || !in.applies(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		// One bound on the store writes of the request (docs/decisions/0190).
		ctx, release := storebound.With(r.Context(), storebound.Request)
		defer release()
		r = r.WithContext(ctx)
		in.charge(w, r, clientIP(r, in.cfg.TrustedProxies, in.cfg.ForwardedHeader), in.mountedAdmin(r), in.cfg.Refused, next)
	})
}

// chargedKey marks a request's context with the *Inbound that charged it,
// so that it is not charged twice.
type chargedKey struct{}

func (in *Inbound) charged(r *http.Request) bool {
	by, _ := r.Context().Value(chargedKey{}).(*Inbound)
	return by == in
}

// charge charges r to its bucket (see key), writes the RateLimit headers
// and serves r with next once admitted. Otherwise refuse answers err: a
// *rateLimitError when r is refused, the store's error when the limiter
// cannot decide and fails closed.
func (in *Inbound) charge(w http.ResponseWriter, r *http.Request, client netip.Addr, admin string, refuse func(http.ResponseWriter, *http.Request, error), next http.Handler) {
	var named string
	if in.cfg.Client != nil {
		named, _ = in.cfg.Client(r)
	}
	key, name, p := in.key(admin, named, r.Header.Get(in.cfg.TokenHeader), limitIdentifier(client))
	d, err := in.Limiter.Take(r.Context(), "", throttle.Charge{Key: key, Cost: 1})
	if err == nil {
		setRateLimitHeaders(w.Header(), name, p, d)
		if !d.Allowed {
			err = &rateLimitError{Policy: name, RetryAfter: d.RetryAfter}
		}
	}
	if err != nil {
		refuse(w, r, err)
		return
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chargedKey{}, in)))
}

// writeRefusedPlain is Middleware's default answer to a refusal: 429 (or
// 503 when the store failed closed) with Retry-After and one line of text.
func writeRefusedPlain(w http.ResponseWriter, _ *http.Request, err error) {
	p := newProblem(http.StatusServiceUnavailable, "the rate limiter's store is unavailable: retry later", storeRetryAfter)
	var rl *rateLimitError
	if errors.As(err, &rl) {
		p = newProblem(http.StatusTooManyRequests, "too many requests: retry in "+view.FormatWait(rl.RetryAfter), rl.RetryAfter)
	}
	p.write(w, "text/plain; charset=utf-8", []byte(p.message+"\n"))
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
