// Package dictsim is a DICT simulator: a real HTTP server that speaks the
// DICT API's XML for the operations balde uses and enforces the DICT's
// limits server-side with the throttle engine, the dict catalog and the
// same counting rules as the client (dict.Meter), on a store of its own.
//
// Endpoints (API under dict.APIPrefix):
//
//	GET  /api/v2/entries/{Key}         getEntry: 200 GetEntryResponse, 404 EntryNotFound,
//	                                   400 for a malformed key or header, 429 RateLimited
//	POST /api/v2/entries/              createEntry: 201 CreateEntryResponse
//	POST /api/v2/entries/{Key}/delete  deleteEntry: 200 DeleteEntryResponse
//	POST /api/v2/keys/check            checkKeys: 200 CheckKeysResponse
//	GET  /api/v2/claims/               listClaims: 200 ListClaimsResponse (no claims)
//	GET  /api/v2/policies/             listBucketStates: the participant's PSP buckets
//	GET  /api/v2/policies/{policy}     getBucketState: 404 NotFound for an unknown policy
//	GET  /sim/stats                    JSON: responses by operation and status
//	POST /sim/payments?endToEndId=E2E  stands for the SPI receiving a pacs.008: credits the lookup
//	POST /sim/clock?advance=8m         moves the fake clock (Config.FakeClock only)
//
// A 429 carries Retry-After: the whole seconds until the request would be
// admitted (seed 000). A malformed PI-RequestingParticipant is a 403 on the
// policy endpoints and a 400 elsewhere. Requests rejected as malformed
// before their buckets are known are not charged.
package dictsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Config configures NewServer. The zero value is a usable simulator with
// no entries, category A, real time and a SQLite store in a temporary
// directory.
type Config struct {
	// Entries are the keys the directory holds; EntriesFile, when set, adds
	// those of a CSV file (see ReadEntries).
	Entries     []dict.Entry
	EntriesFile string
	// Category is every participant's category (default "A").
	Category string
	// Env is the env of the simulator's bucket keys (default "prod").
	Env string
	// PolicyFile overrides the catalog, as for the client.
	PolicyFile string
	// DB is the simulator's store (a DSN, see sqlstore.ParseDSN). Default:
	// a SQLite file in a temporary directory removed by Close. It must not
	// be the app's database: the simulator's buckets have the same keys.
	DB string
	// FakeClock makes time stand still until POST /sim/clock (or Advance)
	// moves it; it starts at Start (default: now).
	FakeClock bool
	Start     time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Server is a running simulator: an http.Handler with its own store. Open
// listens on an address; Close stops it and releases the store.
type Server struct {
	// now is the simulator's time; manual is set with Config.FakeClock.
	now     throttle.Clock
	manual  *throttle.ManualClock
	store   *sqlstore.Store
	limiter *throttle.Limiter
	catalog *dict.Catalog
	meter   dict.Meter
	records *dict.Records
	mux     *http.ServeMux
	logger  *slog.Logger
	tmpDir  string

	mu      sync.Mutex
	entries map[string]dict.Entry
	stats   Stats

	ln  net.Listener
	srv *http.Server
}

// NewServer opens the simulator's store (migrating it) and loads its
// entries. The caller must Close it.
func NewServer(ctx context.Context, cfg Config) (*Server, error) {
	s := &Server{
		now:     throttle.SystemClock,
		logger:  cfg.Logger,
		entries: make(map[string]dict.Entry),
		stats:   make(Stats),
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if cfg.FakeClock {
		start := cfg.Start
		if start.IsZero() {
			start = time.Now().UTC()
		}
		s.manual = throttle.NewManualClock(start)
		s.now = s.manual.Now
	}
	s.catalog = dict.NewCatalog(cfg.Env)
	category := cfg.Category
	if category == "" {
		category = "A"
	}
	if err := s.catalog.SetCategory(category); err != nil {
		return nil, fmt.Errorf("dictsim: %w", err)
	}
	if cfg.PolicyFile != "" {
		if err := s.catalog.LoadFile(cfg.PolicyFile); err != nil {
			return nil, fmt.Errorf("dictsim: %w", err)
		}
	}
	entries := cfg.Entries
	if cfg.EntriesFile != "" {
		more, err := LoadEntries(cfg.EntriesFile)
		if err != nil {
			return nil, err
		}
		entries = append(entries, more...)
	}
	start := dict.Timestamp{Time: s.now().UTC()}
	for _, e := range entries {
		if _, err := dict.ParseKeyAs(e.KeyType, e.Key); err != nil {
			return nil, fmt.Errorf("dictsim: entry: %w", err)
		}
		// Entries without dates were created when the simulator started.
		if e.Account.OpeningDate.IsZero() {
			e.Account.OpeningDate = start
		}
		if e.CreationDate == nil {
			e.CreationDate = &start
		}
		if e.KeyOwnershipDate == nil {
			e.KeyOwnershipDate = &start
		}
		s.entries[e.Key] = e
	}

	dsn := cfg.DB
	if dsn == "" {
		dir, err := os.MkdirTemp("", "dictsim-")
		if err != nil {
			return nil, fmt.Errorf("dictsim: %w", err)
		}
		s.tmpDir = dir
		dsn = "sqlite://" + filepath.Join(dir, "dictsim.db")
	}
	store, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Clock: s.now, Migrate: true, Logger: s.logger})
	if err != nil {
		s.removeTmp()
		return nil, fmt.Errorf("dictsim: %w", err)
	}
	s.store = store
	s.limiter, err = throttle.NewLimiter(store, s.catalog, throttle.Config{Clock: s.now, Logger: s.logger})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("dictsim: %w", err)
	}
	s.meter = dict.Meter{Limiter: s.limiter, Catalog: s.catalog}
	s.records = dict.NewRecords(store.DB(), store.ReadDB())
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	api := dict.APIPrefix
	s.mux.HandleFunc("GET "+api+"/entries/{key}", s.getEntry)
	s.mux.HandleFunc("POST "+api+"/entries/{$}", s.createEntry)
	s.mux.HandleFunc("POST "+api+"/entries/{key}/delete", s.deleteEntry)
	s.mux.HandleFunc("POST "+api+"/keys/check", s.checkKeys)
	s.mux.HandleFunc("GET "+api+"/claims/{$}", s.listClaims)
	s.mux.HandleFunc("GET "+api+"/policies/{$}", s.listPolicies)
	s.mux.HandleFunc("GET "+api+"/policies/{policy}", s.getPolicy)
	s.mux.HandleFunc("GET /sim/stats", s.showStats)
	s.mux.HandleFunc("POST /sim/payments", s.receivePayment)
	s.mux.HandleFunc("POST /sim/clock", s.advanceClock)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Open listens on addr, a loopback address (e.g. "127.0.0.1:0"; any other
// is refused), and serves in the background until Close. URL then returns
// the base URL to give the client.
func (s *Server) Open(addr string) error {
	ln, err := listenLoopback(addr)
	if err != nil {
		return err
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("dictsim: serve", slog.Any("error", err))
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
		return nil, fmt.Errorf("dictsim: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("dictsim: address %q: the simulator listens on loopback only (127.0.0.1, ::1, localhost)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dictsim: listen: %w", err)
	}
	return ln, nil
}

// URL returns "http://ADDR" of an opened server ("" before Open).
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops serving (if opened), closes the store and removes the
// temporary database, if the simulator made one.
func (s *Server) Close() error {
	var errs []error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.srv.Shutdown(ctx))
		cancel()
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	s.removeTmp()
	return errors.Join(errs...)
}

func (s *Server) removeTmp() {
	if s.tmpDir != "" {
		_ = os.RemoveAll(s.tmpDir)
	}
}

// Now returns the simulator's time.
func (s *Server) Now() time.Time { return s.now() }

// Advance moves the fake clock by d (>= 0) and returns the new time. It
// fails when the simulator runs on real time.
func (s *Server) Advance(d time.Duration) (time.Time, error) {
	if s.manual == nil {
		return time.Time{}, errors.New("dictsim: the clock is real (start with a fake clock to move it)")
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("dictsim: cannot move the clock back (%s)", d)
	}
	return s.manual.Advance(d), nil
}

// Limiter returns the simulator's limiter (its server-side buckets).
func (s *Server) Limiter() *throttle.Limiter { return s.limiter }

// Catalog returns the simulator's catalog.
func (s *Server) Catalog() *dict.Catalog { return s.catalog }

// Stats counts the responses of the simulator by operation and status.
type Stats map[string]map[int]int64

// Count returns the responses of op with status.
func (st Stats) Count(op string, status int) int64 { return st[op][status] }

// Total returns the responses with status, over every operation.
func (st Stats) Total(status int) int64 {
	var n int64
	for _, m := range st {
		n += m[status]
	}
	return n
}

// Stats returns a copy of the response counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(Stats, len(s.stats))
	for op, m := range s.stats {
		out[op] = make(map[int]int64, len(m))
		for k, v := range m {
			out[op][k] = v
		}
	}
	return out
}

func (s *Server) count(op string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats[op] == nil {
		s.stats[op] = make(map[int]int64)
	}
	s.stats[op][status]++
}

// showStats handles "GET /sim/stats".
func (s *Server) showStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

// advanceClock handles "POST /sim/clock?advance=DURATION".
func (s *Server) advanceClock(w http.ResponseWriter, r *http.Request) {
	d, err := time.ParseDuration(r.URL.Query().Get("advance"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "advance: want a duration such as 8m"})
		return
	}
	now, err := s.Advance(d)
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"now": now.Format(time.RFC3339Nano)})
}

// PaymentResult is the JSON answer of POST /sim/payments.
type PaymentResult struct {
	EndToEndID string              `json:"endToEndId"`
	Duplicate  bool                `json:"duplicate"`
	Adjusted   []throttle.Adjusted `json:"adjusted"`
}

// receivePayment handles "POST /sim/payments?endToEndId=E2E": the SPI
// received a payment order with that EndToEndId; the lookup's buckets are
// credited (+1 PF / +2 PJ, +1 participant, once).
func (s *Server) receivePayment(w http.ResponseWriter, r *http.Request) {
	e2e := r.URL.Query().Get("endToEndId")
	if err := dict.ValidateEndToEndID(e2e); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	l, err := s.records.FindLookup(r.Context(), e2e)
	if errors.Is(err, dict.ErrUnknownEndToEndID) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	pc, err := dict.CreditLookup(r.Context(), s.meter, s.records, l)
	if errors.Is(err, dict.ErrNotPayable) {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, PaymentResult{EndToEndID: e2e, Duplicate: pc.Duplicate, Adjusted: pc.Adjusted})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}
