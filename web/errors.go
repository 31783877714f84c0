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

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
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
	// ErrForbidden: the request names someone else (a
	// PI-RequestingParticipant that is not the configured participant).
	ErrForbidden = errors.New("web: forbidden")
	// ErrReadOnly: a viewer asked for an action that changes state (a
	// reset, a send, a lookup): only admins may.
	ErrReadOnly = errors.New("web: this action needs the admin role; viewers can only read")
	// ErrTooLarge: an upload larger than the server accepts.
	ErrTooLarge = errors.New("web: request body too large")
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
	return fmt.Sprintf("web: too many requests (%s limit): retry in %s", e.Policy, FormatWait(e.RetryAfter))
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
// Handlers that render their own page for an outcome (the DICT lookup page
// shows a refusal) take the status from here too.
func problemOf(r *http.Request, err error) problem {
	var (
		rl      *RateLimitError
		refused *throttle.RefusedError
		remote  *dict.RemoteError
	)
	switch {
	case errors.As(err, &rl):
		return problem{http.StatusTooManyRequests, publicMessage(err), rl.RetryAfter}

	// The DICT: a local refusal was not sent (429, as the DICT would
	// answer, with the exact wait); the DICT's own answers keep their
	// meaning for a 404 and a 429 and are a bad gateway otherwise.
	case errors.As(err, &refused):
		d := refused.Decision
		return problem{http.StatusTooManyRequests, fmt.Sprintf("refused by the local DICT mirror: bucket %s / %s is %s, retry in %s",
			d.Key.Policy, d.Key.Identifier, d.Reason, FormatWait(d.RetryAfter)), d.RetryAfter}
	case errors.As(err, &remote) && remote.NotFound():
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.As(err, &remote) && remote.Status == http.StatusTooManyRequests:
		return problem{http.StatusTooManyRequests, publicMessage(err), remote.RetryAfter}
	case errors.As(err, &remote), errors.Is(err, dict.ErrMalformedResponse):
		return problem{http.StatusBadGateway, publicMessage(err), remoteRetryAfter(remote)}
	case errors.Is(err, dict.ErrUnknownEndToEndID):
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.Is(err, dict.ErrNotPayable):
		return problem{http.StatusConflict, publicMessage(err), 0}
	case isDictInputError(err):
		return problem{http.StatusBadRequest, publicMessage(err), 0}

	// SIFEN: bad documents are the client's input; a document in the
	// wrong state is a conflict; SIFEN's failures are a bad gateway.
	case errors.Is(err, sifen.ErrNotFound):
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.Is(err, sifen.ErrNotSendable),
		errors.Is(err, sifen.ErrCDCInFlight),
		errors.Is(err, sifen.ErrLotAlreadySent):
		return problem{http.StatusConflict, publicMessage(err), 0}
	case errors.Is(err, sifen.ErrInvalidEnv),
		errors.Is(err, sifen.ErrMalformedXML),
		errors.Is(err, sifen.ErrMissingRUC),
		errors.Is(err, sifen.ErrInvalidRUC),
		errors.Is(err, sifen.ErrInvalidDV),
		errors.Is(err, sifen.ErrInvalidCDC),
		errors.Is(err, sifen.ErrInvalidType),
		errors.Is(err, sifen.ErrUnfit),
		errors.Is(err, sifen.ErrInvalidLotNumber),
		errors.Is(err, sifen.ErrLotEmpty),
		errors.Is(err, sifen.ErrLotTooManyDEs),
		errors.Is(err, sifen.ErrLotMixedTypes),
		errors.Is(err, sifen.ErrLotMixedRUC),
		errors.Is(err, sifen.ErrLotMixedEnv),
		errors.Is(err, sifen.ErrLotDuplicateCDC),
		errors.Is(err, sifen.ErrLotTooBig):
		return problem{http.StatusBadRequest, publicMessage(err), 0}
	case errors.Is(err, sifen.ErrRemote), errors.Is(err, sifen.ErrNoResponse):
		return problem{http.StatusBadGateway, publicMessage(err), 0}

	case errors.Is(err, ErrNotFound):
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.Is(err, throttle.ErrUnknownPolicy):
		return problem{http.StatusNotFound, publicMessage(err), 0}
	case errors.Is(err, ErrMethodNotAllowed):
		return problem{http.StatusMethodNotAllowed, "method not allowed", 0}
	case errors.Is(err, ErrBadRequest),
		errors.Is(err, throttle.ErrInvalidKey),
		errors.Is(err, throttle.ErrInvalidCost),
		errors.Is(err, throttle.ErrInvalidAdjustment),
		errors.Is(err, throttle.ErrInvalidQuery):
		return problem{http.StatusBadRequest, publicMessage(err), 0}
	case errors.Is(err, ErrTooLarge):
		return problem{http.StatusRequestEntityTooLarge, publicMessage(err), 0}
	case errors.Is(err, ErrUnauthorized):
		return problem{http.StatusUnauthorized, "authentication required", 0}
	case errors.Is(err, ErrReadOnly):
		return problem{http.StatusForbidden, "this action needs the admin role; viewers can only read", 0}
	case errors.Is(err, ErrForbidden):
		return problem{http.StatusForbidden, publicMessage(err), 0}
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

// isDictInputError reports whether err is bad input to a DICT lookup or
// payment: nothing was taken or sent (a 400). The lookup page shows it
// beside the form.
func isDictInputError(err error) bool {
	return errors.Is(err, dict.ErrInvalidKey) || errors.Is(err, dict.ErrInvalidPayerID) ||
		errors.Is(err, dict.ErrInvalidEndToEndID) || errors.Is(err, dict.ErrInvalidISPB)
}

// remoteRetryAfter is the Retry-After of a DICT answer (0 without one).
func remoteRetryAfter(e *dict.RemoteError) time.Duration {
	if e == nil {
		return 0
	}
	return e.RetryAfter
}

// publicPrefixes are the package prefixes of error texts, which mean
// nothing to a client.
var publicPrefixes = []string{"web: ", "throttle: ", "dict: ", "sifen: "}

// publicMessage is err's text without the package prefixes ("web: ",
// "throttle: ", ...), which mean nothing to a client. It is only used for
// 4xx errors, whose text describes the client's own input, and for the
// answers of the DICT and SIFEN (502), which the admin needs to read.
func publicMessage(err error) string {
	msg := err.Error()
	for _, p := range publicPrefixes {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// Error writes the response for err: its status, a Retry-After when there
// is a wait, and an HTML page, a JSON body or a DICT problem (XML)
// depending on the route. Only server errors (5xx) are logged, with the
// request id; client errors are the client's business (the request log
// has them).
func (s *Server) Error(w http.ResponseWriter, r *http.Request, err error) {
	p := s.prepareError(w, r, err)
	if p.status == statusClientClosed {
		w.WriteHeader(p.status)
		return
	}
	info := requestInfoFrom(r.Context())
	switch info.format(r) {
	case formatJSON:
		body := struct {
			Status     int     `json:"status"`
			Error      string  `json:"error"`
			RetryAfter float64 `json:"retry_after_seconds,omitempty"`
			RequestID  string  `json:"request_id,omitempty"`
		}{p.status, p.message, p.retryAfter.Seconds(), info.id}
		s.writeJSON(w, r, p.status, body)
		return
	case formatXML:
		s.writeProblemXML(w, p)
		return
	}
	l := s.layout(r, "")
	page := errorPage{
		layout:     l,
		Status:     p.status,
		StatusText: l.T.Text(http.StatusText(p.status)),
		// The fixed messages are in the catalog; a message quoting the
		// request (a bad key, DICT's or SIFEN's answer) stays as it is.
		Message: l.T.Text(p.message),
	}
	if p.retryAfter > 0 {
		page.RetryAfter = FormatWait(p.retryAfter)
	}
	if p.status == http.StatusTooManyRequests {
		// Every other page of balde is limited by the same bucket: the
		// page links only to a retry of the refused request, and reloads
		// itself once the wait is over.
		page.Nav = nil
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			page.RetryURL = s.requestURL(r)
			page.HomeURL = page.RetryURL
			page.Refresh = int(ceilSeconds(p.retryAfter))
		}
	}
	if err := s.render(w, p.status, page); err != nil {
		// The error page itself failed: answer in plain text rather than
		// with half a page.
		s.Logger.Error("render error page", slog.String("request_id", info.id), slog.Any("error", err))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(p.status)
		fmt.Fprintf(w, "%d %s: %s\n", p.status, http.StatusText(p.status), p.message)
	}
}

// prepareError maps err (problemOf), logs it when it is a server error,
// and sets the headers every error answer carries: Retry-After when there
// is a wait, the basic-auth challenge on a 401, no caching. Handlers that
// render their own page for an error (the DICT lookup page) call it, then
// write the page with the returned status.
func (s *Server) prepareError(w http.ResponseWriter, r *http.Request, err error) problem {
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
	h := w.Header()
	if p.retryAfter > 0 {
		h.Set("Retry-After", retryAfterSeconds(p.retryAfter))
	}
	if p.status == http.StatusUnauthorized && s.Authenticate == nil && info.route.name != "metrics" {
		h.Set("WWW-Authenticate", `Basic realm="balde admin", charset="UTF-8"`)
	}
	h.Set("Cache-Control", "no-store")
	return p
}

// problemTypes name the DICT problem type of a status, for the
// DICT-format endpoints (the part after dict.ProblemTypePrefix).
var problemTypes = map[int]string{
	http.StatusBadRequest:          dict.ProblemBadRequest,
	http.StatusForbidden:           dict.ProblemForbidden,
	http.StatusNotFound:            dict.ProblemNotFound,
	http.StatusMethodNotAllowed:    "MethodNotAllowed",
	http.StatusTooManyRequests:     dict.ProblemRateLimited,
	http.StatusInternalServerError: dict.ProblemInternalServerError,
	http.StatusServiceUnavailable:  dict.ProblemServiceUnavailable,
}

// writeProblemXML writes p as the DICT writes its errors: an RFC 7807
// problem in XML (application/problem+xml).
func (s *Server) writeProblemXML(w http.ResponseWriter, p problem) {
	typ, ok := problemTypes[p.status]
	if !ok {
		typ = dict.ProblemBadRequest
		if p.status >= 500 {
			typ = dict.ProblemInternalServerError
		}
	}
	data, err := dict.Marshal(dict.NewProblem(typ, p.status, http.StatusText(p.status), p.message))
	if err != nil {
		// A problem of plain strings always encodes; keep the status anyway.
		data = []byte(dict.XMLHeader)
	}
	w.Header().Set("Content-Type", dict.ContentTypeProblemXML)
	w.WriteHeader(p.status)
	_, _ = w.Write(data)
}

// errorPage is error.html.
type errorPage struct {
	layout
	Status     int
	StatusText string
	Message    string
	RetryAfter string
	// RetryURL, on a 429, is the refused page: the only link shown.
	RetryURL string
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
