package dictsim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxCheckKeys is the most keys one checkKeys may ask about (OpenAPI 1.8.0).
const maxCheckKeys = 200

// bucket returns the bucket of policy name for identifier, refilled to now, and
// its limits; ok is false for a policy the table does not have. s.mu must
// be held.
func (s *Server) bucket(name, identifier string) (*bucket, limit, bool) {
	var p policy
	found := false
	for _, q := range policyTable() {
		if q.name == name {
			p, found = q, true
			break
		}
	}
	if !found {
		return nil, limit{}, false
	}
	l := p.limit
	switch {
	case p.user:
		l = userLimits(len(identifier) == 14)
	case p.byCategory:
		l, _ = categoryLimits(s.category)
	}
	now := s.clock()
	k := bucketKey{name, identifier}
	b := s.buckets[k]
	if b == nil {
		b = newBucket(l, now)
		s.buckets[k] = b
	}
	b.refill(l, now)
	return b, l, true
}

// call is an admitted request: what it is charged to when answered.
type call struct {
	op          string
	participant string
	keys        []bucketKey
	at          time.Time
}

// admit decides a request that needs the buckets of keys: admitted while
// every one holds a positive balance (nothing is charged yet), otherwise
// answered 429 with Retry-After and charged nothing; ok is false then.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, op, participant string, keys ...bucketKey) (call, bool) {
	s.mu.Lock()
	var wait time.Duration
	var empty []violation
	for _, k := range keys {
		b, l, _ := s.bucket(k.policy, k.identifier)
		if !b.admits(l) {
			wait = max(wait, b.untilPositive(l))
			empty = append(empty, violation{Reason: "no tokens left", Property: "policy", Value: k.policy})
		}
	}
	now := s.clock()
	s.mu.Unlock()
	if empty == nil {
		return call{op: op, participant: participant, keys: keys, at: now}, true
	}
	p := newProblem("RateLimited", http.StatusTooManyRequests, "Rate limited", "", participant)
	if s.nameEmptyBucket {
		p.Violations = &violations{List: empty}
	}
	w.Header().Set("Retry-After", strconv.FormatInt(max(int64((wait+time.Second-1)/time.Second), 1), 10))
	s.write(w, op, http.StatusTooManyRequests, p)
	return call{}, false
}

// answer waits the configured latency (the DICT working on the request),
// then charges c's buckets by status and writes doc (a document, or a
// *problem; a func() any is called after the charge, under s.mu, to build
// it). Charging at the answer, not at the admission, is the DICT's
// counting: requests admitted while a bucket was positive are all charged
// when they are answered, so lookups in flight can take a bucket below
// zero together, as they can at the DICT. A client that went away during
// the latency is still charged: its request reached the DICT.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, c call, status int, doc any) {
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	s.mu.Lock()
	for _, k := range c.keys {
		b, l, _ := s.bucket(k.policy, k.identifier)
		b.add(l, -cost(k.policy, status))
	}
	if build, ok := doc.(func() any); ok {
		doc = build()
	}
	s.mu.Unlock()
	s.write(w, c.op, status, doc)
}

// write encodes doc and counts the response under op.
func (s *Server) write(w http.ResponseWriter, op string, status int, doc any) {
	data, err := encodeXML(doc)
	if err != nil {
		s.logger.Error("dictsim: encode", slog.String("op", op), slog.Any("error", err))
		status, data = http.StatusInternalServerError, nil
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

func newProblem(typ string, status int, title, detail, participant string) *problem {
	return &problem{Type: problemPrefix + typ, Title: title, Status: status, Detail: detail, CorrelationID: correlationID(participant)}
}

// correlationID is 32 hexadecimal digits, as in the API's examples.
func correlationID(string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requester returns the validated PI-RequestingParticipant, or answers
// status (400, or 403 on the policy endpoints) uncharged.
func (s *Server) requester(w http.ResponseWriter, r *http.Request, op string, status int) (string, bool) {
	p := r.Header.Get("PI-RequestingParticipant")
	if !ispbFormat.MatchString(p) {
		typ := "BadRequest"
		if status == http.StatusForbidden {
			typ = "Forbidden"
		}
		s.write(w, op, status, newProblem(typ, status, "Invalid PI-RequestingParticipant", "want 8 digits", ""))
		return "", false
	}
	return p, true
}

func (s *Server) badRequest(w http.ResponseWriter, op, participant, detail string) {
	s.write(w, op, http.StatusBadRequest, newProblem("BadRequest", http.StatusBadRequest, "Bad Request", detail, participant))
}

// decode reads the XML body of an admitted request into v.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	return xml.Unmarshal(data, v)
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
	typ := keyType(key)
	switch {
	case typ == "":
		s.badRequest(w, op, participant, "malformed key")
		return
	case !payerFormat.MatchString(payer):
		s.badRequest(w, op, participant, "PI-PayerId: want a CPF or CNPJ")
		return
	case !e2eFormat.MatchString(e2e):
		s.badRequest(w, op, participant, "PI-EndToEndId: malformed")
		return
	}
	user := userAntiscanV2
	if typ == "EMAIL" || typ == "PHONE" {
		user = userAntiscan
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{user, payer}, bucketKey{participantAntiscan, participant})
	if !ok {
		return
	}
	s.mu.Lock()
	e, found := s.entries[key]
	status := http.StatusNotFound
	if found {
		status = http.StatusOK
	}
	// Kept before the answer: the payment that may follow needs it.
	s.lookups[e2e] = &lookup{payer: payer, participant: participant, userPolicy: user, status: status}
	s.mu.Unlock()
	if !found {
		s.answer(w, r, c, status, newProblem("EntryNotFound", status, "Entry not found", "", participant))
		return
	}
	stats := statistics{LastUpdated: stamp(c.at)}
	for _, t := range []string{"SETTLEMENTS", "REPORTED_FRAUDS", "CONFIRMED_FRAUDS", "REJECTED"} {
		for _, by := range []string{"KEY", "OWNER", "ACCOUNT"} {
			stats.Counters = append(stats.Counters, counter{Type: t, By: by})
		}
	}
	s.answer(w, r, c, status, &getEntryResponse{ResponseTime: stamp(c.at), CorrelationID: correlationID(participant), Entry: e, Statistics: stats})
}

// createEntry handles "POST /api/v2/entries/" (ENTRIES_WRITE).
func (s *Server) createEntry(w http.ResponseWriter, r *http.Request) {
	const op = "createEntry"
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{entriesWrite, participant})
	if !ok {
		return
	}
	var req createEntryRequest
	if err := decode(r, &req); err != nil {
		s.answer(w, r, c, http.StatusBadRequest, newProblem("BadRequest", 400, "Bad Request", err.Error(), participant))
		return
	}
	if keyType(req.Entry.Key) != req.Entry.KeyType {
		s.answer(w, r, c, http.StatusBadRequest, newProblem("EntryInvalid", 400, "Bad Request", "the key is not of its KeyType", participant))
		return
	}
	if req.Entry.Account.Participant != participant {
		s.answer(w, r, c, http.StatusForbidden, newProblem("Forbidden", 403, "Forbidden", "the account is not the requesting participant's", participant))
		return
	}
	s.mu.Lock()
	if _, exists := s.entries[req.Entry.Key]; exists {
		s.mu.Unlock()
		s.answer(w, r, c, http.StatusConflict, newProblem("EntryAlreadyExists", 409, "Conflict", "the key already has an entry", participant))
		return
	}
	ts := stamp(c.at)
	req.Entry.CreationDate, req.Entry.KeyOwnershipDate = &ts, &ts
	s.entries[req.Entry.Key] = req.Entry
	s.mu.Unlock()
	s.answer(w, r, c, http.StatusCreated, &createEntryResponse{ResponseTime: ts, CorrelationID: correlationID(participant), Entry: req.Entry})
}

// deleteEntry handles "POST /api/v2/entries/{key}/delete" (ENTRIES_WRITE).
func (s *Server) deleteEntry(w http.ResponseWriter, r *http.Request) {
	const op = "deleteEntry"
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{entriesWrite, participant})
	if !ok {
		return
	}
	var req deleteEntryRequest
	if err := decode(r, &req); err != nil || req.Key != r.PathValue("key") {
		s.answer(w, r, c, http.StatusBadRequest, newProblem("BadRequest", 400, "Bad Request", "the body's Key is not the path's", participant))
		return
	}
	s.mu.Lock()
	e, exists := s.entries[req.Key]
	switch {
	case !exists:
		s.mu.Unlock()
		s.answer(w, r, c, http.StatusNotFound, newProblem("EntryNotFound", 404, "Entry not found", "", participant))
		return
	case e.Account.Participant != participant:
		s.mu.Unlock()
		s.answer(w, r, c, http.StatusForbidden, newProblem("Forbidden", 403, "Forbidden", "the entry is another participant's", participant))
		return
	}
	delete(s.entries, req.Key)
	s.mu.Unlock()
	s.answer(w, r, c, http.StatusOK, &deleteEntryResponse{ResponseTime: stamp(c.at), CorrelationID: correlationID(participant), Key: req.Key})
}

// checkKeys handles "POST /api/v2/keys/check" (KEYS_CHECK): 1 to 200 keys.
func (s *Server) checkKeys(w http.ResponseWriter, r *http.Request) {
	const op = "checkKeys"
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{keysCheck, participant})
	if !ok {
		return
	}
	var req checkKeysRequest
	err := decode(r, &req)
	switch {
	case err == nil && (len(req.Keys) == 0 || len(req.Keys) > maxCheckKeys):
		err = errors.New("want 1 to 200 keys")
	case err == nil:
		for _, k := range req.Keys {
			if keyType(k) == "" {
				err = errors.New("malformed key " + strconv.Quote(k))
				break
			}
		}
	}
	if err != nil {
		s.answer(w, r, c, http.StatusBadRequest, newProblem("BadRequest", 400, "Bad Request", err.Error(), participant))
		return
	}
	out := &checkKeysResponse{ResponseTime: stamp(c.at), CorrelationID: correlationID(participant)}
	s.mu.Lock()
	for _, k := range req.Keys {
		_, found := s.entries[k]
		out.Keys = append(out.Keys, keyCheck{Key: k, HasEntry: found})
	}
	s.mu.Unlock()
	s.answer(w, r, c, http.StatusOK, out)
}

// listClaims handles "GET /api/v2/claims/": CLAIMS_LIST_WITH_ROLE when
// filtered by donor or claimer, CLAIMS_LIST_WITHOUT_ROLE otherwise. The
// simulator holds no claims.
func (s *Server) listClaims(w http.ResponseWriter, r *http.Request) {
	const op = "listClaims"
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	policy := claimsListNoRole
	if q := r.URL.Query(); q.Get("IsDonor") == "true" || q.Get("IsClaimer") == "true" {
		policy = claimsListWithRole
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{policy, participant})
	if !ok {
		return
	}
	s.answer(w, r, c, http.StatusOK, &listClaimsResponse{ResponseTime: stamp(c.at), CorrelationID: correlationID(participant)})
}

// state reports the bucket of PSP policy p of participant; s.mu must be
// held.
func (s *Server) state(p policy, participant string) policyState {
	b, l, _ := s.bucket(p.name, participant)
	return policyState{AvailableTokens: b.tokens(l), Capacity: l.capacity, RefillTokens: l.refill,
		RefillPeriodSec: int64(l.period / time.Second), Name: p.name}
}

// listPolicies handles "GET /api/v2/policies/" (POLICIES_LIST): every PSP
// bucket of the participant as it is when the request is answered (its own
// charge included), and the category.
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	const op = "listBucketStates"
	participant, ok := s.requester(w, r, op, http.StatusForbidden)
	if !ok {
		return
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{policiesList, participant})
	if !ok {
		return
	}
	s.answer(w, r, c, http.StatusOK, func() any {
		doc := &listPoliciesResponse{CorrelationID: correlationID(participant), ResponseTime: stamp(c.at), Category: s.category}
		for _, p := range policyTable() {
			if !p.user {
				doc.Policies = append(doc.Policies, s.state(p, participant))
			}
		}
		return doc
	})
}

// getPolicy handles "GET /api/v2/policies/{policy}" (POLICIES_READ): 404
// NotFound for a policy that is not a PSP policy of the table.
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	const op = "getBucketState"
	participant, ok := s.requester(w, r, op, http.StatusForbidden)
	if !ok {
		return
	}
	c, ok := s.admit(w, r, op, participant, bucketKey{policiesRead, participant})
	if !ok {
		return
	}
	name := r.PathValue("policy")
	for _, p := range policyTable() {
		if p.name == name && !p.user {
			s.answer(w, r, c, http.StatusOK, func() any {
				return &getPolicyResponse{CorrelationID: correlationID(participant), ResponseTime: stamp(c.at), Category: s.category, Policy: s.state(p, participant)}
			})
			return
		}
	}
	s.answer(w, r, c, http.StatusNotFound, newProblem("NotFound", http.StatusNotFound, "Policy not found", "no policy "+strings.ToValidUTF8(name, "?"), participant))
}
