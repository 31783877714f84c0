package web

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status written, 200 when none was.
func (w *statusWriter) code() int { return cmp.Or(w.status, http.StatusOK) }

// observe is the outermost middleware of route rt: it puts the request's
// info in its context, gives the request an id, echoed in X-Request-Id,
// shown on error pages and in every log line about the request, sets the
// security headers, records the status and size (statusWriter), turns a
// panic into a logged 500 (when nothing was written yet;
// http.ErrAbortHandler is re-raised: it is net/http's way to abort),
// records the HTTP metrics by route template ("unmatched" for none) and,
// with Server.LogRequests, logs one line per request.
func (s *Server) observe(next http.Handler, rt route) http.Handler {
	template := cmp.Or(rt.path, "unmatched")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &requestInfo{route: &rt, id: r.Header.Get("X-Request-Id"), clientIP: clientIP(r, s.TrustedProxies, "X-Forwarded-For")}
		if !requestIDPattern.MatchString(info.id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			info.id = hex.EncodeToString(b[:])
		}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		w.Header().Set("X-Request-Id", info.id)
		setSecurityHeaders(w.Header(), r, rt)
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		// Deferred, so that a panic is answered, counted and logged as the
		// 500 it became.
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Logger.Error("panic", slog.String("request_id", info.id),
					slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				if sw.status == 0 {
					s.Error(sw, r, fmt.Errorf("web: panic: %v", v))
				}
			}
			s.observed(r, rt, template, info, sw, time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}

// observed counts a request's answer in the HTTP metrics and, when
// LogRequests is set, logs it.
func (s *Server) observed(r *http.Request, rt route, template string, info *requestInfo, sw *statusWriter, elapsed time.Duration) {
	status := sw.code()
	s.Metrics.observeHTTP(template, r.Method, status, elapsed)
	if !s.LogRequests {
		return
	}
	level := slog.LevelInfo
	if rt.probe || rt.name == "metrics" || rt.name == "static" || rt.name == "favicon" {
		level = slog.LevelDebug // probes and scrapes would drown the log
	}
	s.Logger.LogAttrs(r.Context(), level, "request",
		slog.String("request_id", info.id),
		slog.String("method", r.Method),
		slog.String("route", template),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Int64("bytes", sw.bytes),
		slog.Duration("duration", elapsed),
		slog.String("client", info.clientIP.String()),
		slog.String("user", info.user))
}

// requestIDPattern is what an incoming X-Request-Id must look like to be
// kept.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// contentSecurityPolicy allows nothing but balde's own static files and
// forms posting to itself.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; " +
	"script-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// setSecurityHeaders sets the security headers of every response to r.
// Admin and API answers are never cached; static files may be, briefly.
func setSecurityHeaders(h http.Header, r *http.Request, rt route) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if rt.name == "static" || rt.name == "favicon" {
		h.Set("Cache-Control", "public, max-age=3600")
	} else {
		h.Set("Cache-Control", "no-store")
	}
}

// authenticate requires a user (Server.Authenticate, else HTTP basic) and
// puts the user and role in the request's info; a write route needs
// RoleAdmin: a viewer gets errReadOnly (403), recorded in the audit trail.
func (s *Server) authenticate(next http.Handler, rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := requestInfoFrom(r.Context())
		user, role := "", RoleAdmin
		if s.Authenticate != nil {
			if user = s.knownAdmin(r); user != "" && s.RoleOf != nil {
				role = s.RoleOf(r, user)
			}
		} else if name, pass, ok := r.BasicAuth(); ok {
			if user, role = s.auth.check(name, pass); user == "" {
				s.Logger.Warn("admin authentication failed",
					slog.String("request_id", info.id),
					slog.String("client", info.clientIP.String()))
			}
		}
		if user == "" {
			s.Error(w, r, errUnauthorized)
			return
		}
		info.user, info.role = user, role
		if rt.write && info.role != RoleAdmin {
			s.recordDenied(w, r, rt)
			s.Error(w, r, errReadOnly)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// knownAdmin returns the user that sent r when that is cheap to tell (""
// otherwise), for the inbound limiter to charge the user's own bucket.
func (s *Server) knownAdmin(r *http.Request) string {
	if s.Authenticate != nil {
		if user, ok := s.Authenticate(r); ok {
			return user
		}
		return ""
	}
	user, pass, _ := r.BasicAuth()
	return s.auth.known(user, pass)
}

// metricsTokenOK reports whether r may scrape /metrics: Server.MetricsToken
// is empty, or r sends "Authorization: Bearer <token>" (constant-time
// compare).
func (s *Server) metricsTokenOK(r *http.Request) bool {
	if s.MetricsToken == "" {
		return true
	}
	want := sha256.Sum256([]byte(s.MetricsToken))
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got := sha256.Sum256([]byte(token))
	return ok && subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

const maxFormBytes = 64 << 10

// parseForm reads a POST form of at most maxFormBytes; a malformed or
// oversized one is a bad request.
func parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: form larger than %d bytes", errBadRequest, maxFormBytes)
		}
		return fmt.Errorf("%w: %v", errBadRequest, strings.TrimPrefix(err.Error(), "http: "))
	}
	return nil
}
