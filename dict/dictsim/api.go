package dictsim

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
)

// call is an admitted API request: the requesting participant, what its
// admission reserved, and the instant it is answered at.
type call struct {
	op          string
	participant string
	res         dict.Reservation
	now         time.Time
}

// responseTime and correlationID stamp the answer of c.
func (c call) responseTime() dict.Timestamp { return dict.Timestamp{Time: c.now} }
func (c call) correlationID() string        { return dict.NewCorrelationID(c.participant, c.now) }

// outcome is how a request ends: its status, and the document of a success
// (doc) or the problem of a failure.
type outcome struct {
	status int
	doc    any
	// typ is the problem type (dict.ProblemBadRequest, ...); title "" is
	// the status text ("Bad Request").
	typ, title, detail string
}

func success(status int, doc any) outcome { return outcome{status: status, doc: doc} }

func failure(status int, typ, title, detail string) outcome {
	if title == "" {
		title = http.StatusText(status)
	}
	return outcome{status: status, typ: typ, title: title, detail: detail}
}

func badRequest(err error) outcome {
	return failure(http.StatusBadRequest, dict.ProblemBadRequest, "Bad request", err.Error())
}

// unavailable logs err (what failed) and returns a 503.
func (s *Server) unavailable(op, what string, err error) outcome {
	s.logger.Error("dictsim: "+what, slog.String("op", op), slog.Any("error", err))
	return failure(http.StatusServiceUnavailable, dict.ProblemServiceUnavailable, "Service unavailable", "")
}

// write answers out (its document, or its RFC 7807 problem), counted
// under op. A document that cannot be encoded is answered with a 500.
func (s *Server) write(w http.ResponseWriter, op string, out outcome) {
	contentType, v := dict.ContentTypeXML, out.doc
	if v == nil {
		contentType, v = dict.ContentTypeProblemXML, dict.NewProblem(out.typ, out.status, out.title, out.detail)
	}
	data, err := dict.Marshal(v)
	if err != nil && out.doc != nil {
		s.logger.Error("dictsim: encode", slog.String("op", op), slog.Any("error", err))
		s.write(w, op, failure(http.StatusInternalServerError, dict.ProblemInternalServerError, "Internal server error", ""))
		return
	}
	s.count(op, out.status)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(out.status)
	_, _ = w.Write(data)
}

// admit checks PI-RequestingParticipant (a malformed one is answered
// badParticipant: 400, or 403 on the policy endpoints; nothing is charged)
// and charges the request to the participant's bucket of policy (see
// charge). ok is false when it answered.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, op string, badParticipant int, policy string) (call, bool) {
	participant, ok := s.requester(w, r, op, badParticipant)
	if !ok {
		return call{}, false
	}
	return s.charge(w, r, op, participant, "", s.catalog.Key(policy, participant))
}

// charge reserves the request's tokens from the simulator's buckets. When
// refused it answers 429 with Retry-After (and ok is false); when the store
// fails it answers 503.
func (s *Server) charge(w http.ResponseWriter, r *http.Request, op, participant, ref string, keys ...throttle.Key) (call, bool) {
	res, err := s.meter.Reserve(r.Context(), op, ref, keys...)
	var refused *dict.RefusedError
	switch {
	case errors.As(err, &refused):
		d := refused.Decision
		w.Header().Set("Retry-After", retryAfterSeconds(d.RetryAfter))
		s.write(w, op, failure(http.StatusTooManyRequests, dict.ProblemRateLimited, "Rate limited",
			d.Key.Policy+": "+d.Reason.String()+" ("+d.RetryAfter.String()+" until a token is available)"))
		return call{}, false
	case errors.Is(err, throttle.ErrInvalidKey):
		s.write(w, op, badRequest(err))
		return call{}, false
	case err != nil:
		s.write(w, op, s.unavailable(op, "reserve", err))
		return call{}, false
	}
	return call{op: op, participant: participant, res: res, now: s.now()}, true
}

// finish settles c by the status of out, then answers out. Settling never
// waits on the request's context: the tokens were taken.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, c call, out outcome) {
	if _, err := s.meter.Settle(context.WithoutCancel(r.Context()), c.res, dict.Outcome(out.status)); err != nil {
		s.logger.Error("dictsim: settle", slog.String("op", c.op), slog.Any("error", err))
	}
	s.write(w, c.op, out)
}

// requester returns the validated PI-RequestingParticipant, or answers
// status (400, or 403 on the policy endpoints) and returns false.
func (s *Server) requester(w http.ResponseWriter, r *http.Request, op string, status int) (string, bool) {
	p := r.Header.Get(dict.HeaderRequestingParticipant)
	if err := dict.ValidateISPB(p); err != nil {
		typ := dict.ProblemBadRequest
		if status == http.StatusForbidden {
			typ = dict.ProblemForbidden
		}
		s.write(w, op, failure(status, typ, "Invalid "+dict.HeaderRequestingParticipant, err.Error()))
		return "", false
	}
	return p, true
}

// getEntry handles "GET /api/v2/entries/{key}". A malformed key, payer or
// EndToEndId is a 400 and charges nothing.
func (s *Server) getEntry(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpGetEntry
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	key, payer, e2e, err := parseLookup(r)
	if err != nil {
		s.write(w, op, badRequest(err))
		return
	}
	c, ok := s.charge(w, r, op, participant, e2e, s.catalog.LookupKeys(key.Type, payer, participant)...)
	if !ok {
		return
	}
	s.mu.Lock()
	entry, found := s.entries[key.Value]
	s.mu.Unlock()
	out := failure(http.StatusNotFound, dict.ProblemEntryNotFound, "Entry not found", "")
	if found {
		out = success(http.StatusOK, &dict.GetEntryResponse{ResponseTime: c.responseTime(), CorrelationID: c.correlationID(), Entry: entry})
	}
	// Recorded before the answer: the payment that may follow needs it.
	if err := s.records.RecordLookup(context.WithoutCancel(r.Context()), dict.Lookup{
		EndToEndID: e2e, Env: s.catalog.Env(), PayerID: payer, KeyType: key.Type,
		Policy: c.res.Keys[0].Policy, Participant: participant, Status: out.status, LookedUpAt: c.now,
	}); err != nil {
		s.logger.Error("dictsim: record lookup", slog.Any("error", err))
	}
	s.finish(w, r, c, out)
}

// parseLookup reads the key, PI-PayerId and PI-EndToEndId of a getEntry.
func parseLookup(r *http.Request) (key dict.Key, payer, e2e string, err error) {
	payer, e2e = r.Header.Get(dict.HeaderPayerID), r.Header.Get(dict.HeaderEndToEndID)
	if _, err := dict.ParsePayerID(payer); err != nil {
		return key, "", "", err
	}
	if err := dict.ValidateEndToEndID(e2e); err != nil {
		return key, "", "", err
	}
	key, err = dict.ParseKey(r.PathValue("key"))
	return key, payer, e2e, err
}

// createEntry handles "POST /api/v2/entries/".
func (s *Server) createEntry(w http.ResponseWriter, r *http.Request) {
	c, ok := s.admit(w, r, dict.OpCreateEntry, http.StatusBadRequest, dict.PolicyEntriesWrite)
	if !ok {
		return
	}
	s.finish(w, r, c, s.addEntry(r, c))
}

// addEntry adds the entry of a createEntry request to the directory.
func (s *Server) addEntry(r *http.Request, c call) outcome {
	var req dict.CreateEntryRequest
	if err := dict.Decode(r.Body, &req); err != nil {
		return failure(http.StatusBadRequest, dict.ProblemBadRequest, "", err.Error())
	}
	if _, err := dict.ParseKeyAs(req.Entry.KeyType, req.Entry.Key); err != nil {
		return failure(http.StatusBadRequest, dict.ProblemEntryInvalid, "", err.Error())
	}
	if req.Entry.Account.Participant != c.participant {
		return failure(http.StatusForbidden, dict.ProblemForbidden, "", "the account is not the requesting participant's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.entries[req.Entry.Key]; exists {
		return failure(http.StatusConflict, dict.ProblemEntryAlreadyExists, "", "the key already has an entry")
	}
	ts := c.responseTime()
	req.Entry.CreationDate, req.Entry.KeyOwnershipDate = &ts, &ts
	s.entries[req.Entry.Key] = req.Entry
	return success(http.StatusCreated, &dict.CreateEntryResponse{ResponseTime: ts, CorrelationID: c.correlationID(), Entry: req.Entry})
}

// deleteEntry handles "POST /api/v2/entries/{key}/delete".
func (s *Server) deleteEntry(w http.ResponseWriter, r *http.Request) {
	c, ok := s.admit(w, r, dict.OpDeleteEntry, http.StatusBadRequest, dict.PolicyEntriesWrite)
	if !ok {
		return
	}
	s.finish(w, r, c, s.removeEntry(r, c))
}

// removeEntry removes the entry of a deleteEntry request from the
// directory.
func (s *Server) removeEntry(r *http.Request, c call) outcome {
	var req dict.DeleteEntryRequest
	if err := dict.Decode(r.Body, &req); err != nil {
		return failure(http.StatusBadRequest, dict.ProblemBadRequest, "", err.Error())
	}
	if req.Key != r.PathValue("key") {
		return failure(http.StatusBadRequest, dict.ProblemBadRequest, "", "the body's Key is not the path's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, exists := s.entries[req.Key]
	switch {
	case !exists:
		return failure(http.StatusNotFound, dict.ProblemEntryNotFound, "", "")
	case e.Account.Participant != c.participant:
		return failure(http.StatusForbidden, dict.ProblemForbidden, "", "the entry is another participant's")
	}
	delete(s.entries, req.Key)
	return success(http.StatusOK, &dict.DeleteEntryResponse{ResponseTime: c.responseTime(), CorrelationID: c.correlationID(), Key: req.Key})
}

// checkKeys handles "POST /api/v2/keys/check".
func (s *Server) checkKeys(w http.ResponseWriter, r *http.Request) {
	c, ok := s.admit(w, r, dict.OpCheckKeys, http.StatusBadRequest, dict.PolicyKeysCheck)
	if !ok {
		return
	}
	s.finish(w, r, c, s.findKeys(r, c))
}

// findKeys says which keys of a checkKeys request have an entry.
func (s *Server) findKeys(r *http.Request, c call) outcome {
	var req dict.CheckKeysRequest
	if err := dict.Decode(r.Body, &req); err != nil {
		return badRequest(err)
	}
	if len(req.Keys) == 0 {
		return badRequest(errors.New("no key to check"))
	}
	for _, k := range req.Keys {
		if _, err := dict.ParseKey(k); err != nil {
			return badRequest(err)
		}
	}
	out := &dict.CheckKeysResponse{ResponseTime: c.responseTime(), CorrelationID: c.correlationID(), Keys: make([]dict.KeyCheck, len(req.Keys))}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range req.Keys {
		_, found := s.entries[k]
		out.Keys[i] = dict.KeyCheck{Key: k, HasEntry: found}
	}
	return success(http.StatusOK, out)
}

// listClaims handles "GET /api/v2/claims/": the simulator holds no claims.
func (s *Server) listClaims(w http.ResponseWriter, r *http.Request) {
	policy := dict.PolicyClaimsListWithoutRole
	if q := r.URL.Query(); q.Get("IsDonor") == "true" || q.Get("IsClaimer") == "true" {
		policy = dict.PolicyClaimsListWithRole
	}
	c, ok := s.admit(w, r, dict.OpListClaims, http.StatusBadRequest, policy)
	if !ok {
		return
	}
	s.finish(w, r, c, success(http.StatusOK, &dict.ListClaimsResponse{ResponseTime: c.responseTime(), CorrelationID: c.correlationID()}))
}

// listPolicies handles "GET /api/v2/policies/".
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	c, ok := s.admit(w, r, dict.OpListBucketStates, http.StatusForbidden, dict.PolicyPoliciesList)
	if !ok {
		return
	}
	doc, err := dict.ListPolicies(r.Context(), s.limiter, s.catalog, c.participant)
	out := success(http.StatusOK, doc)
	if err != nil {
		out = s.unavailable(c.op, "list policies", err)
	}
	s.finish(w, r, c, out)
}

// getPolicy handles "GET /api/v2/policies/{policy}".
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	c, ok := s.admit(w, r, dict.OpGetBucketState, http.StatusForbidden, dict.PolicyPoliciesRead)
	if !ok {
		return
	}
	name := r.PathValue("policy")
	doc, err := dict.GetPolicy(r.Context(), s.limiter, s.catalog, c.participant, name)
	out := success(http.StatusOK, doc)
	switch {
	case errors.Is(err, throttle.ErrUnknownPolicy):
		out = failure(http.StatusNotFound, dict.ProblemNotFound, "Policy not found", "no policy "+strings.ToValidUTF8(name, "?"))
	case err != nil:
		out = s.unavailable(c.op, "get policy", err)
	}
	s.finish(w, r, c, out)
}
