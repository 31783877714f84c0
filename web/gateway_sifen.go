package web

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// DefaultSifenGatewayHold is how long the SIFEN gateway holds a lot by
// default for its RUC's gate before it answers a fault instead: within
// the 90 s a SIFEN client waits, with 15 s left for SIFEN's answer
// (docs/decisions/0168).
const DefaultSifenGatewayHold = 75 * time.Second

// sifenGatewayMaxRequest bounds a request: a lot's message and its
// envelope.
const sifenGatewayMaxRequest = 2 << 20

// SifenGatewayConfig configures NewSifenGateway.
type SifenGatewayConfig struct {
	// Sender is the one send path of documents (balde.Engine.Sifen).
	// Required.
	Sender *sifen.Sender
	// Client reaches SIFEN for the services passed through (siConsDE,
	// siConsRUC, siRecepEvento). Nil answers them 501.
	Client *sifen.Client
	// AllowUnsigned lets unsigned events into the test environment, as
	// SenderConfig.AllowUnsigned does DEs (never into prod).
	AllowUnsigned bool
	// Env is the SIFEN environment the gateway stands for (test or prod).
	Env sifen.Env
	// Hold is how long a lot waits for its RUC's gate before the gateway
	// answers a fault instead: 0 is DefaultSifenGatewayHold, negative never
	// holds. Held lots of one RUC go in the order they arrived.
	Hold time.Duration
	// Sleep waits d or until ctx ends (its error then). Nil: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Authenticate names the client of a request (GatewayClients.
	// Authenticate), or says ok false: a 401, nothing reaches SIFEN.
	// Required.
	Authenticate func(r *http.Request) (client string, ok bool)
	// Audit, when set, records each lot, DE and event with its client and
	// outcome (audit.ActionGateway).
	Audit audit.Store
	// Metrics, when set, counts the requests by client and status
	// (balde_gateway_requests_total).
	Metrics *Metrics
	// Logger receives the gateway's logs, one line per request naming its
	// client; nil logs nowhere.
	Logger *slog.Logger
}

// sifenGateway is the gateway NewSifenGateway returns.
type sifenGateway struct {
	gateway
	sender   *sifen.Sender
	client   *sifen.Client
	unsigned bool // unsigned events pass (test only)
	env      sifen.Env
	hold     time.Duration
	sleep    func(context.Context, time.Duration) error
	lines    rucLines
	// parsing bounds the lots inflated and parsed at once (CPU and memory).
	parsing chan struct{}
}

// NewSifenGateway returns a SOAP 1.2 endpoint in front of SIFEN for issuers whose
// systems are not written in Go (a Python web app and its batch
// tools, say): they change SIFEN's base URL and nothing else.
//
//   - siRecepLoteDE (…/de/ws/async/recibe-lote.wsdl): the lot (xDE, the
//     base64 of the zipped rLoteDE, at most 8 MiB inflated) is parsed as it
//     is inflated and checked whole (one RUC, one type, at most 50 DEs, at
//     most 1,000,000 bytes, signatures, CDCs not already sent), then sent
//     by sifen.Sender.SendNew through the RUC's gate, stored only once the
//     gate admits it: a refused request leaves no document behind. While
//     the gate says wait, the request is held (up to Hold); SIFEN's answer
//     is returned as rResEnviLoteDe and recorded like any other send.
//   - siResultLoteDE (…/de/ws/consultas/consulta-lote.wsdl): asked through
//     sifen.Sender.QueryLot (its own throttle), the results recorded on
//     the documents, answered as rResEnviConsLoteDe.
//   - siRecepDE (…/de/ws/sync/recibe.wsdl): one DE, gated and held as a
//     lot of one (sifen.Sender.SendNewDE), answered as rRetEnviDe and
//     recorded on the document.
//   - siConsDE, siConsRUC and siRecepEvento: checked and passed through
//     byte for byte over Client, not gated.
//
// Without a client's credential a request is a 401 fault. What the gateway
// refuses is a SOAP 1.2 fault, never a made-up SIFEN code: a throttle
// refusal is a 429 with Retry-After naming the RUC's wait; a broken rule,
// 400; a CDC already sent, 409; no SIFEN service, 501. Safe for concurrent
// use; everything on one database shares every RUC's gate.
func NewSifenGateway(cfg SifenGatewayConfig) (http.Handler, error) {
	if cfg.Sender == nil {
		return nil, errors.New("web: SIFEN gateway needs a Sender")
	}
	if err := cfg.Env.Validate(); err != nil {
		return nil, fmt.Errorf("web: SIFEN gateway: %w", err)
	}
	if cfg.AllowUnsigned && cfg.Env != sifen.EnvTest {
		return nil, errors.New("web: SIFEN gateway: unsigned events are for the test environment only")
	}
	g := &sifenGateway{sender: cfg.Sender, client: cfg.Client, unsigned: cfg.AllowUnsigned, env: cfg.Env,
		hold: cmp.Or(cfg.Hold, DefaultSifenGatewayHold), sleep: cfg.Sleep,
		parsing: make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))}
	var err error
	if g.gateway, err = newGateway("sifen", cfg.Authenticate, cfg.Audit, cfg.Metrics, cfg.Logger, g.serve, problem.writeSOAPFault); err != nil {
		return nil, err
	}
	if g.sleep == nil {
		g.sleep = throttle.SleepContext
	}
	return g, nil
}

// serve answers the request of a known client.
func (g *sifenGateway) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fmt.Errorf("%w: SIFEN services are SOAP 1.2 over POST", errMethodNotAllowed)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, sifenGatewayMaxRequest+1))
	if err != nil || len(data) > sifenGatewayMaxRequest {
		return fmt.Errorf("%w: the request could not be read whole (a lot's message is at most 1,000,000 bytes)", errTooLarge)
	}
	switch {
	case strings.HasSuffix(r.URL.Path, sifen.RecepcionPath):
		return g.receiveLot(w, r, data)
	case strings.HasSuffix(r.URL.Path, sifen.ConsultaLotePath):
		return g.queryLot(w, r, data)
	case strings.HasSuffix(r.URL.Path, sifen.RecepcionDEPath):
		return g.receiveDE(w, r, data)
	case strings.HasSuffix(r.URL.Path, sifen.ConsultaPath):
		return g.passThrough(w, r, data, sifen.ServiceConsultaDE, sifen.ConsultaPath, checkConsultaDE)
	case strings.HasSuffix(r.URL.Path, sifen.ConsultaRUCPath):
		return g.passThrough(w, r, data, sifen.ServiceConsultaRUC, sifen.ConsultaRUCPath, checkConsultaRUC)
	case strings.HasSuffix(r.URL.Path, sifen.EventoPath):
		return g.passThrough(w, r, data, sifen.ServiceEvento, sifen.EventoPath, g.checkEvento)
	}
	return fmt.Errorf("%w: %s is not a SIFEN service", errNotImplemented, r.URL.Path)
}

// receiveLot is siRecepLoteDE.
func (g *sifenGateway) receiveLot(w http.ResponseWriter, r *http.Request, data []byte) error {
	req, err := soapBody[sifen.EnvioLote](data)
	if err != nil {
		return fmt.Errorf("%w: not a siRecepLoteDE request (rEnvioLote)", errBadRequest)
	}
	call := callOf(r)
	call.target = "service=" + sifen.ServiceRecepcionLote
	zipped, err := base64.StdEncoding.DecodeString(strings.TrimSpace(req.XDE))
	if err != nil {
		return fmt.Errorf("%w: xDE is not base64", errBadRequest)
	}
	if err := sifen.CheckMessageSize(len(zipped)); err != nil {
		return fmt.Errorf("%w: %w", errBadRequest, err)
	}
	lot, err := g.parseLot(r.Context(), zipped)
	if err != nil {
		return fmt.Errorf("%w: xDE: %w", errBadRequest, err)
	}
	call.target = lotTarget(sifen.ServiceRecepcionLote, g.env, lot)
	out, err := g.admit(r, func() (sifen.LotSend, error) { return g.sender.SendNew(r.Context(), g.env, lot) })
	if err != nil {
		return err
	}
	call.outcome.Set("code", out.Code)
	answer := sifenEl("rResEnviLoteDe", sifenText("dFecProc", formatSifenTime(out.ProcessedAt)),
		sifenText("dCodRes", out.Code), sifenText("dMsgRes", out.Message))
	if out.LotNumber != "" {
		answer.children = append(answer.children, sifenText("dProtConsLote", out.LotNumber))
		call.outcome.Set("lot", out.LotNumber)
	}
	writeAnswer(w, answer)
	return nil
}

// parseLot parses the zipped lot of xDE (sifen.ParseLoteZip), at most
// cap(g.parsing) at once.
func (g *sifenGateway) parseLot(ctx context.Context, zipped []byte) (sifen.Lote, error) {
	select {
	case g.parsing <- struct{}{}:
		defer func() { <-g.parsing }()
	case <-ctx.Done():
		return sifen.Lote{}, ctx.Err()
	}
	return sifen.ParseLoteZip(ctx, zipped)
}

// lotTarget is the audit target of a lot or DE of service.
func lotTarget(service string, env sifen.Env, lot sifen.Lote) string {
	v := url.Values{"service": {service}, "env": {string(env)}, "des": {strconv.Itoa(len(lot.DEs))}}
	if len(lot.DEs) > 0 {
		v.Set("ruc", lot.DEs[0].RUC.Number)
		v.Set("cdc", lot.DEs[0].CDC)
	}
	return v.Encode()
}

// admit runs send (one try through the RUC's gate) until the gate admits
// it, holding the request while the gate says wait (at most g.hold, in
// order of arrival per RUC), and returns SIFEN's answer, or the error to
// answer when there is none to pass on.
func (g *sifenGateway) admit(r *http.Request, send func() (sifen.LotSend, error)) (sifen.LotSend, error) {
	deadline := time.Now().Add(g.hold)
	var leave func() // of the RUC's line, once joined
	defer func() {
		if leave != nil {
			leave()
		}
	}()
	for {
		out, err := send()
		if err != nil {
			return out, err
		}
		switch out.Status {
		case sifen.OutcomeBlocked:
			b := out.Blocked()
			if g.hold < 0 || time.Until(deadline) < b.Wait || b.Reason == throttle.ReasonBlocked {
				return out, &throttle.RefusedError{Op: "sifen lot of RUC " + out.RUC.Number, Decision: *out.Decision}
			}
			if leave == nil {
				// Wait for this request's turn, then try at once.
				if leave, err = g.lines.wait(r.Context(), sifen.RecepcionKey(out.Env, out.RUC), deadline); err != nil {
					if r.Context().Err() == nil {
						return out, &throttle.RefusedError{Op: "sifen lot of RUC " + out.RUC.Number + " (held behind the RUC's other lots)", Decision: *out.Decision}
					}
					return out, err // the client went away: nothing was stored
				}
				continue
			}
			if err := g.sleep(r.Context(), b.Wait); err != nil {
				return out, err // the client went away: nothing was stored
			}
		case sifen.OutcomeSent:
			return out, nil
		case sifen.OutcomeNotQueued:
			if out.Code == "" {
				// A SOAP fault or an unreadable answer of SIFEN: no code to pass on.
				return out, upstream("SIFEN did not take the request: "+out.Message, false, nil)
			}
			return out, nil
		case sifen.OutcomeFailed:
			return out, upstream("SIFEN could not be reached, nothing was sent: "+out.Message, false, nil)
		default: // OutcomeUnknown
			return out, upstream("SIFEN's answer was lost; it may have been received and is resolved by balde (do not send it again): "+out.Message, true, nil)
		}
	}
}

// rucLines are the RUCs' lines of held requests in this process, served
// in order of arrival (docs/decisions/0168).
type rucLines struct {
	mu    sync.Mutex
	lines map[throttle.Key]*rucLine
}

// rucLine is one RUC's line.
type rucLine struct {
	turn  chan struct{} // holding its one slot is the turn
	users int
}

// wait joins key's line and returns once it is the request's turn, or the
// error of ctx or of the deadline; leave, to call in either case, ends its
// place in line (and its turn).
func (ls *rucLines) wait(ctx context.Context, key throttle.Key, deadline time.Time) (leave func(), err error) {
	ls.mu.Lock()
	if ls.lines == nil {
		ls.lines = make(map[throttle.Key]*rucLine)
	}
	l := ls.lines[key]
	if l == nil {
		l = &rucLine{turn: make(chan struct{}, 1)}
		ls.lines[key] = l
	}
	l.users++
	ls.mu.Unlock()
	own := false
	leave = func() {
		if own {
			<-l.turn
		}
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(ls.lines, key)
		}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case l.turn <- struct{}{}:
		own = true
		return leave, nil
	case <-ctx.Done():
		return leave, ctx.Err()
	}
}

// queryLot is siResultLoteDE.
func (g *sifenGateway) queryLot(w http.ResponseWriter, r *http.Request, data []byte) error {
	req, err := soapBody[sifen.ConsultaLote](data)
	if err != nil {
		return fmt.Errorf("%w: not a siResultLoteDE request (rEnviConsLoteDe)", errBadRequest)
	}
	lo, err := g.sender.QueryLot(r.Context(), g.env, strings.TrimSpace(req.LotNumber))
	switch {
	case err != nil:
		return err
	case lo.NotDue:
		// DNIT's schedule of lot queries: nothing was asked.
		return &notDueError{what: "the next query of lot " + lo.LotNumber, wait: lo.Wait}
	case lo.Code == "":
		return upstream("SIFEN did not answer: "+lo.Message, false, nil)
	default:
		answer := sifenEl("rResEnviConsLoteDe", sifenText("dFecProc", formatSifenTime(time.Now())),
			sifenText("dCodResLot", lo.Code), sifenText("dMsgResLot", lo.Message))
		for _, r := range lo.Results {
			res := sifenEl("gResProcLote", sifenText("id", r.CDC), sifenText("dEstRes", r.Status))
			if r.AuthNumber != "" {
				res.children = append(res.children, sifenText("dProtAut", r.AuthNumber))
			}
			for _, m := range r.Messages {
				res.children = append(res.children, sifenEl("gResProc", sifenText("dCodRes", m.Code), sifenText("dMsgRes", m.Message)))
			}
			answer.children = append(answer.children, res)
		}
		writeAnswer(w, answer)
		return nil
	}
}

func formatSifenTime(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return t.Format(sifen.TimeLayout)
}

// sifenElement is an element of an answer: text or children.
type sifenElement struct {
	name     string
	text     string
	children []sifenElement
}

func sifenText(name, text string) sifenElement { return sifenElement{name: name, text: text} }
func sifenEl(name string, children ...sifenElement) sifenElement {
	return sifenElement{name: name, children: children}
}

// write writes e, its start tag with attrs.
func (e sifenElement) write(b *bytes.Buffer, attrs string) {
	b.WriteString("<ns2:" + e.name + attrs + ">")
	if e.children == nil {
		_ = xml.EscapeText(b, []byte(e.text))
	}
	for _, c := range e.children {
		c.write(b, "")
	}
	b.WriteString("</ns2:" + e.name + ">")
}

// writeAnswer writes a SOAP 1.2 answer as SIFEN writes its own, with the
// prefixes env and ns2 its clients read them by.
func writeAnswer(w http.ResponseWriter, body sifenElement) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>`)
	b.WriteString(`<env:Envelope xmlns:env="` + sifen.SOAPNamespace + `"><env:Header/><env:Body>`)
	body.write(&b, ` xmlns:ns2="`+sifen.Namespace+`"`)
	b.WriteString(`</env:Body></env:Envelope>`)
	writeBody(w, http.StatusOK, sifen.SOAPContentType, b.Bytes())
}
