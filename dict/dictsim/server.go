// Package dictsim is a DICT simulator: a real HTTP server that speaks the
// DICT API's XML and enforces the DICT's limits server-side, as an oracle for
// balde's client. It imports nothing of balde: its policy table (the DICT
// manual, chapter 19), buckets and XML are its own, so a shared mistake
// cannot hide.
//
// Its counting is the DICT's: a request is admitted while every bucket it
// needs holds a positive balance and charged by its outcome when answered,
// Config.Latency later (a getEntry 404 costs the payer 20, the participant 3);
// otherwise it gets 429 RateLimited with Retry-After, the whole seconds until
// the balance is positive, and is charged nothing.
//
// Endpoints (API under /api/v2):
//
//	GET  /api/v2/entries/{Key}         getEntry (PI-PayerId, PI-EndToEndId)
//	POST /api/v2/entries/              createEntry
//	POST /api/v2/entries/{Key}/delete  deleteEntry
//	POST /api/v2/keys/check            checkKeys (at most 200 keys)
//	GET  /api/v2/claims/               listClaims (the simulator holds no claims)
//	GET  /api/v2/policies/             listBucketStates, from the simulator's own buckets
//	GET  /api/v2/policies/{policy}     getBucketState
//	GET  /sim/stats                    JSON: responses by operation and status
//	POST /sim/payments?endToEndId=E2E  the SPI received a payment order: credits the lookup's buckets once
//	POST /sim/clock?advance=8m         moves the fake clock (Config.FakeClock only)
//	POST /sim/category?category=H      the DICT moves every participant to another category
package dictsim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/balde-throttle/balde/internal/simkit"
)

// Config configures NewServer. The zero value is a usable simulator with
// no entries, category A, real time and no latency.
type Config struct {
	// Entries are the keys the directory holds; EntriesFile adds those of a
	// CSV file (see ReadEntries).
	Entries     []Entry
	EntriesFile string
	Category    string        // every participant's category, A..H (default "A")
	Latency     time.Duration // from admission to charge and answer (real time)
	// NameEmptyBucket names the empty bucket's policy in a 429's problem (a
	// violation of property "policy"), which the public API does not say.
	NameEmptyBucket bool
	// FakeClock makes time stand still from Start (default: now) until
	// POST /sim/clock or Advance moves it.
	FakeClock bool
	Start     time.Time
	Logger    *slog.Logger // default slog.Default()
}

// Server is a running simulator, an http.Handler. Open listens on an
// address; Close stops it.
type Server struct {
	cfg Config // Logger set
	mux *http.ServeMux

	mu       sync.Mutex
	category string
	now      time.Time // the fake clock's time
	entries  map[string]Entry
	buckets  map[bucketKey]*bucket
	lookups  map[string]*lookup
	stats    Stats

	l simkit.Listener
}

type bucketKey struct{ policy, identifier string }

// lookup is a getEntry answered, kept for the payment that may follow.
type lookup struct {
	payer, participant, userPolicy string
	status                         int
	paid                           bool
}

// NewServer returns a simulator holding cfg's entries.
func NewServer(_ context.Context, cfg Config) (*Server, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	s := &Server{
		cfg:     cfg,
		now:     cmp.Or(cfg.Start, time.Now().UTC()),
		entries: make(map[string]Entry),
		buckets: make(map[bucketKey]*bucket),
		lookups: make(map[string]*lookup),
		stats:   make(Stats),
	}
	if err := s.SetCategory(cmp.Or(cfg.Category, "A")); err != nil {
		return nil, err
	}
	if cfg.Latency < 0 {
		return nil, fmt.Errorf("dictsim: negative latency %s", cfg.Latency)
	}
	entries := cfg.Entries
	if cfg.EntriesFile != "" {
		more, err := LoadEntries(cfg.EntriesFile)
		if err != nil {
			return nil, err
		}
		entries = append(entries, more...)
	}
	start := stamp(s.Now())
	for _, e := range entries {
		if keyType(e.Key) != e.KeyType {
			return nil, fmt.Errorf("dictsim: entry %q is not a %s key", e.Key, e.KeyType)
		}
		// Entries without dates were created when the simulator started.
		e.Account.OpeningDate = stamp(cmp.Or(time.Time(e.Account.OpeningDate), time.Time(start)))
		e.CreationDate, e.KeyOwnershipDate = cmp.Or(e.CreationDate, &start), cmp.Or(e.KeyOwnershipDate, &start)
		s.entries[e.Key] = e
	}
	s.mux = http.NewServeMux()
	const api = "/api/v2"
	s.mux.HandleFunc("GET "+api+"/entries/{key}", s.getEntry)
	s.mux.HandleFunc("POST "+api+"/entries/{$}", s.admitted("createEntry", entriesWrite, s.createEntry))
	s.mux.HandleFunc("POST "+api+"/entries/{key}/delete", s.admitted("deleteEntry", entriesWrite, s.deleteEntry))
	s.mux.HandleFunc("POST "+api+"/keys/check", s.admitted("checkKeys", keysCheck, s.checkKeys))
	s.mux.HandleFunc("GET "+api+"/claims/{$}", s.listClaims)
	s.mux.HandleFunc("GET "+api+"/policies/{$}", s.admitted("listBucketStates", policiesList, s.listPolicies))
	s.mux.HandleFunc("GET "+api+"/policies/{policy}", s.admitted("getBucketState", policiesRead, s.getPolicy))
	s.mux.Handle("GET /sim/stats", jsonHandler(func(*http.Request) (int, any) { return http.StatusOK, s.Stats() }))
	s.mux.Handle("POST /sim/payments", jsonHandler(s.receivePayment))
	s.mux.Handle("POST /sim/clock", jsonHandler(s.advanceClock))
	s.mux.Handle("POST /sim/category", jsonHandler(s.changeCategory))
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Open listens on addr, a loopback address (e.g. "127.0.0.1:0"; any other
// is refused), and serves in the background until Close.
func (s *Server) Open(addr string) error { return s.l.Open("dictsim", addr, s, s.cfg.Logger) }

// URL returns "http://ADDR" of an opened server ("" before Open).
func (s *Server) URL() string { return s.l.URL() }

// Close stops serving, if opened.
func (s *Server) Close() error { return s.l.Close() }

// Now returns the simulator's time.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock()
}

// clock reads the time; s.mu must be held.
func (s *Server) clock() time.Time {
	if s.cfg.FakeClock {
		return s.now
	}
	return time.Now().UTC()
}

// Advance moves the fake clock by d (>= 0) and returns the new time.
func (s *Server) Advance(d time.Duration) (time.Time, error) {
	if !s.cfg.FakeClock {
		return time.Time{}, errors.New("dictsim: the clock is real (start with a fake clock to move it)")
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("dictsim: cannot move the clock back (%s)", d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	return s.now, nil
}

// SetCategory moves every participant to category (A..H), as the DICT does
// when it reviews a participant: the categorised buckets keep their
// balance, capped at the new capacity, and refill at the new rate.
func (s *Server) SetCategory(category string) error {
	if _, ok := categoryLimits[category]; !ok {
		return fmt.Errorf("dictsim: category %q is not A..H", category)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Bring the categorised buckets up to now under the old limits first.
	for k := range s.buckets {
		s.bucket(k.policy, k.identifier)
	}
	s.category = category
	return nil
}

// changeCategory handles "POST /sim/category?category=H".
func (s *Server) changeCategory(r *http.Request) (int, any) {
	category := r.URL.Query().Get("category")
	if err := s.SetCategory(category); err != nil {
		return http.StatusBadRequest, map[string]string{"error": err.Error()}
	}
	return http.StatusOK, map[string]string{"category": category}
}

// Balance returns the whole tokens in the bucket of policy for identifier
// (a payer's CPF/CNPJ or a participant's ISPB) now; ok is false for a
// policy the simulator does not have.
func (s *Server) Balance(policy, identifier string) (tokens int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, l, ok := s.bucket(policy, identifier)
	if !ok {
		return 0, false
	}
	return b.tokens(l), true
}

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
		out[op] = maps.Clone(m)
	}
	return out
}

// advanceClock handles "POST /sim/clock?advance=DURATION".
func (s *Server) advanceClock(r *http.Request) (int, any) {
	d, err := time.ParseDuration(r.URL.Query().Get("advance"))
	if err != nil {
		return http.StatusBadRequest, map[string]string{"error": "advance: want a duration such as 8m"}
	}
	now, err := s.Advance(d)
	if err != nil {
		return http.StatusConflict, map[string]string{"error": err.Error()}
	}
	return http.StatusOK, map[string]string{"now": now.Format(time.RFC3339Nano)}
}

// credited is what a payment gave one bucket.
type credited struct {
	Policy     string `json:"policy"`
	Identifier string `json:"identifier"`
	Applied    int64  `json:"applied"`
	Balance    int64  `json:"balance"`
}

// PaymentResult is the JSON answer of POST /sim/payments.
type PaymentResult struct {
	EndToEndID string     `json:"endToEndId"`
	Duplicate  bool       `json:"duplicate"`
	Credited   []credited `json:"credited"`
}

// receivePayment handles "POST /sim/payments?endToEndId=E2E": the SPI got a
// payment order after a lookup that found its key, whose buckets are credited
// once (+1 PF / +2 PJ, +1 participant, capped at capacity); 404 for an
// unknown EndToEndId, 409 for a lookup that did not end in 200.
func (s *Server) receivePayment(r *http.Request) (int, any) {
	e2e := r.URL.Query().Get("endToEndId")
	if !e2eFormat.MatchString(e2e) {
		return http.StatusBadRequest, map[string]string{"error": "endToEndId: not an EndToEndId"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lookups[e2e]
	switch {
	case !ok:
		return http.StatusNotFound, map[string]string{"error": "no lookup with EndToEndId " + e2e}
	case l.status != http.StatusOK:
		return http.StatusConflict, map[string]string{"error": "the lookup ended in " + strconv.Itoa(l.status)}
	}
	res := PaymentResult{EndToEndID: e2e, Duplicate: l.paid}
	if !l.paid {
		l.paid = true
		for _, k := range []bucketKey{{l.userPolicy, l.payer}, {participantAntiscan, l.participant}} {
			b, lim, _ := s.bucket(k.policy, k.identifier)
			applied := b.add(lim, paymentCredit(k.policy, len(l.payer) == 14))
			res.Credited = append(res.Credited, credited{Policy: k.policy, Identifier: k.identifier, Applied: applied, Balance: b.tokens(lim)})
		}
	}
	return http.StatusOK, res
}

// jsonHandler serves a /sim/ endpoint: the status and JSON document its
// function returns.
type jsonHandler func(*http.Request) (int, any)

func (h jsonHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, v := h(r)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
