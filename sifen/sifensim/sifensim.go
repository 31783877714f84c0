// Package sifensim is a SIFEN simulator: a SOAP 1.2 server for the three
// services balde uses (siRecepLoteDE, siResultLoteDE, siConsDE) that
// enforces SIFEN's rules server-side, so that `make run` works with no
// credentials and tests run against a real HTTP peer.
//
// What it does:
//
//   - siRecepLoteDE validates the envelope (a SOAP fault otherwise) and the
//     lot, answering 0301 with a message naming the broken rule (not base64,
//     not a ZIP, malformed XML, a bad RUC, check digit or CDC, no DE, more
//     than 50, mixed types, mixed RUCs, a repeated CDC, more than 1000 KB
//     compressed). A RUC that resends a queued lot, or sends again less than
//     Interval after its last queued lot, is blocked for Block: that request
//     and every lot of the RUC until the block ends get 0301. A CDC still
//     processing in another lot gets 0301. Otherwise 0300 and a 17-digit lot
//     number.
//   - siResultLoteDE answers 0360 for an unknown lot, 0361 while the lot is
//     processing (Processing after it was queued), 0362 with a result per DE
//     after that (approved, or rejected when the CDC was already approved or
//     Config.Reject says so), and 0364 48 hours after the lot was queued.
//   - siConsDE answers 0422 for an approved CDC and 0420 otherwise.
//   - GET /sim/stats answers the counts of requests by service, environment,
//     RUC and response code (Stats); GET /sim/clock the simulator's time;
//     POST /sim/clock?advance=DURATION moves a fake clock (Config.Advance).
//
// The services are served at SIFEN's paths, under /test or /prod to pick
// the environment ("/test/de/ws/async/recibe-lote.wsdl"), or without a
// prefix for Config.Env. Serve the handler yourself (httptest.NewServer),
// or let Open listen; then point a sifen.Client at it with
// ClientConfig{BaseURL: URL() + "/{env}"}.
package sifensim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Defaults of Config.
const (
	DefaultInterval   = 10 * time.Second
	DefaultBlock      = 10 * time.Minute
	DefaultProcessing = 2 * time.Second
	// lotQueryWindow is how long a lot can be queried (0364 after).
	lotQueryWindow = 48 * time.Hour
	// maxRequestBytes bounds a request body.
	maxRequestBytes = 8 << 20
	// firstLotNumber makes lot numbers 17 digits long, like SIFEN's.
	firstLotNumber = 10_000_000_000_000_001
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// Clock is the simulator's time; default throttle.SystemClock.
	Clock throttle.Clock
	// Advance, when set, moves Clock forward (POST /sim/clock?advance=D);
	// without it that endpoint answers 404.
	Advance func(time.Duration) time.Time
	// Interval is the least time between two queued lots of one RUC in one
	// environment; default DefaultInterval. Negative disables the rule.
	Interval time.Duration
	// Block is how long a RUC is blocked after breaking a rule; default
	// DefaultBlock.
	Block time.Duration
	// Processing is how long a lot stays in processing; default
	// DefaultProcessing. Negative means no processing time.
	Processing time.Duration
	// Env is the environment of the paths without /test or /prod; default
	// test.
	Env sifen.Env
	// BeforeRecepcion, when set, is called for every parsed siRecepLoteDE
	// before it is decided; an error drops the request as if it was lost
	// (HTTP 503, nothing recorded). Tests use it to hold a request.
	BeforeRecepcion func(ctx context.Context, r Recepcion) error
	// AfterRecepcion, when set, is called once a siRecepLoteDE is decided
	// and recorded, before the answer is written. Tests use it to hold an
	// answer that the sender will never read.
	AfterRecepcion func(ctx context.Context, r Recepcion)
	// Reject, when set, decides per DE of a processed lot: reject with
	// code and message when ok is true.
	Reject func(env sifen.Env, de sifen.DE) (code, message string, ok bool)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Recepcion describes one siRecepLoteDE for the hooks.
type Recepcion struct {
	Env sifen.Env
	RUC sifen.RUC
	// CDCs are the lot's DEs.
	CDCs []string
	// Code, Message and LotNumber are the answer (empty in BeforeRecepcion).
	Code, Message, LotNumber string
}

// Server is the simulator: an http.Handler, which Open also serves on a
// listener of its own. Safe for concurrent use.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	logger *slog.Logger
	ln     net.Listener // set by Open
	srv    *http.Server // set by Open

	mu      sync.Mutex
	closed  bool
	rucs    map[rucKey]*rucState
	lots    map[string]*lot // by lot number
	queued  map[hashKey]string
	cdcs    map[cdcKey]*cdcState
	pending []*lot // queued lots not processed yet
	nextLot uint64
	nextAut uint64
	stats   map[Count]int64
}

var _ http.Handler = (*Server)(nil)

type rucKey struct {
	env sifen.Env
	ruc string
}

type rucState struct {
	lastQueued   time.Time
	blockedUntil time.Time
}

type hashKey struct {
	env  sifen.Env
	hash string
}

type cdcKey struct {
	env sifen.Env
	cdc string
}

type cdcState struct {
	lot      string
	ruc      string
	approved bool
	rejected bool
	xml      []byte
	aut      string
}

type lot struct {
	number   string
	env      sifen.Env
	ruc      sifen.RUC
	des      []sifen.DE
	queuedAt time.Time
	results  []sifen.DEResult // nil until processed
}

// NewServer returns a simulator with cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Clock == nil {
		cfg.Clock = throttle.SystemClock
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Block == 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.Block < 0 {
		return nil, fmt.Errorf("sifensim: negative block %s", cfg.Block)
	}
	if cfg.Processing == 0 {
		cfg.Processing = DefaultProcessing
	}
	if cfg.Processing < 0 {
		cfg.Processing = 0
	}
	if cfg.Env == "" {
		cfg.Env = sifen.EnvTest
	}
	if err := cfg.Env.Validate(); err != nil {
		return nil, fmt.Errorf("sifensim: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		mux:     http.NewServeMux(),
		logger:  logger.With(slog.String("component", "sifensim")),
		rucs:    make(map[rucKey]*rucState),
		lots:    make(map[string]*lot),
		queued:  make(map[hashKey]string),
		cdcs:    make(map[cdcKey]*cdcState),
		nextLot: firstLotNumber,
		nextAut: 1_000_000_001,
		stats:   make(map[Count]int64),
	}
	for path, h := range map[string]http.HandlerFunc{
		sifen.RecepcionPath:    s.recepcionLote,
		sifen.ConsultaLotePath: s.consultaLote,
		sifen.ConsultaPath:     s.consultaDE,
	} {
		s.mux.HandleFunc("POST "+path, h)
		s.mux.HandleFunc("POST /{env}"+path, h)
	}
	s.mux.HandleFunc("GET /sim/stats", s.showStats)
	s.mux.HandleFunc("GET /sim/clock", s.showClock)
	s.mux.HandleFunc("POST /sim/clock", s.advanceClock)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		http.Error(w, "sifensim: closed", http.StatusServiceUnavailable)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Open listens on addr, a loopback address ("127.0.0.1:0" picks a free
// port; any other is refused), and serves the simulator there in the
// background until Close. Call it once, before URL.
func (s *Server) Open(addr string) error {
	ln, err := listenLoopback(addr)
	if err != nil {
		return err
	}
	// The goroutine serves its own copy: Close clears s.srv, possibly
	// before the goroutine runs (Serve then returns ErrServerClosed).
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn)}
	s.ln, s.srv = ln, srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("sifensim: serve", slog.Any("error", err))
		}
	}()
	return nil
}

// listenLoopback listens on addr, which must be a loopback address
// (127.0.0.0/8, ::1 or localhost; port 0 picks a free port): the simulator
// serves made-up data without authentication, so it never leaves this
// machine.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("sifensim: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("sifensim: address %q: the simulator listens on loopback only (127.0.0.1, ::1, localhost)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sifensim: listen: %w", err)
	}
	return ln, nil
}

// URL returns "http://ADDR" of an opened server ("" before Open). Clients
// use URL()+"/{env}" as their base URL.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops the listener Open started, if any (letting requests in
// progress finish, for up to 5 s), and makes the handler answer 503 to
// every request from now on. A listener someone else serves the handler on
// stays theirs to close.
func (s *Server) Close() error {
	var err error
	if srv := s.srv; srv != nil {
		s.srv = nil
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(ctx)
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return err
}

// env returns the environment of a request's path.
func (s *Server) env(r *http.Request) (sifen.Env, bool) {
	v := r.PathValue("env")
	if v == "" {
		return s.cfg.Env, true
	}
	env, err := sifen.ParseEnv(v)
	return env, err == nil
}

// readSOAP reads a SOAP 1.2 request holding a T, answering a fault itself
// when it cannot.
func readSOAP[T any](s *Server, w http.ResponseWriter, r *http.Request, service string) (sifen.Env, *T, bool) {
	env, ok := s.env(r)
	if !ok {
		s.count(service, "", "", "404")
		http.NotFound(w, r)
		return "", nil, false
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/soap+xml") {
		s.count(service, env, "", "fault")
		writeFault(w, http.StatusUnsupportedMediaType, "soap:Sender", "SOAP 1.2 needs Content-Type application/soap+xml, not "+strconv.Quote(ct))
		return "", nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		s.count(service, env, "", "fault")
		writeFault(w, http.StatusRequestEntityTooLarge, "soap:Sender", "request body: "+err.Error())
		return "", nil, false
	}
	req, fault, err := sifen.UnmarshalSOAP[T](body)
	if err != nil || fault != nil {
		s.count(service, env, "", "fault")
		msg := "not a SOAP 1.2 envelope holding the request of " + service
		if err != nil {
			msg += ": " + err.Error()
		}
		writeFault(w, http.StatusBadRequest, "soap:Sender", msg)
		return "", nil, false
	}
	return env, req, true
}

func writeFault(w http.ResponseWriter, status int, code, reason string) {
	b, err := sifen.MarshalSOAP(&sifen.Fault{Code: code, Reason: reason})
	if err != nil {
		http.Error(w, reason, status)
		return
	}
	w.Header().Set("Content-Type", sifen.SOAPContentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeSOAP(w http.ResponseWriter, body any) {
	b, err := sifen.MarshalSOAP(body)
	if err != nil {
		writeFault(w, http.StatusInternalServerError, "soap:Receiver", err.Error())
		return
	}
	w.Header().Set("Content-Type", sifen.SOAPContentType)
	_, _ = w.Write(b)
}

// recepcionLote serves siRecepLoteDE.
func (s *Server) recepcionLote(w http.ResponseWriter, r *http.Request) {
	const service = sifen.ServiceRecepcionLote
	env, req, ok := readSOAP[sifen.EnvioLote](s, w, r, service)
	if !ok {
		return
	}
	now := s.cfg.Clock()
	resp := sifen.EnvioLoteResponse{ProcessedAt: sifen.FormatTime(now)}
	lot, packed, err := unpack(req.XDE)
	if err != nil {
		resp.Code, resp.Message = sifen.CodeLotNotQueued, notQueued(ruleMessage(err))
		s.count(service, env, "", resp.Code)
		writeSOAP(w, &resp)
		return
	}
	rec := Recepcion{Env: env, RUC: lot.DEs[0].RUC}
	for _, de := range lot.DEs {
		rec.CDCs = append(rec.CDCs, de.CDC)
	}
	if s.cfg.BeforeRecepcion != nil {
		if err := s.cfg.BeforeRecepcion(r.Context(), rec); err != nil {
			s.count(service, env, rec.RUC.Number, "dropped")
			http.Error(w, "sifensim: request dropped: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	resp = s.decide(env, lot, packed)
	rec.Code, rec.Message, rec.LotNumber = resp.Code, resp.Message, resp.LotNumber
	s.count(service, env, rec.RUC.Number, resp.Code)
	if s.cfg.AfterRecepcion != nil {
		s.cfg.AfterRecepcion(r.Context(), rec)
	}
	writeSOAP(w, &resp)
}

// unpack decodes, unzips, parses and checks a lot.
func unpack(xde string) (sifen.Lote, sifen.Packed, error) {
	z, err := base64.StdEncoding.DecodeString(strings.TrimSpace(xde))
	if err != nil {
		return sifen.Lote{}, sifen.Packed{}, fmt.Errorf("%w: xDE is not base64: %w", sifen.ErrMalformedXML, err)
	}
	if err := sifen.CheckZipSize(len(z)); err != nil {
		return sifen.Lote{}, sifen.Packed{}, err
	}
	doc, err := sifen.UnzipLote(z)
	if err != nil {
		return sifen.Lote{}, sifen.Packed{}, err
	}
	lot, err := sifen.ParseLote(doc)
	if err != nil {
		return sifen.Lote{}, sifen.Packed{}, err
	}
	// Pack again: Validate applies the lot rules, and the hash of the
	// lot's canonical XML is its identity.
	packed, err := lot.Pack()
	if err != nil {
		return sifen.Lote{}, sifen.Packed{}, err
	}
	return lot, packed, nil
}

// decide applies the per-RUC rules to a valid lot and queues it.
func (s *Server) decide(env sifen.Env, l sifen.Lote, p sifen.Packed) sifen.EnvioLoteResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	resp := sifen.EnvioLoteResponse{ProcessedAt: sifen.FormatTime(now), Code: sifen.CodeLotNotQueued}
	ruc := l.DEs[0].RUC
	rk := rucKey{env: env, ruc: ruc.Number}
	st := s.rucs[rk]
	if st == nil {
		st = &rucState{}
		s.rucs[rk] = st
	}
	block := func(why string) sifen.EnvioLoteResponse {
		st.blockedUntil = now.Add(s.cfg.Block)
		resp.Message = notQueued(fmt.Sprintf("%s; RUC %s bloqueado por %s", why, ruc, s.cfg.Block))
		s.logger.Info("RUC blocked", slog.String("env", string(env)), slog.String("ruc", ruc.String()), slog.String("why", why))
		return resp
	}
	switch {
	case now.Before(st.blockedUntil):
		resp.Message = notQueued(fmt.Sprintf("RUC %s bloqueado hasta %s", ruc, sifen.FormatTime(st.blockedUntil)))
		return resp
	case s.queued[hashKey{env, p.Hash}] != "":
		return block("lote duplicado (ya recibido como lote " + s.queued[hashKey{env, p.Hash}] + ")")
	case s.cfg.Interval > 0 && !st.lastQueued.IsZero() && now.Sub(st.lastQueued) < s.cfg.Interval:
		return block(fmt.Sprintf("envíos demasiado frecuentes (%s desde el último lote, mínimo %s)", now.Sub(st.lastQueued), s.cfg.Interval))
	}
	s.processDue(now)
	for _, de := range l.DEs {
		if c := s.cdcs[cdcKey{env, de.CDC}]; c != nil && !c.approved && !c.rejected {
			resp.Message = notQueued("CDC " + de.CDC + " en procesamiento en el lote " + c.lot)
			return resp
		}
	}
	number := strconv.FormatUint(s.nextLot, 10)
	s.nextLot++
	lt := &lot{number: number, env: env, ruc: ruc, des: l.DEs, queuedAt: now}
	s.lots[number] = lt
	s.pending = append(s.pending, lt)
	s.queued[hashKey{env, p.Hash}] = number
	for _, de := range l.DEs {
		k := cdcKey{env, de.CDC}
		if c := s.cdcs[k]; c != nil && c.approved {
			continue // stays approved; the lot's result will reject the duplicate
		}
		s.cdcs[k] = &cdcState{lot: number, ruc: ruc.Number, xml: de.XML}
	}
	st.lastQueued = now
	resp.Code, resp.Message, resp.LotNumber = sifen.CodeLotQueued, "Lote recibido con éxito", number
	resp.ProcessingTime = strconv.Itoa(int(s.cfg.Processing / time.Second))
	return resp
}

func notQueued(why string) string { return "Lote no encolado para procesamiento: " + why }

// ruleMessage names the rule a lot broke, in SIFEN's words.
func ruleMessage(err error) string {
	var why string
	switch {
	case errors.Is(err, sifen.ErrLotEmpty):
		why = "el lote no contiene DE"
	case errors.Is(err, sifen.ErrLotTooManyDEs):
		why = "el lote contiene más de 50 DE"
	case errors.Is(err, sifen.ErrLotMixedTypes):
		why = "el lote contiene DE de distintos tipos"
	case errors.Is(err, sifen.ErrLotMixedRUC):
		why = "el lote contiene DE de distintos emisores (RUC)"
	case errors.Is(err, sifen.ErrLotDuplicateCDC):
		why = "el lote repite un CDC"
	case errors.Is(err, sifen.ErrLotTooBig):
		why = "el mensaje comprimido supera 1000 KB"
	case errors.Is(err, sifen.ErrMissingRUC), errors.Is(err, sifen.ErrInvalidRUC), errors.Is(err, sifen.ErrInvalidDV):
		why = "RUC o DV del emisor inválido"
	case errors.Is(err, sifen.ErrInvalidCDC):
		why = "CDC inválido"
	case errors.Is(err, sifen.ErrInvalidType):
		why = "tipo de DE inválido"
	default:
		why = "XML del lote mal formado"
	}
	return why + " (" + err.Error() + ")"
}

// processDue processes the queued lots whose processing time has passed.
// s.mu is held.
func (s *Server) processDue(now time.Time) {
	keep := s.pending[:0]
	for _, l := range s.pending {
		if now.Before(l.queuedAt.Add(s.cfg.Processing)) {
			keep = append(keep, l)
			continue
		}
		s.process(l)
	}
	clear(s.pending[len(keep):])
	s.pending = keep
}

// process decides each DE of a lot. s.mu is held.
func (s *Server) process(l *lot) {
	l.results = make([]sifen.DEResult, 0, len(l.des))
	for _, de := range l.des {
		k := cdcKey{l.env, de.CDC}
		c := s.cdcs[k]
		res := sifen.DEResult{CDC: de.CDC}
		switch {
		case c != nil && c.approved && c.lot != l.number:
			res.Status = sifen.ResultRejected
			res.Messages = []sifen.ResultMessage{{Code: "1001", Message: "CDC duplicado"}}
		default:
			code, msg, reject := "", "", false
			if s.cfg.Reject != nil {
				code, msg, reject = s.cfg.Reject(l.env, de)
			}
			if reject {
				res.Status = sifen.ResultRejected
				res.Messages = []sifen.ResultMessage{{Code: code, Message: msg}}
				if c != nil {
					c.rejected = true
				}
			} else {
				res.Status = sifen.ResultApproved
				res.AuthNumber = strconv.FormatUint(s.nextAut, 10)
				s.nextAut++
				res.Messages = []sifen.ResultMessage{{Code: "0260", Message: "Autorización del DE satisfactoria"}}
				if c != nil {
					c.approved, c.aut = true, res.AuthNumber
				}
			}
		}
		l.results = append(l.results, res)
	}
}

// consultaLote serves siResultLoteDE.
func (s *Server) consultaLote(w http.ResponseWriter, r *http.Request) {
	const service = sifen.ServiceConsultaLote
	env, req, ok := readSOAP[sifen.ConsultaLote](s, w, r, service)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.cfg.Clock()
	s.processDue(now)
	resp := sifen.ConsultaLoteResponse{ProcessedAt: sifen.FormatTime(now)}
	l := s.lots[req.LotNumber]
	ruc := ""
	switch {
	case l == nil || l.env != env:
		resp.Code, resp.Message = sifen.CodeLotUnknown, "Número de Lote inexistente"
	case now.Sub(l.queuedAt) > lotQueryWindow:
		ruc = l.ruc.Number
		resp.Code, resp.Message = sifen.CodeLotTooLate, "Consulta extemporánea de Lote"
	case l.results == nil:
		ruc = l.ruc.Number
		resp.Code, resp.Message = sifen.CodeLotProcessing, "Lote "+l.number+" en procesamiento"
	default:
		ruc = l.ruc.Number
		resp.Code, resp.Message = sifen.CodeLotDone, "Procesamiento de lote "+l.number+" concluido"
		resp.Results = append([]sifen.DEResult(nil), l.results...)
	}
	s.mu.Unlock()
	s.count(service, env, ruc, resp.Code)
	writeSOAP(w, &resp)
}

// consultaDE serves siConsDE.
func (s *Server) consultaDE(w http.ResponseWriter, r *http.Request) {
	const service = sifen.ServiceConsultaDE
	env, req, ok := readSOAP[sifen.ConsultaDE](s, w, r, service)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.cfg.Clock()
	s.processDue(now)
	resp := sifen.ConsultaDEResponse{ProcessedAt: sifen.FormatTime(now)}
	c := s.cdcs[cdcKey{env, strings.TrimSpace(req.CDC)}]
	ruc := ""
	if c != nil {
		ruc = c.ruc
	}
	if c != nil && c.approved {
		resp.Code, resp.Message = sifen.CodeDEFound, "CDC encontrado"
		resp.Content = "<rContDe>" + string(c.xml) + "<dProtAut>" + c.aut + "</dProtAut></rContDe>"
	} else {
		resp.Code, resp.Message = sifen.CodeDENotFound, "Documento No Existe en SIFEN o ha sido Rechazado"
	}
	s.mu.Unlock()
	s.count(service, env, ruc, resp.Code)
	writeSOAP(w, &resp)
}

// showClock serves GET /sim/clock.
func (s *Server) showClock(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"now": s.cfg.Clock().Format(time.RFC3339Nano), "fake": s.cfg.Advance != nil})
}

// advanceClock serves POST /sim/clock?advance=DURATION.
func (s *Server) advanceClock(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Advance == nil {
		http.Error(w, "sifensim: the clock is real (start with --fake-clock)", http.StatusNotFound)
		return
	}
	d, err := time.ParseDuration(r.URL.Query().Get("advance"))
	if err != nil || d < 0 {
		http.Error(w, "sifensim: advance wants a non-negative duration, e.g. advance=10m", http.StatusBadRequest)
		return
	}
	now := s.cfg.Advance(d)
	writeJSON(w, map[string]any{"now": now.Format(time.RFC3339Nano), "fake": true})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
