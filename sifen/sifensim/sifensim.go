// Package sifensim is a SIFEN simulator: a SOAP 1.2 server for
// siRecepLoteDE, siConsLoteDE and siConsDE (and, in sync.go, siRecepDE,
// siRecepEvento and siConsRUC), written from SIFEN's published behaviour so
// that `make run` needs no credentials and tests meet an independent peer. It
// imports nothing of balde: envelope, ZIP and DE parsing (wire.go), state,
// clock and rules are its own, so a wire-format mistake on either side shows.
//
// The rules (docs/guides/sifen.md says which are DNIT's and which are
// balde's interval rule, docs/decisions/0011):
//
//   - siRecepLoteDE answers 0301 "Lote no encolado" and blocks the RUC of the
//     lot's first DE (Config.Block, longer on each recurrence within 24 h up
//     to BlockMax) for more than 50 DEs, a SOAP message over 1,000,000 bytes,
//     DEs of several RUCs or types, a CDC twice, a CDC still processing in an
//     earlier lot, the same lot again (DNIT, Guía de mejores prácticas, Oct
//     2024, §4-5), and a lot less than Config.Interval after the answer to
//     the RUC's previous lot or before that answer. A blocked RUC gets 0301;
//     an empty or unreadable lot gets 0301 without a block. Otherwise 0300
//     and a lot number.
//   - A queued lot is processed Config.Processing later (simulator clock):
//     each DE is approved with a dProtAut, approved with observations
//     (Config.Observe), or rejected: bad RUC check digit or CDC, a CDC
//     already approved (1001), unsigned or test DE sent to prod,
//     Config.Reject.
//   - siConsLoteDE answers 0360 unknown, 0361 processing, 0362 with the
//     per-DE results, 0364 after 48 hours; siConsDE answers 0422 with
//     xContenDE for an approved CDC, 0420 otherwise.
//   - A request that is not a SOAP 1.2 envelope holding the service's request
//     gets SIFEN's generic rRetEnviDe 0160 "XML Mal Formado." with HTTP 400.
//     Content types application/soap+xml and application/xml are accepted;
//     answers use SIFEN's prefixes (env:, ns2:).
//   - GET /sim/stats answers the request counts (Stats), GET /sim/clock the
//     time, POST /sim/clock?advance=DURATION moves a fake clock
//     (Config.Advance).
//
// The services are served at SIFEN's paths under /test or /prod
// ("/test/de/ws/async/recibe-lote.wsdl"), or without a prefix for Config.Env.
package sifensim

import (
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/balde-throttle/balde/internal/simkit"
)

// SIFEN's paths of its services (manual técnico v150, §7.10).
const (
	RecepcionPath    = "/de/ws/async/recibe-lote.wsdl"
	consultaLotePath = "/de/ws/consultas/consulta-lote.wsdl"
	consultaPath     = "/de/ws/consultas/consulta.wsdl"
	RecepcionDEPath  = "/de/ws/sync/recibe.wsdl"
	EventoPath       = "/de/ws/eventos/evento.wsdl"
	ConsultaRUCPath  = "/de/ws/consultas/consulta-ruc.wsdl"
)

// The service names, as Stats counts them.
const (
	ServiceRecepcionLote = "siRecepLoteDE"
	ServiceConsultaLote  = "siResultLoteDE"
	ServiceConsultaDE    = "siConsDE"
	ServiceRecepcionDE   = "siRecepDE"
	ServiceEvento        = "siRecepEvento"
	ServiceConsultaRUC   = "siConsRUC"
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
	// CodeEventRegistered is an event registered (manual §9.5.3: dProtAut
	// "conforme dCodRes=0600"); CodeRUCNotFound and CodeRUCFound are
	// siConsRUC's (Tabla H).
	CodeEventRegistered = "0600"
	CodeRUCNotFound     = "0500"
	CodeRUCFound        = "0502"
	// CodeEventCDCNotFound is the simulator's refusal of an event on a DE it
	// has not approved (no code for it is published).
	CodeEventCDCNotFound = "4003"
	// codeXMLMalformed is SIFEN's answer, in its generic envelope
	// rRetEnviDe, to a request it cannot read (manual técnico v150, §7.4).
	codeXMLMalformed = "0160"
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
	blockMemory       = 24 * time.Hour // how long a 0301 counts as a recurrence
	lotQueryWindow    = 48 * time.Hour // how long a lot can be queried (0364 after)
	// maxLotDEs and MaxMessageBytes are DNIT's lot limits (guide, Oct 2024,
	// "Lote no encolado para procesamiento", c and e): 50 DEs, and a whole
	// SOAP message of at most "1000 KB", read as 1,000,000 bytes
	// (docs/decisions/0056).
	maxLotDEs       = 50
	MaxMessageBytes = 1_000_000
	maxRequestBytes = 8 << 20
	firstLotNumber  = 10_000_000_000_000_001 // 17 digits, like SIFEN's lot numbers
	// testIssuerName is dNomEmi of every DE of the test environment.
	testIssuerName = "DE generado en ambiente de prueba - sin valor comercial ni fiscal"
	timeLayout     = "2006-01-02T15:04:05-07:00"
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// Clock is the simulator's time (default time.Now); Advance, when set,
	// moves it (POST /sim/clock?advance=D, 404 without it).
	Clock   func() time.Time
	Advance func(time.Duration) time.Time
	// Interval is the least time between the answer to a RUC's lot in one
	// environment and its next lot (default DefaultInterval; negative: none).
	Interval time.Duration
	// Block is a RUC's first block and BlockMax the longest: each recurrence
	// within 24 h blocks Block longer.
	Block, BlockMax time.Duration
	// Processing is how long a lot stays in processing (default
	// DefaultProcessing; negative: none).
	Processing time.Duration
	// Latency is the wall time siRecepLoteDE takes to answer a lot it read;
	// the answer's instant, from which Interval counts, is taken after it.
	Latency time.Duration
	// Env is the environment of the paths without /test or /prod ("test").
	Env string
	// BeforeRecepcion is called for every readable siRecepLoteDE before it
	// is decided; an error drops it as lost (HTTP 503, nothing recorded).
	// AfterRecepcion is called once it is decided and recorded, before the
	// answer is written and its instant taken.
	BeforeRecepcion func(ctx context.Context, r Recepcion) error
	AfterRecepcion  func(ctx context.Context, r Recepcion)
	// Reject rejects a DE of a processed lot with code and message when ok;
	// Observe approves it with an observation when ok.
	Reject  func(env string, de DE) (code, message string, ok bool)
	Observe func(env string, de DE) (code, message string, ok bool)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Recepcion describes one siRecepLoteDE for the hooks.
type Recepcion struct {
	Env  string
	RUC  string   // the first DE's issuer, "NUMBER-DV"
	CDCs []string // the lot's DEs
	// Code, Message and LotNumber are the answer (empty in BeforeRecepcion).
	Code, Message, LotNumber string
}

// Server is the simulator: an http.Handler, which Open also serves on a
// listener of its own. Safe for concurrent use.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	logger *slog.Logger
	l      simkit.Listener

	closed           atomic.Bool
	mu               sync.Mutex
	rucs             map[key]*rucState
	lots             map[string]*lot // by lot number
	cdcs             map[key]*cdcState
	hashes           map[key]string // (env, SHA-256 of the lot's XML) → lot number
	nextLot, nextAut uint64
	stats            map[Count]int64
}

// key is a RUC, CDC or lot hash in an environment.
type key struct{ env, id string }

type rucState struct {
	lastAnswer, blockedUntil, lastBlock time.Time
	busy                                bool // a lot of the RUC has no answer yet
	level                               int
}

type cdcState struct {
	lot, ruc, aut string // lot: the last lot that held it
	approved      bool
	xml           []byte
}

type lot struct {
	number, env, ruc string
	des              []DE
	queuedAt         time.Time
	verdicts         []verdict // nil until processed
}

// verdict is the processing's result of one DE.
type verdict struct{ cdc, status, code, msg, aut string }

// fields renders v after head: dEstRes, dProtAut if any, and gResProc.
func (v verdict) fields(head ...el) []el {
	res := append(head, t("dEstRes", v.status))
	if v.aut != "" {
		res = append(res, t("dProtAut", v.aut))
	}
	return append(res, g("gResProc", t("dCodRes", v.code), t("dMsgRes", v.msg)))
}

// NewServer returns a simulator with cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	cfg.Interval, cfg.Block, cfg.Env = cmp.Or(cfg.Interval, DefaultInterval), cmp.Or(cfg.Block, DefaultBlock), cmp.Or(cfg.Env, "test")
	cfg.Processing = max(cmp.Or(cfg.Processing, DefaultProcessing), 0)
	if cfg.Block < 0 || cfg.BlockMax < 0 {
		return nil, fmt.Errorf("sifensim: negative block %s", cfg.Block)
	}
	if cfg.BlockMax < cfg.Block {
		cfg.BlockMax = max(DefaultBlockMax, cfg.Block)
	}
	if cfg.Env != "test" && cfg.Env != "prod" {
		return nil, fmt.Errorf("sifensim: environment %q (want test or prod)", cfg.Env)
	}
	s := &Server{
		cfg:     cfg,
		mux:     http.NewServeMux(),
		logger:  cmp.Or(cfg.Logger, slog.Default()).With(slog.String("component", "sifensim")),
		rucs:    make(map[key]*rucState),
		lots:    make(map[string]*lot),
		cdcs:    make(map[key]*cdcState),
		hashes:  make(map[key]string),
		nextLot: firstLotNumber,
		nextAut: 1_000_000_001,
		stats:   make(map[Count]int64),
	}
	route(s, RecepcionPath, ServiceRecepcionLote, s.recepcionLote)
	route(s, consultaLotePath, ServiceConsultaLote, s.consultaLote)
	route(s, consultaPath, ServiceConsultaDE, s.consultaDE)
	route(s, RecepcionDEPath, ServiceRecepcionDE, s.recepcionDE)
	route(s, EventoPath, ServiceEvento, s.recepcionEvento)
	route(s, ConsultaRUCPath, ServiceConsultaRUC, s.consultaRUC)
	s.mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Stats()) })
	s.mux.HandleFunc("GET /sim/clock", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"now": s.cfg.Clock().Format(time.RFC3339Nano), "fake": s.cfg.Advance != nil})
	})
	s.mux.HandleFunc("POST /sim/clock", s.advanceClock)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.closed.Load() {
		http.Error(w, "sifensim: closed", http.StatusServiceUnavailable)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Open listens on addr, a loopback address only (port 0 picks a free
// port), and serves in the background until Close. Call it once, before URL.
func (s *Server) Open(addr string) error { return s.l.Open("sifensim", addr, s, s.logger) }

// URL returns "http://ADDR" of an opened server ("" before Open). Clients
// use URL()+"/{env}" as their base URL.
func (s *Server) URL() string { return s.l.URL() }

// Close stops the listener Open started, if any (letting requests in
// progress finish, for up to 5 s), and makes the handler answer 503 to
// every request from now on.
func (s *Server) Close() error {
	err := s.l.Close()
	s.closed.Store(true)
	return err
}

// route serves service at path, also under /test and /prod: serve gets
// the request's environment, its SOAP 1.2 body's T and the body's size;
// a request that is not one gets a fault or 0160 here.
func route[T any](s *Server, path, service string, serve func(w http.ResponseWriter, r *http.Request, env string, req *T, size int)) {
	h := func(w http.ResponseWriter, r *http.Request) {
		env := cmp.Or(r.PathValue("env"), s.cfg.Env) // Config.Env is test or prod
		if env != "test" && env != "prod" {
			s.count(service, "", "", "404")
			http.NotFound(w, r)
			return
		}
		ct := strings.ToLower(r.Header.Get("Content-Type"))
		if !strings.HasPrefix(ct, "application/soap+xml") && !strings.HasPrefix(ct, "application/xml") {
			s.fault(w, service, env, http.StatusUnsupportedMediaType, "Content-Type "+strconv.Quote(ct)+" (application/soap+xml o application/xml)")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			s.fault(w, service, env, http.StatusRequestEntityTooLarge, "request body: "+err.Error())
			return
		}
		var req reqEnvelope[T]
		if err := xml.Unmarshal(body, &req); err != nil || req.Body.Content == nil {
			s.malformed(w, service, env)
			return
		}
		serve(w, r, env, req.Body.Content, len(body))
	}
	s.mux.HandleFunc("POST "+path, h)
	s.mux.HandleFunc("POST /{env}"+path, h)
}

// malformed answers a request SIFEN cannot read: its generic rRetEnviDe,
// 0160, with HTTP 400 (docs/decisions/0056).
func (s *Server) malformed(w http.ResponseWriter, service, env string) {
	s.count(service, env, "", codeXMLMalformed)
	writeXML(w, http.StatusBadRequest, answer(g("rRetEnviDe", g("rProtDe", verdict{status: ResultRejected,
		code: codeXMLMalformed, msg: "XML Mal Formado."}.fields(t("dFecProc", s.cfg.Clock().Format(timeLayout)))...))))
}

func writeXML(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// recepcionLote serves siRecepLoteDE.
func (s *Server) recepcionLote(w http.ResponseWriter, r *http.Request, env string, req *envioLote, size int) {
	des, hash, err := unpackLot(req.XDE)
	if err != nil {
		s.count(ServiceRecepcionLote, env, "", CodeLotNotQueued)
		writeXML(w, http.StatusOK, answer(g("rResEnviLoteDe", t("dFecProc", s.cfg.Clock().Format(timeLayout)),
			t("dCodRes", CodeLotNotQueued), t("dMsgRes", notQueued(err.Error())))))
		return
	}
	rec, ruc := Recepcion{Env: env}, ""
	if len(des) > 0 {
		ruc, rec.RUC = des[0].RUC, des[0].RUC+"-"+des[0].DV
	}
	for _, de := range des {
		rec.CDCs = append(rec.CDCs, de.CDC)
	}
	if s.cfg.BeforeRecepcion != nil {
		if err := s.cfg.BeforeRecepcion(r.Context(), rec); err != nil {
			s.count(ServiceRecepcionLote, env, ruc, "dropped")
			http.Error(w, "sifensim: request dropped: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	code, msg, number := s.decide(env, des, hash, size)
	rec.Code, rec.Message, rec.LotNumber = code, msg, number
	s.count(ServiceRecepcionLote, env, ruc, code)
	now := s.release(r, number, &rec)
	fields := []el{t("dFecProc", now.Format(timeLayout)), t("dCodRes", code), t("dMsgRes", msg)}
	if number != "" {
		fields = append(fields, t("dProtConsLote", number), t("dTpoProces", strconv.Itoa(int(s.cfg.Processing/time.Second))))
	}
	writeXML(w, http.StatusOK, answer(g("rResEnviLoteDe", fields...)))
}

// release waits Config.Latency, calls AfterRecepcion with rec (when both are
// set), then marks the RUC of the lot number queued (if any) answered and
// returns the answer's instant, from which the interval rule counts.
func (s *Server) release(r *http.Request, number string, rec *Recepcion) time.Time {
	simkit.Sleep(r.Context(), s.cfg.Latency)
	if rec != nil && s.cfg.AfterRecepcion != nil {
		s.cfg.AfterRecepcion(r.Context(), *rec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	if l := s.lots[number]; l != nil {
		st := s.rucs[key{l.env, l.ruc}]
		st.busy = false
		if now.After(st.lastAnswer) {
			st.lastAnswer = now
		}
	}
	return now
}

func notQueued(why string) string { return "Lote no encolado para procesamiento: " + why }

// decide applies the lot and RUC rules and queues the lot, returning the
// answer; number is the lot queued, whose RUC's busy mark release clears.
// hash is "" for siRecepDE's lot of one, as "the same lot again" does not
// apply there (a DE sent again is rejected by its processing, 1001).
func (s *Server) decide(env string, des []DE, hash string, size int) (code, msg, number string) {
	now := s.lockDue()
	defer s.mu.Unlock()
	if len(des) == 0 {
		// No RUC to block: the lot has none.
		return CodeLotNotQueued, notQueued("el lote no contiene DE"), ""
	}
	ruc := des[0].RUC
	st := s.rucs[key{env, ruc}]
	if st == nil {
		st = &rucState{}
		s.rucs[key{env, ruc}] = st
	}
	block := func(why string) (string, string, string) {
		if st.lastBlock.IsZero() || now.Sub(st.lastBlock) >= blockMemory {
			st.level = 0 // not a recurrence
		}
		st.level, st.lastBlock = st.level+1, now
		d := min(s.cfg.Block*time.Duration(st.level), s.cfg.BlockMax)
		st.blockedUntil = now.Add(d)
		s.logger.Info("RUC blocked", slog.String("env", env), slog.String("ruc", ruc), slog.String("why", why), slog.Duration("for", d))
		return CodeLotNotQueued, notQueued(fmt.Sprintf("%s; RUC %s bloqueado por %s", why, ruc, d)), ""
	}
	if now.Before(st.blockedUntil) {
		return CodeLotNotQueued, notQueued(fmt.Sprintf("RUC %s bloqueado hasta %s", ruc, st.blockedUntil.Format(timeLayout))), ""
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
	case len(des) > maxLotDEs:
		return block(fmt.Sprintf("el lote contiene %d DE (máximo %d)", len(des), maxLotDEs))
	case size > MaxMessageBytes:
		return block(fmt.Sprintf("el mensaje tiene %d bytes (máximo %d)", size, MaxMessageBytes))
	}
	if prev := s.hashes[key{env, hash}]; prev != "" {
		return block("lote reenviado (ya recibido como lote " + prev + ")")
	}
	for _, de := range des {
		if c := s.cdcs[key{env, de.CDC}]; c != nil && s.lots[c.lot].verdicts == nil {
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
	number = next(&s.nextLot)
	s.lots[number] = &lot{number: number, env: env, ruc: ruc, des: des, queuedAt: now}
	if hash != "" {
		s.hashes[key{env, hash}] = number
	}
	for _, de := range des {
		k := key{env, de.CDC}
		if c := s.cdcs[k]; c != nil && c.approved {
			continue // stays approved; the lot's result will reject the duplicate
		}
		s.cdcs[k] = &cdcState{lot: number, ruc: ruc, xml: de.XML}
	}
	st.busy = true
	return CodeLotQueued, "Lote recibido con éxito", number
}

// lockDue locks s.mu, processes the lots whose processing time has passed
// and returns the time.
func (s *Server) lockDue() time.Time {
	s.mu.Lock()
	now := s.cfg.Clock()
	for _, l := range s.lots {
		if l.verdicts == nil && !now.Before(l.queuedAt.Add(s.cfg.Processing)) {
			s.process(l)
		}
	}
	return now
}

// next returns *n, a lot number or dProtAut, and counts it up; s.mu is held.
func next(n *uint64) string {
	*n++
	return strconv.FormatUint(*n-1, 10)
}

// process decides each DE of a lot. s.mu is held.
func (s *Server) process(l *lot) {
	l.verdicts = make([]verdict, 0, len(l.des))
	for _, de := range l.des {
		c := cmp.Or(s.cdcs[key{l.env, de.CDC}], &cdcState{})
		v := verdict{cdc: de.CDC, status: ResultApproved, code: "0260", msg: "Autorización del DE satisfactoria"}
		rejected := func(cd, m string) { v.status, v.code, v.msg = ResultRejected, cd, m }
		if cd, m := deProblem(de); cd != "" {
			rejected(cd, m)
		} else if c.approved && c.lot != l.number {
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
		if v.status == ResultApproved && s.cfg.Observe != nil {
			if cd, m, ok := s.cfg.Observe(l.env, de); ok {
				v.status, v.code, v.msg = ResultApprovedWithObs, cd, m
			}
		}
		if v.status != ResultRejected {
			v.aut = next(&s.nextAut)
			c.approved, c.aut = true, v.aut
		}
		l.verdicts = append(l.verdicts, v)
	}
}

// consultaLote serves siConsLoteDE.
func (s *Server) consultaLote(w http.ResponseWriter, _ *http.Request, env string, req *consLote, _ int) {
	now := s.lockDue()
	l := s.lots[strings.TrimSpace(req.LotNumber)]
	ruc, code, msg := "", CodeLotUnknown, "Número de Lote inexistente"
	var results []el
	switch {
	case l == nil || l.env != env:
	case now.Sub(l.queuedAt) > lotQueryWindow:
		ruc, code, msg = l.ruc, CodeLotTooLate, "Consulta extemporánea de Lote"
	case l.verdicts == nil:
		ruc, code, msg = l.ruc, CodeLotProcessing, "Lote "+l.number+" en procesamiento"
	default:
		ruc, code, msg = l.ruc, CodeLotDone, "Procesamiento de lote "+l.number+" concluido"
		for _, v := range l.verdicts {
			results = append(results, g("gResProcLote", v.fields(t("id", v.cdc))...))
		}
	}
	s.mu.Unlock()
	s.count(ServiceConsultaLote, env, ruc, code)
	writeXML(w, http.StatusOK, answer(g("rResEnviConsLoteDe",
		append([]el{t("dFecProc", now.Format(timeLayout)), t("dCodResLot", code), t("dMsgResLot", msg)}, results...)...)))
}

// consultaDE serves siConsDE.
func (s *Server) consultaDE(w http.ResponseWriter, _ *http.Request, env string, req *consDE, _ int) {
	now := s.lockDue()
	c := cmp.Or(s.cdcs[key{env, strings.TrimSpace(req.CDC)}], &cdcState{})
	code, msg := CodeDENotFound, "Documento No Existe en SIFEN o ha sido Rechazado"
	var content []el
	if c.approved {
		// xContenDE as SIFEN sends it: escaped text of the DE (rDE) with
		// its authorisation (dProtAut) and events (xContEv) beside it.
		code, msg = CodeDEFound, "CDC encontrado"
		content = []el{t("xContenDE", `<?xml version="1.0" encoding="UTF-8"?>`+string(c.xml)+"<dProtAut>"+c.aut+"</dProtAut><xContEv></xContEv>")}
	}
	s.mu.Unlock()
	s.count(ServiceConsultaDE, env, c.ruc, code)
	writeXML(w, http.StatusOK, answer(g("rEnviConsDeResponse",
		append([]el{t("dFecProc", now.Format(timeLayout)), t("dCodRes", code), t("dMsgRes", msg)}, content...)...)))
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
	writeJSON(w, map[string]any{"now": s.cfg.Advance(d).Format(time.RFC3339Nano), "fake": true})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
