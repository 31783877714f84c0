package dictsim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/simkit"
)

const maxCheckKeys = 200 // the most keys one checkKeys may ask about (OpenAPI 1.8.0)

// bucket returns the bucket of policy name for identifier, refilled to now, and
// its limits; ok is false for a policy the table does not have. s.mu must
// be held.
func (s *Server) bucket(name, identifier string) (*bucket, limit, bool) {
	i := slices.IndexFunc(policyTable, func(p policy) bool { return p.name == name })
	if i < 0 {
		return nil, limit{}, false
	}
	l := policyTable[i].limit
	switch {
	case policyTable[i].user:
		l = userLimits(len(identifier) == 14)
	case policyTable[i].byCategory:
		l = categoryLimits[s.category]
	}
	now := s.clock()
	k := bucketKey{name, identifier}
	b := s.buckets[k]
	if b == nil {
		b = &bucket{level: l.capacity * int64(l.period), at: now} // full
		s.buckets[k] = b
	}
	b.refill(l, now)
	return b, l, true
}

// call is an admitted request.
type call struct {
	participant string
	at          time.Time
}

// head is the start of the entry, key and claim responses.
func (c call) head() head { return head{ResponseTime: stamp(c.at), CorrelationID: correlationID()} }

// admit decides a request that needs the buckets of keys. While every one
// holds a positive balance it is admitted (nothing is charged yet) and,
// the configured latency later, charged by the status serve returns and
// answered with serve's document (a func() any is called after the charge,
// under s.mu, to build it). Charging at the answer is the DICT's counting:
// lookups in flight, all admitted while a bucket was positive, can take it
// below zero together; a client that went away during the latency is still
// charged. Otherwise it is answered 429 with Retry-After and charged nothing.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, op, participant string, serve func(*http.Request, call) (int, any), keys ...bucketKey) {
	s.mu.Lock()
	var wait time.Duration
	var empty []violation
	for _, k := range keys {
		b, l, _ := s.bucket(k.policy, k.identifier)
		if b.tokens(l) < 1 { // admitted while the balance is positive
			wait = max(wait, b.untilPositive(l))
			empty = append(empty, violation{Reason: "no tokens left", Property: "policy", Value: k.policy})
		}
	}
	c := call{participant: participant, at: s.clock()}
	s.mu.Unlock()
	if empty != nil {
		p := newProblem("RateLimited", http.StatusTooManyRequests, "Rate limited", "")
		if s.cfg.NameEmptyBucket {
			p.Violations = &empty
		}
		w.Header().Set("Retry-After", strconv.FormatInt(max(int64((wait+time.Second-1)/time.Second), 1), 10))
		s.write(w, op, http.StatusTooManyRequests, p)
		return
	}
	status, doc := serve(r, c)
	simkit.Sleep(r.Context(), s.cfg.Latency)
	s.mu.Lock()
	for _, k := range keys {
		b, l, _ := s.bucket(k.policy, k.identifier)
		b.add(l, -cost(k.policy, status))
	}
	if build, ok := doc.(func() any); ok {
		doc = build()
	}
	s.mu.Unlock()
	s.write(w, op, status, doc)
}

// admitted is the handler of op: it validates PI-RequestingParticipant
// (answering 400, or 403 on the policy endpoints, uncharged) and admits the
// request to the participant's bucket of policy, answered by serve.
func (s *Server) admitted(op, policy string, serve func(*http.Request, call) (int, any)) http.HandlerFunc {
	invalid := http.StatusBadRequest
	if policy == policiesList || policy == policiesRead {
		invalid = http.StatusForbidden
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if participant, ok := s.requester(w, r, op, invalid); ok {
			s.admit(w, r, op, participant, serve, bucketKey{policy, participant})
		}
	}
}

// fail is status with its problem, as an admitted request's answer.
func fail(status int, typ, title, detail string) (int, any) {
	return status, newProblem(typ, status, title, detail)
}

// write encodes doc and counts the response under op.
func (s *Server) write(w http.ResponseWriter, op string, status int, doc any) {
	data, err := xml.MarshalIndent(doc, "", "    ")
	if err != nil {
		s.cfg.Logger.Error("dictsim: encode", slog.String("op", op), slog.Any("error", err))
		status, data = http.StatusInternalServerError, nil
	} else {
		data = fmt.Appendf(nil, "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n%s\n", data)
	}
	s.mu.Lock()
	if s.stats[op] == nil {
		s.stats[op] = make(map[int]int64)
	}
	s.stats[op][status]++
	s.mu.Unlock()
	ct := "application/xml"
	if _, ok := doc.(*problem); ok {
		ct = "application/problem+xml"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func newProblem(typ string, status int, title, detail string) *problem {
	return &problem{Type: problemPrefix + typ, Title: title, Status: status, Detail: detail, CorrelationID: correlationID()}
}

// correlationID is 32 hexadecimal digits, as in the API's examples.
func correlationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requester returns the validated PI-RequestingParticipant, or answers
// status (400, or 403 on the policy endpoints) uncharged.
func (s *Server) requester(w http.ResponseWriter, r *http.Request, op string, status int) (string, bool) {
	p := r.Header.Get("PI-RequestingParticipant")
	if !ispbFormat.MatchString(p) {
		typ := map[int]string{http.StatusBadRequest: "BadRequest", http.StatusForbidden: "Forbidden"}[status]
		s.write(w, op, status, newProblem(typ, status, "Invalid PI-RequestingParticipant", "want 8 digits"))
		return "", false
	}
	return p, true
}

// decode reads the XML body of an admitted request into v.
func decode(r *http.Request, v any) error {
	return xml.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v)
}

// getEntry handles "GET /api/v2/entries/{key}": charged to the payer's USER
// anti-scan bucket (ENTRIES_READ_USER_ANTISCAN for EMAIL and PHONE keys,
// the _V2 policy otherwise) and to the participant's. A malformed key,
// PI-PayerId or PI-EndToEndId is a 400 charged nothing.
func (s *Server) getEntry(w http.ResponseWriter, r *http.Request) {
	const op = "getEntry"
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	key, payer, e2e := r.PathValue("key"), r.Header.Get("PI-PayerId"), r.Header.Get("PI-EndToEndId")
	typ, detail := keyType(key), ""
	switch {
	case typ == "":
		detail = "malformed key"
	case !payerFormat.MatchString(payer):
		detail = "PI-PayerId: want a CPF or CNPJ"
	case !e2eFormat.MatchString(e2e):
		detail = "PI-EndToEndId: malformed"
	}
	if detail != "" {
		s.write(w, op, http.StatusBadRequest, newProblem("BadRequest", http.StatusBadRequest, "Bad Request", detail))
		return
	}
	user := userAntiscanV2
	if typ == "EMAIL" || typ == "PHONE" {
		user = userAntiscan
	}
	s.admit(w, r, op, participant, func(_ *http.Request, c call) (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		e, found := s.entries[key]
		status, doc := fail(http.StatusNotFound, "EntryNotFound", "Entry not found", "")
		if found {
			stats := statistics{LastUpdated: stamp(c.at)}
			for _, t := range []string{"SETTLEMENTS", "REPORTED_FRAUDS", "CONFIRMED_FRAUDS", "REJECTED"} {
				for _, by := range []string{"KEY", "OWNER", "ACCOUNT"} {
					stats.Counters = append(stats.Counters, counter{Type: t, By: by})
				}
			}
			status, doc = http.StatusOK, &getEntryResponse{head: c.head(), Entry: e, Statistics: stats}
		}
		// Kept before the answer: the payment that may follow needs it.
		s.lookups[e2e] = &lookup{payer: payer, participant: participant, userPolicy: user, status: status}
		return status, doc
	}, bucketKey{user, payer}, bucketKey{participantAntiscan, participant})
}

// createEntry handles "POST /api/v2/entries/" (ENTRIES_WRITE).
func (s *Server) createEntry(r *http.Request, c call) (int, any) {
	var req createEntryRequest
	if err := decode(r, &req); err != nil {
		return fail(http.StatusBadRequest, "BadRequest", "Bad Request", err.Error())
	}
	if keyType(req.Entry.Key) != req.Entry.KeyType {
		return fail(http.StatusBadRequest, "EntryInvalid", "Bad Request", "the key is not of its KeyType")
	}
	if req.Entry.Account.Participant != c.participant {
		return fail(http.StatusForbidden, "Forbidden", "Forbidden", "the account is not the requesting participant's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.entries[req.Entry.Key]; exists {
		return fail(http.StatusConflict, "EntryAlreadyExists", "Conflict", "the key already has an entry")
	}
	h := c.head()
	req.Entry.CreationDate, req.Entry.KeyOwnershipDate = &h.ResponseTime, &h.ResponseTime
	s.entries[req.Entry.Key] = req.Entry
	return http.StatusCreated, &createEntryResponse{head: h, Entry: req.Entry}
}

// deleteEntry handles "POST /api/v2/entries/{key}/delete" (ENTRIES_WRITE).
func (s *Server) deleteEntry(r *http.Request, c call) (int, any) {
	var req deleteEntryRequest
	if err := decode(r, &req); err != nil || req.Key != r.PathValue("key") {
		return fail(http.StatusBadRequest, "BadRequest", "Bad Request", "the body's Key is not the path's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e, exists := s.entries[req.Key]; {
	case !exists:
		return fail(http.StatusNotFound, "EntryNotFound", "Entry not found", "")
	case e.Account.Participant != c.participant:
		return fail(http.StatusForbidden, "Forbidden", "Forbidden", "the entry is another participant's")
	}
	delete(s.entries, req.Key)
	return http.StatusOK, &deleteEntryResponse{head: c.head(), Key: req.Key}
}

// checkKeys handles "POST /api/v2/keys/check" (KEYS_CHECK): 1 to 200 keys.
func (s *Server) checkKeys(r *http.Request, c call) (int, any) {
	var req checkKeysRequest
	if err := decode(r, &req); err != nil {
		return fail(http.StatusBadRequest, "BadRequest", "Bad Request", err.Error())
	}
	if len(req.Keys) == 0 || len(req.Keys) > maxCheckKeys {
		return fail(http.StatusBadRequest, "BadRequest", "Bad Request", "want 1 to 200 keys")
	}
	if i := slices.IndexFunc(req.Keys, func(k string) bool { return keyType(k) == "" }); i >= 0 {
		return fail(http.StatusBadRequest, "BadRequest", "Bad Request", "malformed key "+strconv.Quote(req.Keys[i]))
	}
	out := &checkKeysResponse{head: c.head()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range req.Keys {
		_, found := s.entries[k]
		out.Keys = append(out.Keys, keyCheck{Key: k, HasEntry: found})
	}
	return http.StatusOK, out
}

// listClaims handles "GET /api/v2/claims/": CLAIMS_LIST_WITH_ROLE when
// filtered by donor or claimer, CLAIMS_LIST_WITHOUT_ROLE otherwise. The
// simulator holds no claims.
func (s *Server) listClaims(w http.ResponseWriter, r *http.Request) {
	policy := claimsListNoRole
	if q := r.URL.Query(); q.Get("IsDonor") == "true" || q.Get("IsClaimer") == "true" {
		policy = claimsListWithRole
	}
	s.admitted("listClaims", policy, func(_ *http.Request, c call) (int, any) {
		return http.StatusOK, &listClaimsResponse{head: c.head()}
	})(w, r)
}

// state reports participant's bucket of PSP policy name; s.mu must be held.
func (s *Server) state(name, participant string) policyState {
	b, l, _ := s.bucket(name, participant)
	return policyState{AvailableTokens: b.tokens(l), Capacity: l.capacity, RefillTokens: l.refill,
		RefillPeriodSec: int64(l.period / time.Second), Name: name}
}

// listPolicies handles "GET /api/v2/policies/" (POLICIES_LIST): every PSP
// bucket of the participant as it is when the request is answered (its own
// charge included), and the category.
func (s *Server) listPolicies(_ *http.Request, c call) (int, any) {
	return http.StatusOK, func() any {
		doc := &listPoliciesResponse{CorrelationID: correlationID(), ResponseTime: stamp(c.at), Category: s.category}
		for _, p := range policyTable {
			if !p.user {
				doc.Policies = append(doc.Policies, s.state(p.name, c.participant))
			}
		}
		return doc
	}
}

// getPolicy handles "GET /api/v2/policies/{policy}" (POLICIES_READ): 404
// NotFound for a policy that is not a PSP policy of the table.
func (s *Server) getPolicy(r *http.Request, c call) (int, any) {
	name := r.PathValue("policy")
	if !slices.ContainsFunc(policyTable, func(p policy) bool { return p.name == name && !p.user }) {
		return fail(http.StatusNotFound, "NotFound", "Policy not found", "no policy "+strings.ToValidUTF8(name, "?"))
	}
	return http.StatusOK, func() any {
		return &getPolicyResponse{CorrelationID: correlationID(), ResponseTime: stamp(c.at), Category: s.category, Policy: s.state(name, c.participant)}
	}
}
