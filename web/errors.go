package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"balde/throttle"
)

// Errors of the web layer. Handlers return them (wrapped with detail when
// useful); Server.Error turns them into responses.
var (
	// ErrNotFound: no route, or no such thing behind the route.
	ErrNotFound = errors.New("web: not found")
	// ErrMethodNotAllowed: the path exists but not for this method.
	ErrMethodNotAllowed = errors.New("web: method not allowed")
	// ErrBadRequest: a malformed query or form.
	ErrBadRequest = errors.New("web: bad request")
	// ErrUnauthorized: the admin credential is missing or wrong.
	ErrUnauthorized = errors.New("web: authentication required")
	// ErrCrossOrigin: a state-changing request from another origin (CSRF).
	ErrCrossOrigin = errors.New("web: cross-origin request refused")
	// ErrUnhealthy: the health check failed (store unreachable, migrations
	// not current).
	ErrUnhealthy = errors.New("web: unhealthy")
)

// RateLimitError is a request refused by the inbound limiter.
type RateLimitError struct {
	// Policy is the inbound policy that refused ("ip" or "token").
	Policy string
	// RetryAfter is the exact wait until a request would be admitted: the
	// remaining block time after the limit was exceeded.
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("web: too many requests (%s limit): retry in %s", e.Policy, formatWait(e.RetryAfter))
}

// storeRetryAfter is the Retry-After sent with a 503 when the store is
// unavailable: long enough not to hammer a database that is restarting.
const storeRetryAfter = 5 * time.Second

// statusClientClosed is logged (nginx's convention) when the client went
// away before the answer; nobody reads the response.
const statusClientClosed = 499

// problem is an error as the client sees it.
type problem struct {
	status     int
	message    string
	retryAfter time.Duration
}

// problemOf maps err to a status and a public message. It is the only
// mapping from errors to statuses in balde: keep it complete and ordered.
func problemOf(r *http.Request, err error) problem {
	var rl *RateLimitError
	switch {
	case errors.As(err, &rl):
		return problem{http.StatusTooManyRequests, publicMessage(err), rl.RetryAfter}
	case errors.Is(err, ErrNotFound):
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.Is(err, throttle.ErrUnknownPolicy):
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.Is(err, ErrMethodNotAllowed):
		return problem{http.StatusMethodNotAllowed, "method not allowed", 0}
	case errors.Is(err, ErrBadRequest),
		errors.Is(err, throttle.ErrInvalidKey),
		errors.Is(err, throttle.ErrInvalidCost),
		errors.Is(err, throttle.ErrInvalidAdjustment):
		return problem{http.StatusBadRequest, publicMessage(err), 0}
	case errors.Is(err, ErrUnauthorized):
		return problem{http.StatusUnauthorized, "authentication required", 0}
	case errors.Is(err, ErrCrossOrigin):
		return problem{http.StatusForbidden, "cross-origin request refused: submit the form from balde's own pages", 0}
	case errors.Is(err, ErrUnhealthy):
		return problem{http.StatusServiceUnavailable, "unhealthy: the store is unreachable or its migrations are not current", storeRetryAfter}
	case errors.Is(err, throttle.ErrStoreUnavailable):
		return problem{http.StatusServiceUnavailable, "the store is unavailable", storeRetryAfter}
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return problem{statusClientClosed, "request canceled", 0}
	case errors.Is(err, context.DeadlineExceeded):
		return problem{http.StatusServiceUnavailable, "the request took too long", storeRetryAfter}
	}
	return problem{http.StatusInternalServerError, "internal error", 0}
}

// publicMessage is err's text without the package prefixes ("web: ",
// "throttle: "), which mean nothing to a client. It is only used for 4xx
// errors, whose text describes the client's own input.
func publicMessage(err error) string {
	msg := err.Error()
	for _, p := range []string{"web: ", "throttle: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// Error writes the response for err: its status, a Retry-After when there
// is a wait, and an HTML page or a JSON body depending on the route. Only
// server errors (5xx) are logged, with the request id; client errors are
// the client's business (the request log has them).
func (s *Server) Error(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(r, err)
	info := requestInfoFrom(r.Context())
	if p.status >= 500 {
		s.Logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", info.id),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", p.status),
			slog.Any("error", err))
	}
	if p.status == statusClientClosed {
		w.WriteHeader(p.status)
		return
	}

	h := w.Header()
	if p.retryAfter > 0 {
		h.Set("Retry-After", retryAfterSeconds(p.retryAfter))
	}
	if p.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="balde admin", charset="UTF-8"`)
	}
	h.Set("Cache-Control", "no-store")

	if info.format(r) == formatJSON {
		body := struct {
			Status     int     `json:"status"`
			Error      string  `json:"error"`
			RetryAfter float64 `json:"retry_after_seconds,omitempty"`
			RequestID  string  `json:"request_id,omitempty"`
		}{p.status, p.message, p.retryAfter.Seconds(), info.id}
		s.writeJSON(w, r, p.status, body)
		return
	}
	page := errorPage{
		layout:     s.layout(r, ""),
		Status:     p.status,
		StatusText: http.StatusText(p.status),
		Message:    p.message,
	}
	if p.retryAfter > 0 {
		page.RetryAfter = formatWait(p.retryAfter)
	}
	if err := s.render(w, p.status, page); err != nil {
		// The error page itself failed: answer in plain text rather than
		// with half a page.
		s.Logger.Error("render error page", slog.String("request_id", info.id), slog.Any("error", err))
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(p.status)
		fmt.Fprintf(w, "%d %s: %s\n", p.status, http.StatusText(p.status), p.message)
	}
}

// errorPage is error.html.
type errorPage struct {
	layout
	Status     int
	StatusText string
	Message    string
	RetryAfter string
}

func (errorPage) templateFile() string { return "error.html" }

// writeJSON encodes v into a buffer first, so an encoding error becomes a
// clean 500 instead of a truncated body.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		if status < 500 {
			s.Error(w, r, fmt.Errorf("web: encode JSON: %w", err))
			return
		}
		buf.Reset()
		buf.WriteString(`{"status":500,"error":"internal error"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// retryAfterSeconds renders a wait as the whole seconds of a Retry-After
// header, rounded up so a client that waits that long is admitted.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(ceilSeconds(d), 10)
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
