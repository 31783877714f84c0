// Package sifensim is a SIFEN simulator: a SOAP 1.2 server for SIFEN's
// services (siRecepLoteDE, siConsLoteDE, siConsDE; and siRecepDE,
// siRecepEvento and siConsRUC, sync.go) written from
// SIFEN's published behaviour, so that `make run` works with no credentials
// and tests run against an independent HTTP peer. It imports nothing of
// balde's client side: it reads the envelope, unzips the lot and parses its
// DEs with its own code (wire.go), keeps its own state and clock, and
// applies its own rules, so a wire-format mistake on either side shows.
//
// The rules (docs/guides/sifen.md; DNIT's, or balde's interval rule (docs/decisions/0011), as marked):
//
//   - siRecepLoteDE answers 0301 "Lote no encolado" and blocks the RUC of
//     the lot's first DE (10 minutes, then 20, 30, ... up to 60 on
//     recurrence within 24 h; Config.Block, BlockMax) for: more than 50
//     DEs, a SOAP message over 1,000,000 bytes, DEs of several RUCs or several
//     types, the same CDC twice in the lot, a CDC whose earlier lot is still
//     processing, the same lot sent again (DNIT, Guía de mejores prácticas,
//     Oct 2024, §4-5); and a lot of a RUC that arrives less than
//     Config.Interval after the answer to its previous lot, or while that
//     lot has no answer yet (the interval rule). While a RUC is
//     blocked every lot of it gets 0301. An empty lot, and a lot that cannot
//     be read (not base64, not a ZIP, malformed XML), get 0301 without a
//     block: they name no RUC, and the simulator does not take the issuer
//     from the client certificate as SIFEN does (DNIT blocks for an empty
//     lot too). Otherwise 0300 and a lot number.
//   - A queued lot is processed Config.Processing after it was queued
//     (on the simulator's clock): each DE is approved (with a dProtAut),
//     approved with observations (Config.Observe) or rejected with a code:
//     a bad RUC check digit or CDC, a CDC already approved (1001), a DE
//     signed-less or marked as a test DE sent to prod, or Config.Reject.
//   - siConsLoteDE answers 0360 for an unknown lot, 0361 while it is
//     processing, 0362 with the per-DE results, 0364 after 48 hours.
//   - siConsDE answers 0422 for an approved CDC, xContenDE holding the
//     DE, its dProtAut and its (empty) events as escaped text, and 0420
//     otherwise.
//   - siRecepDE takes one DE with the RUC rules of a lot of one and
//     answers its result at once (rRetEnviDe); siRecepEvento registers
//     events (0600) on approved DEs; siConsRUC answers 0502 for any RUC
//     of 5-8 digits (sync.go says what is published and what is the
//     simulator's).
//   - A request that is not a SOAP 1.2 envelope holding the service's
//     request gets SIFEN's generic rRetEnviDe, 0160 "XML Mal Formado.",
//     with HTTP 400.
//   - Both SOAP content types real clients send are accepted
//     (application/soap+xml and application/xml); answers use SIFEN's
//     prefixes (env:, ns2:).
//   - GET /sim/stats answers the counts of requests by service, environment,
//     RUC and response code (Stats); GET /sim/clock the simulator's time;
//     POST /sim/clock?advance=DURATION moves a fake clock (Config.Advance).
//
// The services are served at SIFEN's paths, under /test or /prod to pick
// the environment ("/test/de/ws/async/recibe-lote.wsdl"), or without a
// prefix for Config.Env.
package sifensim

import (
	"context"
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
)

// SIFEN's paths of the three services (manual técnico v150).
const (
	RecepcionPath    = "/de/ws/async/recibe-lote.wsdl"
	ConsultaLotePath = "/de/ws/consultas/consulta-lote.wsdl"
	ConsultaPath     = "/de/ws/consultas/consulta.wsdl"
)

// The service names, as Stats counts them.
const (
	ServiceRecepcionLote = "siRecepLoteDE"
	ServiceConsultaLote  = "siResultLoteDE"
	ServiceConsultaDE    = "siConsDE"
)

// SIFEN's response codes the simulator answers.
const (
	CodeLotQueued     = "0300"
	CodeLotNotQueued  = "0301"
	CodeLotUnknown    = "0360"
	CodeLotProcessing = "0361"
	CodeLotDone       = "0362"
	CodeLotTooLate    = "0364"
	CodeDENotFound    = "0420"
	CodeDEFound       = "0422"
	// CodeXMLMalformed is SIFEN's answer, in its generic envelope
	// rRetEnviDe, to a request it cannot read (manual técnico v150, §7.4).
	CodeXMLMalformed = "0160"
)

// The per-DE results (dEstRes).
const (
	ResultApproved        = "Aprobado"
	ResultApprovedWithObs = "Aprobado con observación"
	ResultRejected        = "Rechazado"
)

// Defaults of Config.
const (
	DefaultInterval   = 10 * time.Second
	DefaultBlock      = 10 * time.Minute
	DefaultBlockMax   = 60 * time.Minute
	DefaultProcessing = 2 * time.Second
	// blockMemory is how long a 0301 counts as a recurrence.
	blockMemory = 24 * time.Hour
	// lotQueryWindow is how long a lot can be queried (0364 after).
	lotQueryWindow = 48 * time.Hour
	// MaxLotDEs and MaxMessageBytes are DNIT's lot limits (guide, Oct 2024,
	// "Lote no encolado para procesamiento", c and e): 50 DEs, and "el
	// mensaje de datos de entrada del WS no debe superar 1000 KB" — the
	// whole SOAP message as received, read as 1,000,000 bytes (SI kilobytes:
	// the stricter reading, docs/decisions/0056).
	MaxLotDEs       = 50
	MaxMessageBytes = 1_000_000
	// maxRequestBytes bounds a request body.
	maxRequestBytes = 8 << 20
	// firstLotNumber makes lot numbers 17 digits long, like SIFEN's.
	firstLotNumber = 10_000_000_000_000_001
	// testIssuerName is dNomEmi of every DE of the test environment.
	testIssuerName = "DE generado en ambiente de prueba - sin valor comercial ni fiscal"
	timeLayout     = "2006-01-02T15:04:05-07:00"
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// Clock is the simulator's time; default time.Now.
	Clock func() time.Time
	// Advance, when set, moves Clock forward (POST /sim/clock?advance=D);
	// without it that endpoint answers 404.
	Advance func(time.Duration) time.Time
	// Interval is the least time between the answer to a lot of a RUC in
	// one environment and its next lot; default DefaultInterval. Negative
	// disables the rule.
	Interval time.Duration
	// Block is the first block of a RUC that breaks a rule, and BlockMax
	// the longest: each recurrence within 24 h blocks Block longer.
	Block, BlockMax time.Duration
	// Processing is how long a lot stays in processing; default
	// DefaultProcessing. Negative means no processing time.
	Processing time.Duration
	// Latency is how long (wall time) siRecepLoteDE takes to answer a lot
	// it read, as over the internet. The answer's instant, from which the
	// frequency rule counts, is taken after it.
	Latency time.Duration
	// Env is the environment of the paths without /test or /prod ("test"
	// by default).
	Env string
	// BeforeRecepcion, when set, is called for every readable
	// siRecepLoteDE before it is decided; an error drops the request as if
	// it was lost (HTTP 503, nothing recorded).
	BeforeRecepcion func(ctx context.Context, r Recepcion) error
	// AfterRecepcion, when set, is called once a siRecepLoteDE is decided
	// and recorded, before the answer is written (and its instant taken).
	AfterRecepcion func(ctx context.Context, r Recepcion)
	// Reject, when set, decides per DE of a processed lot: rejected with
	// code and message when ok.
	Reject func(env string, de DE) (code, message string, ok bool)
	// Observe, when set, approves a DE with an observation when ok.
	Observe func(env string, de DE) (code, message string, ok bool)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Recepcion describes one siRecepLoteDE for the hooks.
type Recepcion struct {
	Env string
	// RUC is the first DE's issuer, "NUMBER-DV".
	RUC string
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
	cdcs    map[cdcKey]*cdcState
	hashes  map[cdcKey]string // (env, SHA-256 of the lot's XML) → lot number
	nextLot uint64
	nextAut uint64
	stats   map[Count]int64
}

var _ http.Handler = (*Server)(nil)

type rucKey struct{ env, ruc string }

type rucState struct {
	lastAnswer   time.Time
	busy         bool // a lot of the RUC has no answer yet
	blockedUntil time.Time
	level        int
	lastBlock    time.Time
}

type cdcKey struct{ env, cdc string }

type cdcState struct {
	lot      string // the last lot that held it
	ruc      string
	approved bool
	xml      []byte
	aut      string
}

type lot struct {
	number   string
	env      string
	ruc      string
	des      []DE
	queuedAt time.Time
	results  []el // nil until processed
	verdicts []verdict
}

// verdict is the processing's result of one DE.
type verdict struct {
	cdc, status, code, msg, aut string
}

// NewServer returns a simulator with cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Block == 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.Block < 0 || cfg.BlockMax < 0 {
		return nil, fmt.Errorf("sifensim: negative block %s", cfg.Block)
	}
	if cfg.BlockMax < cfg.Block {
		cfg.BlockMax = max(DefaultBlockMax, cfg.Block)
	}
	if cfg.Processing == 0 {
		cfg.Processing = DefaultProcessing
	}
	cfg.Processing = max(cfg.Processing, 0)
	if cfg.Env == "" {
		cfg.Env = "test"
	}
	if cfg.Env != "test" && cfg.Env != "prod" {
		return nil, fmt.Errorf("sifensim: environment %q (want test or prod)", cfg.Env)
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
		cdcs:    make(map[cdcKey]*cdcState),
		hashes:  make(map[cdcKey]string),
		nextLot: firstLotNumber,
		nextAut: 1_000_000_001,
		stats:   make(map[Count]int64),
	}
	for path, h := range map[string]http.HandlerFunc{
		RecepcionPath:    s.recepcionLote,
		ConsultaLotePath: s.consultaLote,
		ConsultaPath:     s.consultaDE,
		RecepcionDEPath:  s.recepcionDE,
		EventoPath:       s.recepcionEvento,
		ConsultaRUCPath:  s.consultaRUC,
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
// every request from now on.
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
func (s *Server) env(r *http.Request) (string, bool) {
	switch v := r.PathValue("env"); v {
	case "":
		return s.cfg.Env, true
	case "test", "prod":
		return v, true
	}
	return "", false
}

// readRequest reads a SOAP 1.2 request holding a T, answering a fault
// itself when it cannot. It returns the body's size too.
func readRequest[T any](s *Server, w http.ResponseWriter, r *http.Request, service string) (string, *T, int, bool) {
	env, ok := s.env(r)
	if !ok {
		s.count(service, "", "", "404")
		http.NotFound(w, r)
		return "", nil, 0, false
	}
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	if !strings.HasPrefix(ct, "application/soap+xml") && !strings.HasPrefix(ct, "application/xml") {
		s.count(service, env, "", "fault")
		writeXML(w, http.StatusUnsupportedMediaType, fault("env:Sender", "Content-Type "+strconv.Quote(ct)+" (application/soap+xml o application/xml)"))
		return "", nil, 0, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		s.count(service, env, "", "fault")
		writeXML(w, http.StatusRequestEntityTooLarge, fault("env:Sender", "request body: "+err.Error()))
		return "", nil, 0, false
	}
	req, err := readEnvelope[T](body)
	if err != nil {
		// SIFEN answers a request it cannot read with its generic
		// rRetEnviDe, 0160, and HTTP 400 (docs/decisions/0056).
		s.count(service, env, "", CodeXMLMalformed)
		writeXML(w, http.StatusBadRequest, retEnviDe(s.cfg.Clock(), CodeXMLMalformed, "XML Mal Formado."))
		return "", nil, 0, false
	}
	return env, req, len(body), true
}

func writeXML(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func formatTime(t time.Time) string { return t.Format(timeLayout) }

// recepcionLote serves siRecepLoteDE.
func (s *Server) recepcionLote(w http.ResponseWriter, r *http.Request) {
	const service = ServiceRecepcionLote
	env, req, size, ok := readRequest[envioLote](s, w, r, service)
	if !ok {
		return
	}
	des, hash, err := unpackLot(req.XDE)
	if err != nil {
		now := s.cfg.Clock()
		s.count(service, env, "", CodeLotNotQueued)
		writeXML(w, http.StatusOK, answer(g("rResEnviLoteDe", t("dFecProc", formatTime(now)),
			t("dCodRes", CodeLotNotQueued), t("dMsgRes", notQueued(err.Error())))))
		return
	}
	rec := Recepcion{Env: env}
	if len(des) > 0 {
		rec.RUC = des[0].RUC + "-" + des[0].DV
	}
	for _, de := range des {
		rec.CDCs = append(rec.CDCs, de.CDC)
	}
	if s.cfg.BeforeRecepcion != nil {
		if err := s.cfg.BeforeRecepcion(r.Context(), rec); err != nil {
			s.count(service, env, rucNumber(des), "dropped")
			http.Error(w, "sifensim: request dropped: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	code, msg, number, rk := s.decide(env, des, hash, size, false)
	rec.Code, rec.Message, rec.LotNumber = code, msg, number
	s.count(service, env, rucNumber(des), code)
	if s.cfg.Latency > 0 {
		select {
		case <-time.After(s.cfg.Latency):
		case <-r.Context().Done():
		}
	}
	if s.cfg.AfterRecepcion != nil {
		s.cfg.AfterRecepcion(r.Context(), rec)
	}
	// The answer leaves now: the frequency rule counts from this instant.
	s.mu.Lock()
	now := s.cfg.Clock()
	if st := s.rucs[rk]; st != nil && rk.ruc != "" {
		st.busy = false
		if now.After(st.lastAnswer) {
			st.lastAnswer = now
		}
	}
	s.mu.Unlock()
	fields := []el{t("dFecProc", formatTime(now)), t("dCodRes", code), t("dMsgRes", msg)}
	if number != "" {
		fields = append(fields, t("dProtConsLote", number), t("dTpoProces", strconv.Itoa(int(s.cfg.Processing/time.Second))))
	}
	writeXML(w, http.StatusOK, answer(g("rResEnviLoteDe", fields...)))
}

func rucNumber(des []DE) string {
	if len(des) == 0 {
		return ""
	}
	return des[0].RUC
}

func notQueued(why string) string { return "Lote no encolado para procesamiento: " + why }

// decide applies the lot rules and the per-RUC rules, and queues the lot.
// It returns the answer and the RUC's key (whose busy mark the caller
// clears once the answer leaves).
//
// single is a DE of siRecepDE, received as a lot of one: the same RUC
// rules, but "the same lot again" does not apply (a DE sent again is
// rejected by its processing, 1001) and the caller processes it at once.
func (s *Server) decide(env string, des []DE, hash string, size int, single bool) (code, msg, number string, rk rucKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	s.processDue(now)
	if len(des) == 0 {
		// No RUC to block: the lot has none.
		return CodeLotNotQueued, notQueued("el lote no contiene DE"), "", rucKey{}
	}
	ruc := des[0].RUC
	rk = rucKey{env, ruc}
	st := s.rucs[rk]
	if st == nil {
		st = &rucState{}
		s.rucs[rk] = st
	}
	block := func(why string) (string, string, string, rucKey) {
		if !st.lastBlock.IsZero() && now.Sub(st.lastBlock) < blockMemory {
			st.level++
		} else {
			st.level = 1
		}
		st.lastBlock = now
		d := min(s.cfg.Block*time.Duration(st.level), s.cfg.BlockMax)
		st.blockedUntil = now.Add(d)
		s.logger.Info("RUC blocked", slog.String("env", env), slog.String("ruc", ruc), slog.String("why", why), slog.Duration("for", d))
		return CodeLotNotQueued, notQueued(fmt.Sprintf("%s; RUC %s bloqueado por %s", why, ruc, d)), "", rucKey{}
	}
	if now.Before(st.blockedUntil) {
		return CodeLotNotQueued, notQueued(fmt.Sprintf("RUC %s bloqueado hasta %s", ruc, formatTime(st.blockedUntil))), "", rucKey{}
	}
	seen := make(map[string]bool, len(des))
	for i, de := range des {
		switch {
		case de.RUC != ruc:
			return block(fmt.Sprintf("el lote contiene DE de distintos emisores (DE 1: %s, DE %d: %s)", ruc, i+1, de.RUC))
		case de.Type != des[0].Type:
			return block(fmt.Sprintf("el lote contiene DE de distintos tipos (DE 1: %s, DE %d: %s)", des[0].Type, i+1, de.Type))
		case seen[de.CDC]:
			return block("el lote repite el CDC " + de.CDC)
		}
		seen[de.CDC] = true
	}
	switch {
	case len(des) > MaxLotDEs:
		return block(fmt.Sprintf("el lote contiene %d DE (máximo %d)", len(des), MaxLotDEs))
	case size > MaxMessageBytes:
		return block(fmt.Sprintf("el mensaje tiene %d bytes (máximo %d)", size, MaxMessageBytes))
	}
	if prev := s.hashes[cdcKey{env, hash}]; prev != "" && !single {
		return block("lote reenviado (ya recibido como lote " + prev + ")")
	}
	for _, de := range des {
		if c := s.cdcs[cdcKey{env, de.CDC}]; c != nil && s.lots[c.lot] != nil && s.lots[c.lot].results == nil {
			return block("el CDC " + de.CDC + " está en procesamiento en el lote " + c.lot)
		}
	}
	if s.cfg.Interval > 0 {
		if st.busy {
			return block("envíos demasiado frecuentes (el lote anterior aún no fue respondido)")
		}
		if since := now.Sub(st.lastAnswer); !st.lastAnswer.IsZero() && since < s.cfg.Interval {
			return block(fmt.Sprintf("envíos demasiado frecuentes (%s desde la respuesta al lote anterior, mínimo %s)", since, s.cfg.Interval))
		}
	}
	number = strconv.FormatUint(s.nextLot, 10)
	s.nextLot++
	s.lots[number] = &lot{number: number, env: env, ruc: ruc, des: des, queuedAt: now}
	if !single {
		s.hashes[cdcKey{env, hash}] = number
	}
	for _, de := range des {
		k := cdcKey{env, de.CDC}
		if c := s.cdcs[k]; c != nil && c.approved {
			continue // stays approved; the lot's result will reject the duplicate
		}
		s.cdcs[k] = &cdcState{lot: number, ruc: ruc, xml: de.XML}
	}
	st.busy = true
	return CodeLotQueued, "Lote recibido con éxito", number, rk
}

// processDue processes the queued lots whose processing time has passed.
// s.mu is held.
func (s *Server) processDue(now time.Time) {
	for _, l := range s.lots {
		if l.results == nil && !now.Before(l.queuedAt.Add(s.cfg.Processing)) {
			s.process(l)
		}
	}
}

// process decides each DE of a lot. s.mu is held.
func (s *Server) process(l *lot) {
	l.results = make([]el, 0, len(l.des))
	for _, de := range l.des {
		k := cdcKey{l.env, de.CDC}
		c := s.cdcs[k]
		status, code, msg, aut := ResultApproved, "0260", "Autorización del DE satisfactoria", ""
		rejected := func(cd, m string) { status, code, msg = ResultRejected, cd, m }
		if cd, m := deProblem(de); cd != "" {
			rejected(cd, m)
		} else if c != nil && c.approved && c.lot != l.number {
			rejected("1001", "CDC duplicado")
		} else if l.env == "prod" && !de.Signed {
			rejected("0141", "Firma digital ausente")
		} else if l.env == "prod" && de.IssuerName == testIssuerName {
			rejected("1309", "DE de ambiente de prueba enviado a producción")
		} else if s.cfg.Reject != nil {
			if cd, m, ok := s.cfg.Reject(l.env, de); ok {
				rejected(cd, m)
			}
		}
		if status == ResultApproved && s.cfg.Observe != nil {
			if cd, m, ok := s.cfg.Observe(l.env, de); ok {
				status, code, msg = ResultApprovedWithObs, cd, m
			}
		}
		if status != ResultRejected {
			aut = strconv.FormatUint(s.nextAut, 10)
			s.nextAut++
			if c != nil {
				c.approved, c.aut = true, aut
			}
		}
		l.verdicts = append(l.verdicts, verdict{cdc: de.CDC, status: status, code: code, msg: msg, aut: aut})
		res := []el{t("id", de.CDC), t("dEstRes", status)}
		if aut != "" {
			res = append(res, t("dProtAut", aut))
		}
		res = append(res, g("gResProc", t("dCodRes", code), t("dMsgRes", msg)))
		l.results = append(l.results, g("gResProcLote", res...))
	}
}

// consultaLote serves siConsLoteDE.
func (s *Server) consultaLote(w http.ResponseWriter, r *http.Request) {
	const service = ServiceConsultaLote
	env, req, _, ok := readRequest[consLote](s, w, r, service)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.cfg.Clock()
	s.processDue(now)
	fields := []el{t("dFecProc", formatTime(now))}
	l := s.lots[strings.TrimSpace(req.LotNumber)]
	ruc, code := "", ""
	switch {
	case l == nil || l.env != env:
		code = CodeLotUnknown
		fields = append(fields, t("dCodResLot", code), t("dMsgResLot", "Número de Lote inexistente"))
	case now.Sub(l.queuedAt) > lotQueryWindow:
		ruc, code = l.ruc, CodeLotTooLate
		fields = append(fields, t("dCodResLot", code), t("dMsgResLot", "Consulta extemporánea de Lote"))
	case l.results == nil:
		ruc, code = l.ruc, CodeLotProcessing
		fields = append(fields, t("dCodResLot", code), t("dMsgResLot", "Lote "+l.number+" en procesamiento"))
	default:
		ruc, code = l.ruc, CodeLotDone
		fields = append(fields, t("dCodResLot", code), t("dMsgResLot", "Procesamiento de lote "+l.number+" concluido"))
		fields = append(fields, l.results...)
	}
	s.mu.Unlock()
	s.count(service, env, ruc, code)
	writeXML(w, http.StatusOK, answer(g("rResEnviConsLoteDe", fields...)))
}

// consultaDE serves siConsDE.
func (s *Server) consultaDE(w http.ResponseWriter, r *http.Request) {
	const service = ServiceConsultaDE
	env, req, _, ok := readRequest[consDE](s, w, r, service)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.cfg.Clock()
	s.processDue(now)
	fields := []el{t("dFecProc", formatTime(now))}
	c := s.cdcs[cdcKey{env, strings.TrimSpace(req.CDC)}]
	ruc, code := "", CodeDENotFound
	if c != nil {
		ruc = c.ruc
	}
	if c != nil && c.approved {
		code = CodeDEFound
		// xContenDE as SIFEN sends it: escaped text of the DE (rDE) with
		// its authorisation (dProtAut) and events (xContEv) beside it.
		fields = append(fields, t("dCodRes", code), t("dMsgRes", "CDC encontrado"),
			t("xContenDE", `<?xml version="1.0" encoding="UTF-8"?>`+string(c.xml)+"<dProtAut>"+c.aut+"</dProtAut><xContEv></xContEv>"))
	} else {
		fields = append(fields, t("dCodRes", code), t("dMsgRes", "Documento No Existe en SIFEN o ha sido Rechazado"))
	}
	s.mu.Unlock()
	s.count(service, env, ruc, code)
	writeXML(w, http.StatusOK, answer(g("rEnviConsDeResponse", fields...)))
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
