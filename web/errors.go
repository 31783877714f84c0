package web

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Errors of the web layer, wrapped with detail when useful; problemOf maps
// them to statuses.
var (
	errNotFound         = errors.New("web: not found")
	errMethodNotAllowed = errors.New("web: method not allowed")
	errBadRequest       = errors.New("web: bad request")
	errUnauthorized     = errors.New("web: authentication required")
	errCrossOrigin      = errors.New("web: cross-origin request refused") // CSRF
	errUnhealthy        = errors.New("web: unhealthy")                    // the health check failed
	// errForbidden: the request names someone else (another
	// PI-RequestingParticipant).
	errForbidden      = errors.New("web: forbidden")
	errReadOnly       = errors.New("web: this action needs the admin role; viewers can only read")
	errTooLarge       = errors.New("web: request body too large")
	errNotImplemented = errors.New("web: not implemented") // a service a gateway does not serve
)

// rateLimitError is a request refused by the inbound limiter: Policy
// ("ip", "token", ...) and the exact wait until it would be admitted.
type rateLimitError struct {
	Policy     string
	RetryAfter time.Duration
}

func (e *rateLimitError) Error() string {
	return fmt.Sprintf("web: too many requests (%s limit): retry in %s", e.Policy, view.FormatWait(e.RetryAfter))
}

// HeaderLocalRefusal is set ("local") on a 429 of a local refusal: the
// mirror refused and nothing was sent to the DICT or SIFEN.
const HeaderLocalRefusal = "Balde-Refused"

// notDueError is a "not yet" of a schedule (a SIFEN lot's next query):
// 429 with the wait, nothing was asked.
type notDueError struct {
	what string
	wait time.Duration
}

func (e *notDueError) Error() string {
	return fmt.Sprintf("web: %s is not due yet; nothing was asked, ask again after %d s", e.what, ceilSeconds(e.wait))
}

// nowhere is the logger of a gateway built without one: it logs nothing.
var nowhere = slog.New(slog.DiscardHandler)

// storeRetryAfter is the Retry-After of a 503 for an unavailable store.
const storeRetryAfter = 5 * time.Second

// statusClientClosed is logged (nginx's convention) when the client went
// away before the answer.
const statusClientClosed = 499

// problem is an outcome as a client reads it, in whatever format: the
// HTML page, JSON, the DICT's problem+xml or a SOAP 1.2 fault. refused is
// the local refusal behind a 429.
type problem struct {
	status     int
	message    string
	retryAfter time.Duration
	refused    *throttle.Decision
}

// newProblem is a problem with a Retry-After of at least 1 s on a 429 (a
// client told "0" would come straight back).
func newProblem(status int, message string, retryAfter time.Duration) problem {
	if status == http.StatusTooManyRequests {
		retryAfter = max(retryAfter, time.Second)
	}
	return problem{status: status, message: message, retryAfter: retryAfter}
}

// problemOf maps err to what the client reads: status, public message,
// Retry-After and DICT problem type. It is balde's only mapping from errors
// to statuses (docs/decisions/0131): every handler and both gateways render
// its result. Keep it complete and ordered.
func problemOf(r *http.Request, err error) problem {
	var (
		rl      *rateLimitError
		refused *throttle.RefusedError
		remote  *dict.RemoteError
		notDue  *notDueError
		up      *upstreamError
	)
	msg := publicMessage(err)
	switch {
	case errors.As(err, &rl):
		return newProblem(http.StatusTooManyRequests, msg, rl.RetryAfter)
	case errors.As(err, &refused):
		// A local refusal: the limiter's bucket, reason and wait
		// (docs/decisions/0130).
		d := refused.Decision
		p := newProblem(http.StatusTooManyRequests, fmt.Sprintf("%s refused locally: bucket %s is %s, retry in %s; nothing was sent, send again after %d s",
			refused.Op, d.Key, d.Reason, view.FormatWait(d.RetryAfter), ceilSeconds(max(d.RetryAfter, time.Second))), d.RetryAfter)
		p.refused = &d
		return p
	case errors.As(err, &notDue):
		return newProblem(http.StatusTooManyRequests, msg, notDue.wait)

	// The DICT's own answers keep their meaning for a 404 and a 429 and
	// are a bad gateway otherwise.
	case errors.As(err, &remote) && remote.NotFound():
		return newProblem(http.StatusNotFound, msg, 0)
	case errors.As(err, &remote) && remote.Status == http.StatusTooManyRequests:
		return newProblem(http.StatusTooManyRequests, msg, remote.RetryAfter)
	case errors.As(err, &remote):
		return newProblem(http.StatusBadGateway, msg, remote.RetryAfter)
	}
	for _, c := range sentinelProblems {
		if isAny(err, c.errs) {
			return newProblem(c.status, cmp.Or(c.message, msg), c.retryAfter)
		}
	}
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return newProblem(statusClientClosed, "request canceled", 0)
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(http.StatusServiceUnavailable, "the request took too long", storeRetryAfter)
	// What a gateway forwards to failed: its own words, not the cause's.
	case errors.As(err, &up) && up.lost:
		return newProblem(http.StatusGatewayTimeout, up.msg, 0)
	case errors.As(err, &up):
		return newProblem(http.StatusBadGateway, up.msg, 0)
	}
	return newProblem(http.StatusInternalServerError, "internal error", 0)
}

// dictInputErrors are bad input to a DICT lookup or payment (a 400).
var dictInputErrors = []error{dict.ErrInvalidKey, dict.ErrInvalidPayerID, dict.ErrInvalidEndToEndID, dict.ErrInvalidISPB}

// sentinelProblems map the errors problemOf finds with errors.Is, in
// order: message "" is the error's public text.
var sentinelProblems = []struct {
	errs       []error
	status     int
	message    string
	retryAfter time.Duration
}{
	{errs: []error{dict.ErrMalformedResponse}, status: http.StatusBadGateway},
	{errs: []error{dict.ErrUnknownEndToEndID, sifen.ErrNotFound, errNotFound, throttle.ErrUnknownPolicy}, status: http.StatusNotFound},
	{errs: []error{dict.ErrNotPayable, sifen.ErrNotSendable, sifen.ErrCDCInFlight, sifen.ErrLotAlreadySent}, status: http.StatusConflict},
	{errs: slices.Concat(dictInputErrors, []error{
		// A SIFEN document or lot that breaks a rule.
		sifen.ErrInvalidEnv, sifen.ErrMalformedXML, sifen.ErrMissingRUC, sifen.ErrInvalidRUC,
		sifen.ErrInvalidDV, sifen.ErrInvalidCDC, sifen.ErrInvalidType, sifen.ErrUnfit, sifen.ErrInvalidLotNumber,
		sifen.ErrLotEmpty, sifen.ErrLotTooManyDEs, sifen.ErrLotMixedTypes, sifen.ErrLotMixedRUC, sifen.ErrLotMixedEnv,
		sifen.ErrLotDuplicateCDC, sifen.ErrLotTooBig,
		errBadRequest, throttle.ErrInvalidKey, throttle.ErrInvalidCost, throttle.ErrInvalidAdjustment, throttle.ErrInvalidQuery,
	}), status: http.StatusBadRequest},
	{errs: []error{sifen.ErrRemote, sifen.ErrNoResponse}, status: http.StatusBadGateway},
	{errs: []error{sifen.ErrNoRecepcionDE, errNotImplemented}, status: http.StatusNotImplemented},
	{errs: []error{errMethodNotAllowed}, status: http.StatusMethodNotAllowed},
	{errs: []error{errTooLarge}, status: http.StatusRequestEntityTooLarge},
	{errs: []error{errUnauthorized}, status: http.StatusUnauthorized, message: "authentication required"},
	{errs: []error{errReadOnly}, status: http.StatusForbidden, message: "this action needs the admin role; viewers can only read"},
	{errs: []error{errForbidden}, status: http.StatusForbidden},
	{errs: []error{errCrossOrigin}, status: http.StatusForbidden, message: "cross-origin request refused: submit the form from balde's own pages"},
	{errs: []error{errUnhealthy}, status: http.StatusServiceUnavailable,
		message: "unhealthy: the store is unreachable or its migrations are not current", retryAfter: storeRetryAfter},
	{errs: []error{throttle.ErrStoreUnavailable}, status: http.StatusServiceUnavailable, message: "the store is unavailable", retryAfter: storeRetryAfter},
}

// isAny reports whether err is one of errs.
func isAny(err error, errs []error) bool {
	return slices.ContainsFunc(errs, func(e error) bool { return errors.Is(err, e) })
}

// upstreamError is a failure of the DICT or SIFEN behind a gateway: 502,
// or 504 when the answer was lost. msg is what the client reads; err,
// logged, is why.
type upstreamError struct {
	msg  string
	lost bool
	err  error
}

func upstream(msg string, lost bool, err error) error { return &upstreamError{msg, lost, err} }

func (e *upstreamError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *upstreamError) Unwrap() error { return e.err }

// publicPrefixes are the package prefixes of error texts.
var publicPrefixes = []string{"web: ", "throttle: ", "dict: ", "sifen: "}

// publicMessage is err's text without the package prefixes, which mean
// nothing to a client; only 4xx and 502 answers show it.
func publicMessage(err error) string {
	msg := err.Error()
	for _, p := range publicPrefixes {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// logProblem logs a server error (5xx) with the request.
func logProblem(l *slog.Logger, r *http.Request, p problem, err error, attrs ...slog.Attr) {
	if p.status < 500 {
		return
	}
	l.LogAttrs(r.Context(), slog.LevelError, "request failed", append(attrs,
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", p.status), slog.Any("error", err))...)
}

// write writes p's answer: the headers every error answer carries
// (setHeaders), the status, and contentType and body unless the client
// went away.
func (p problem) write(w http.ResponseWriter, contentType string, body []byte) {
	p.setHeaders(w.Header())
	if p.status == statusClientClosed {
		w.WriteHeader(p.status)
		return
	}
	writeBody(w, p.status, contentType, body)
}

// setHeaders sets Retry-After when there is a wait, HeaderLocalRefusal on
// a local refusal, and no caching.
func (p problem) setHeaders(h http.Header) {
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(p.retryAfter), 10)) // whole seconds, rounded up
	}
	if p.refused != nil {
		h.Set(HeaderLocalRefusal, "local")
	}
	h.Set("Cache-Control", "no-store")
}

// writeXML renders p as the DICT writes its errors: an RFC 7807
// problem+xml; a local refusal names its policy in a violation.
func (p problem) writeXML(w http.ResponseWriter, correlationID string) {
	doc := dict.NewProblem(dict.ProblemType(p.status), p.status, http.StatusText(p.status), p.message)
	doc.CorrelationID = correlationID
	if p.refused != nil {
		doc.Violations = &dict.Violations{Violation: []dict.Violation{{Reason: p.refused.Reason.String(), Property: "policy", Value: p.refused.Key.Policy}}}
	}
	data, err := dict.Marshal(doc)
	if err != nil {
		// A problem of plain strings always encodes; keep the status anyway.
		data = []byte(dict.XMLHeader)
	}
	p.write(w, dict.ContentTypeProblemXML, data)
}

// writeSOAPFault renders p as SIFEN writes a SOAP 1.2 fault: code Sender
// for a 4xx other than 429, Receiver otherwise; the reason starts "balde: ".
func (p problem) writeSOAPFault(w http.ResponseWriter) {
	code := "env:Receiver"
	if p.status < 500 && p.status != http.StatusTooManyRequests {
		code = "env:Sender"
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>`)
	b.WriteString(`<env:Envelope xmlns:env="` + sifen.SOAPNamespace + `"><env:Body><env:Fault><env:Code><env:Value>` + code)
	b.WriteString(`</env:Value></env:Code><env:Reason><env:Text xml:lang="en">`)
	_ = xml.EscapeText(&b, []byte("balde: "+p.message))
	b.WriteString(`</env:Text></env:Reason></env:Fault></env:Body></env:Envelope>`)
	p.write(w, sifen.SOAPContentType, b.Bytes())
}

// writeJSON renders p as balde's JSON API writes its errors.
func (p problem) writeJSON(w http.ResponseWriter, requestID string) {
	body, _ := indentedJSON(struct {
		Status     int     `json:"status"`
		Error      string  `json:"error"`
		RetryAfter float64 `json:"retry_after_seconds,omitempty"`
		RequestID  string  `json:"request_id,omitempty"`
	}{p.status, p.message, p.retryAfter.Seconds(), requestID})
	p.write(w, "application/json; charset=utf-8", body)
}

// Error writes the response for err (problemOf) as an HTML page, JSON or a
// DICT problem depending on the route, logging a 5xx.
func (s *Server) Error(w http.ResponseWriter, r *http.Request, err error) {
	p := s.prepareError(w, r, err)
	info := requestInfoFrom(r.Context())
	switch info.format(r) {
	case formatJSON:
		p.writeJSON(w, info.id)
	case formatXML:
		p.writeXML(w, "")
	default:
		s.writeErrorPage(w, r, p)
	}
}

// writeErrorPage renders p as error.html.
func (s *Server) writeErrorPage(w http.ResponseWriter, r *http.Request, p problem) {
	if p.status == statusClientClosed {
		p.write(w, "", nil)
		return
	}
	l := s.layout(r, "", "error.html")
	page := errorPage{
		layout:     l,
		Status:     p.status,
		StatusText: l.T.Text(http.StatusText(p.status)),
		Message:    l.T.Text(p.message), // a message not in the catalog stays as it is
	}
	if p.retryAfter > 0 {
		page.RetryAfter = view.FormatWait(p.retryAfter)
	}
	if p.status == http.StatusTooManyRequests {
		// Every other page is limited by the same bucket: link only to a
		// retry, and reload once the wait is over.
		page.Nav = nil
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			page.RetryURL = s.BasePath + r.URL.RequestURI() // as the client sees it
			page.HomeURL = page.RetryURL
			page.Refresh = int(ceilSeconds(p.retryAfter))
		}
	}
	p.setHeaders(w.Header())
	if err := s.render(w, p.status, page); err != nil {
		// The error page itself failed: answer in plain text.
		s.Logger.Error("render error page", slog.String("request_id", requestInfoFrom(r.Context()).id), slog.Any("error", err))
		p.write(w, "text/plain; charset=utf-8", fmt.Appendf(nil, "%d %s: %s\n", p.status, http.StatusText(p.status), p.message))
	}
}

// prepareError maps err (problemOf), logs a 5xx and sets the headers of
// its answer (setHeaders, and the basic-auth challenge on a 401), for Error
// and for a handler that renders its own page for an error.
func (s *Server) prepareError(w http.ResponseWriter, r *http.Request, err error) problem {
	p, info := problemOf(r, err), requestInfoFrom(r.Context())
	logProblem(s.Logger, r, p, err, slog.String("request_id", info.id))
	p.setHeaders(w.Header())
	if p.status == http.StatusUnauthorized && s.Authenticate == nil && info.route.name != "metrics" {
		w.Header().Set("WWW-Authenticate", `Basic realm="balde admin", charset="UTF-8"`)
	}
	return p
}

// errorPage is error.html.
type errorPage struct {
	layout
	Status     int
	StatusText string
	Message    string
	RetryAfter string
	RetryURL   string // on a 429, the refused page: the only link shown
}

// writeJSON encodes v whole before writing: an encoding error is a 500.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := indentedJSON(v)
	if err != nil {
		if status < 500 {
			s.Error(w, r, fmt.Errorf("web: encode JSON: %w", err))
			return
		}
		body = []byte(`{"status":500,"error":"internal error"}` + "\n")
	}
	writeBody(w, status, "application/json; charset=utf-8", body)
}

// indentedJSON is v as balde's JSON answers write it: indented, ending in
// a line feed.
func indentedJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
