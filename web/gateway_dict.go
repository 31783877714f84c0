package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/audit"
)

// dictGatewayPaymentsPath is the gateway's own endpoint for payment
// orders: POST ?endToEndId=E2E credits the mirror for the pacs.008 of a
// lookup it forwarded.
const dictGatewayPaymentsPath = "/gateway/payments"

// paymentCreditor credits the payment order of a lookup once
// (*dict.Client).
type paymentCreditor interface {
	CreditPayment(ctx context.Context, endToEndID string) (dict.PaymentCredit, error)
}

// DictGatewayConfig configures NewDictGateway.
type DictGatewayConfig struct {
	// Target is the DICT's base URL (https://dict.pi.rsfn.net.br:16422);
	// a request's path (/api/v2/…) and query are appended to it. Required.
	Target string
	// PoliciesURL is the base URL of GET /policies/ when it lives on its
	// own host (https://dict-ratelimit.pi.rsfn.net.br:16422); "": Target.
	PoliciesURL string
	// Participant is the ISPB every request is sent and charged for: a
	// request without PI-RequestingParticipant gets it, one naming another
	// is a 403. Required.
	Participant string
	// Meter is the local mirror (balde.Engine.Dict().Meter()). Required.
	Meter dict.Meter
	// Records keeps every getEntry (for payment credits and the anti-scan
	// pages) and the category learned from GET /policies/. Optional.
	Records dict.Records
	// Payments credits POST DictGatewayPaymentsPath (balde.Engine.Dict());
	// nil: the endpoint answers 404.
	Payments paymentCreditor
	// Base sends the requests to the DICT (the PSP's mutual TLS transport).
	// Nil: http.DefaultTransport.
	Base http.RoundTripper
	// Signer, when set, signs the body of write operations before they are
	// forwarded; without it bodies pass byte for byte (the client signs).
	Signer dict.Signer
	// Authenticate names the client of a request (GatewayClients.
	// Authenticate), or says ok false: a 401, nothing charged or sent.
	// Required.
	Authenticate func(r *http.Request) (client string, ok bool)
	// Audit, when set, records each write operation and payment credit
	// with its client and status (audit.ActionGateway).
	Audit audit.Store
	// Metrics, when set, counts the requests by client and status
	// (balde_gateway_requests_total).
	Metrics *Metrics
	// Logger receives the gateway's logs, one line per request naming its
	// client (Info for writes, Debug for reads); nil logs nowhere.
	Logger *slog.Logger
}

// dictGateway is the gateway NewDictGateway returns.
type dictGateway struct {
	gateway
	target, policies *url.URL
	participant      string
	payments         paymentCreditor
	signer           dict.Signer
	proxy            *httputil.ReverseProxy
}

// NewDictGateway returns a reverse proxy for the DICT API that throttles
// every request with the local mirror, for DICT clients not written in Go:
// only their base URL changes. A dict.Transport reserves, forwards and
// settles each request exactly as dict.Client does. Bodies pass byte for
// byte, unless Signer signs writes.
//
// The gateway's own answers are RFC 7807 problems in XML, as the DICT's,
// and nothing is taken or sent: 401 without a client's credential, 413
// past dict.MaxBodySize, 429 for a local refusal (Retry-After,
// HeaderLocalRefusal), 404 for no DICT operation, 400 for bad input, 403
// for another participant, 502 for the DICT unreachable, 503 for the
// database. A 200 to GET /policies/ lowers every local bucket holding more
// than the DICT reports.
//
// POST /gateway/payments?endToEndId=E2E credits a payment and answers
// JSON: {"endToEndId", "duplicate", "credited": [{"policy", "applied",
// "balance"}]}; 400 for a malformed EndToEndId, 404 for one never looked
// up, 409 for a lookup that found no entry.
//
// Safe for concurrent use; several gateways on one database admit
// together what one would. Errors say which setting is wrong (an ISPB
// error wraps dict.ErrInvalidISPB).
func NewDictGateway(cfg DictGatewayConfig) (http.Handler, error) {
	if err := dict.ValidateISPB(cfg.Participant); err != nil {
		return nil, fmt.Errorf("web: DICT gateway participant: %w", err)
	}
	if cfg.Meter.Limiter == nil || cfg.Meter.Catalog == nil {
		return nil, errors.New("web: DICT gateway needs a Meter (its Limiter and Catalog)")
	}
	target, err := gatewayBaseURL(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("web: DICT gateway target: %w", err)
	}
	policies, policiesAPI := target, "" // policiesAPI: the Transport's PoliciesURL
	if cfg.PoliciesURL != "" {
		if policies, err = gatewayBaseURL(cfg.PoliciesURL); err != nil {
			return nil, fmt.Errorf("web: DICT gateway policies URL: %w", err)
		}
		policiesAPI = strings.TrimSuffix(policies.String(), "/") + dict.APIPrefix
	}
	g := &dictGateway{target: target, policies: policies, participant: cfg.Participant, payments: cfg.Payments, signer: cfg.Signer}
	if g.gateway, err = newGateway("dict", cfg.Authenticate, cfg.Audit, cfg.Metrics, cfg.Logger, g.serve, func(p problem, w http.ResponseWriter) {
		p.writeXML(w, dict.NewCorrelationID(cfg.Participant, cfg.Meter.Limiter.Now()))
	}); err != nil {
		return nil, err
	}
	t := &dict.Transport{Base: cfg.Base, Meter: cfg.Meter, Participant: cfg.Participant, Records: cfg.Records, Reconcile: true, PoliciesURL: policiesAPI, Logger: g.logger}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:   g.rewrite,
		Transport: t,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.fail(w, r, upstream("the DICT did not answer", false, err))
		},
		ErrorLog: slog.NewLogLogger(g.logger.Handler(), slog.LevelError),
	}
	return g, nil
}

// gatewayBaseURL parses an http(s) base URL, without a trailing APIPrefix.
func gatewayBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(s, "/"), dict.APIPrefix))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// serve answers the request of a known client.
func (g *dictGateway) serve(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Path == dictGatewayPaymentsPath {
		return g.creditPayment(w, r)
	}
	rt, _, ok := dict.MatchRoute(r.Method, r.URL.Path)
	if !ok {
		return fmt.Errorf("%w: not a DICT operation: %s %s", errNotFound, r.Method, r.URL.Path)
	}
	if rt.Write {
		callOf(r).target = "op=" + rt.Op
	}
	switch p := r.Header.Get(dict.HeaderRequestingParticipant); {
	case p == "":
		r.Header.Set(dict.HeaderRequestingParticipant, g.participant)
	case p != g.participant:
		return fmt.Errorf("%w: %s %s is not this gateway's participant", errForbidden, dict.HeaderRequestingParticipant, p)
	}
	// The body is read whole before anything is reserved.
	body, err := readDictBody(r)
	if err != nil {
		return err
	}
	if rt.Write && g.signer != nil {
		if body, err = g.signer.Sign(r.Context(), rt.Op, body); err != nil {
			return fmt.Errorf("web: DICT gateway: sign %s: %w", rt.Op, err)
		}
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	g.proxy.ServeHTTP(w, r)
	return nil
}

// readDictBody reads r's body: nil for none, errTooLarge (413) past
// dict.MaxBodySize.
func readDictBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close()
	tooLarge := fmt.Errorf("%w: a DICT request's body is at most %d bytes (1 MiB); nothing was sent", errTooLarge, dict.MaxBodySize)
	if r.ContentLength > dict.MaxBodySize {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, dict.MaxBodySize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: the body could not be read whole: %v", errBadRequest, err)
	case len(body) > dict.MaxBodySize:
		return nil, tooLarge
	}
	return body, nil
}

// rewrite points the outgoing request at the DICT (or the policies host),
// keeping the client's path, query and headers.
func (g *dictGateway) rewrite(pr *httputil.ProxyRequest) {
	base := g.target
	if rt, _, _ := dict.MatchRoute(pr.In.Method, pr.In.URL.Path); strings.HasPrefix(rt.Path, "/policies/") {
		base = g.policies
	}
	pr.SetURL(base)
	pr.Out.Host = base.Host
}

// gatewayCredit is one bucket of a payment credit, in the JSON answer.
type gatewayCredit struct {
	Policy    string `json:"policy"`
	Applied   int64  `json:"applied"`
	Balance   int64  `json:"balance"`
	Duplicate bool   `json:"duplicate"`
}

// creditPayment is POST DictGatewayPaymentsPath?endToEndId=E2E.
func (g *dictGateway) creditPayment(w http.ResponseWriter, r *http.Request) error {
	if g.payments == nil {
		return fmt.Errorf("%w: payments are not configured", errNotFound)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fmt.Errorf("%w: POST %s?endToEndId=E2E", errMethodNotAllowed, dictGatewayPaymentsPath)
	}
	e2e := r.URL.Query().Get("endToEndId")
	callOf(r).target = "op=creditPayment&endToEndId=" + url.QueryEscape(e2e)
	pc, err := g.payments.CreditPayment(r.Context(), e2e)
	if err != nil {
		return err
	}
	out := struct {
		EndToEndID string          `json:"endToEndId"`
		Duplicate  bool            `json:"duplicate"`
		Credited   []gatewayCredit `json:"credited"`
	}{EndToEndID: e2e, Duplicate: pc.Duplicate, Credited: []gatewayCredit{}}
	for _, a := range pc.Adjusted {
		out.Credited = append(out.Credited, gatewayCredit{Policy: a.Key.Policy, Applied: a.Applied, Balance: a.Balance, Duplicate: a.Duplicate})
	}
	body, _ := json.Marshal(out) // strings, numbers and booleans always encode
	writeBody(w, http.StatusOK, "application/json", append(body, '\n'))
	return nil
}
