package dictsim

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"balde/dict"
	"balde/throttle"
)

// reply writes v as a DICT document with status, counted under op.
func (s *Server) reply(w http.ResponseWriter, op string, status int, v any) {
	data, err := dict.Marshal(v)
	if err != nil {
		s.logger.Error("dictsim: encode", slog.String("op", op), slog.Any("error", err))
		s.problem(w, op, http.StatusInternalServerError, dict.ProblemInternalServerError, "Internal server error", "")
		return
	}
	s.count(op, status)
	w.Header().Set("Content-Type", dict.ContentTypeXML)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// problem writes an RFC 7807 problem, counted under op.
func (s *Server) problem(w http.ResponseWriter, op string, status int, typ, title, detail string) {
	data, _ := dict.Marshal(dict.NewProblem(typ, status, title, detail))
	s.count(op, status)
	w.Header().Set("Content-Type", dict.ContentTypeProblemXML)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// charge reserves the request's tokens from the simulator's buckets. When
// refused it answers 429 with Retry-After (and ok is false); when the store
// fails it answers 503.
func (s *Server) charge(w http.ResponseWriter, r *http.Request, op, ref string, keys ...throttle.Key) (dict.Reservation, bool) {
	res, err := s.meter.Reserve(r.Context(), op, ref, keys...)
	var refused *dict.RefusedError
	switch {
	case errors.As(err, &refused):
		d := refused.Decision
		w.Header().Set("Retry-After", retryAfterSeconds(d.RetryAfter))
		s.problem(w, op, http.StatusTooManyRequests, dict.ProblemRateLimited, "Rate limited",
			d.Key.Policy+": "+d.Reason.String()+" ("+d.RetryAfter.String()+" until a token is available)")
		return res, false
	case errors.Is(err, throttle.ErrInvalidKey):
		s.problem(w, op, http.StatusBadRequest, dict.ProblemBadRequest, "Bad request", err.Error())
		return res, false
	case err != nil:
		s.logger.Error("dictsim: reserve", slog.String("op", op), slog.Any("error", err))
		s.problem(w, op, http.StatusServiceUnavailable, dict.ProblemServiceUnavailable, "Service unavailable", "")
		return res, false
	}
	return res, true
}

// settle charges the outcome of an admitted request.
func (s *Server) settle(ctx context.Context, res dict.Reservation, status int) {
	if _, err := s.meter.Settle(context.WithoutCancel(ctx), res, dict.Outcome(status)); err != nil {
		s.logger.Error("dictsim: settle", slog.String("op", res.Op), slog.Any("error", err))
	}
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
		s.problem(w, op, status, typ, "Invalid "+dict.HeaderRequestingParticipant, err.Error())
		return "", false
	}
	return p, true
}

func (s *Server) badRequest(w http.ResponseWriter, op string, err error) {
	s.problem(w, op, http.StatusBadRequest, dict.ProblemBadRequest, "Bad request", err.Error())
}

// getEntry handles "GET /api/v2/entries/{key}".
func (s *Server) getEntry(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpGetEntry
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	payer := r.Header.Get(dict.HeaderPayerID)
	if _, err := dict.ParsePayerID(payer); err != nil {
		s.badRequest(w, op, err)
		return
	}
	e2e := r.Header.Get(dict.HeaderEndToEndID)
	if err := dict.ValidateEndToEndID(e2e); err != nil {
		s.badRequest(w, op, err)
		return
	}
	key, err := dict.ParseKey(r.PathValue("key"))
	if err != nil {
		s.badRequest(w, op, err)
		return
	}
	keys := s.catalog.LookupKeys(key.Type, payer, participant)
	res, ok := s.charge(w, r, op, e2e, keys...)
	if !ok {
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	entry, found := s.entries[key.Value]
	s.mu.Unlock()
	status := http.StatusOK
	if !found {
		status = http.StatusNotFound
	}
	s.settle(r.Context(), res, status)
	if err := s.records.RecordLookup(context.WithoutCancel(r.Context()), dict.Lookup{
		EndToEndID: e2e, Env: s.catalog.Env(), PayerID: payer, KeyType: key.Type,
		Policy: keys[0].Policy, Participant: participant, Status: status, LookedUpAt: now,
	}); err != nil {
		s.logger.Error("dictsim: record lookup", slog.Any("error", err))
	}
	if !found {
		s.problem(w, op, status, dict.ProblemEntryNotFound, "Entry not found", "")
		return
	}
	s.reply(w, op, status, &dict.GetEntryResponse{
		ResponseTime:  dict.Timestamp{Time: now},
		CorrelationID: dict.NewCorrelationID(participant, now),
		Entry:         entry,
	})
}

// createEntry handles "POST /api/v2/entries/".
func (s *Server) createEntry(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpCreateEntry
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	res, ok := s.charge(w, r, op, "", s.catalog.Key(dict.PolicyEntriesWrite, participant))
	if !ok {
		return
	}
	status, problem, detail := http.StatusCreated, "", ""
	var req dict.CreateEntryRequest
	now := s.clock.Now()
	if err := dict.Decode(r.Body, &req); err != nil {
		status, problem, detail = http.StatusBadRequest, dict.ProblemBadRequest, err.Error()
	} else if _, err := dict.ParseKeyAs(req.Entry.KeyType, req.Entry.Key); err != nil {
		status, problem, detail = http.StatusBadRequest, dict.ProblemEntryInvalid, err.Error()
	} else if req.Entry.Account.Participant != participant {
		status, problem, detail = http.StatusForbidden, dict.ProblemForbidden, "the account is not the requesting participant's"
	} else {
		s.mu.Lock()
		if _, exists := s.entries[req.Entry.Key]; exists {
			status, problem, detail = http.StatusConflict, dict.ProblemEntryAlreadyExists, "the key already has an entry"
		} else {
			ts := dict.Timestamp{Time: now}
			req.Entry.CreationDate, req.Entry.KeyOwnershipDate = &ts, &ts
			s.entries[req.Entry.Key] = req.Entry
		}
		s.mu.Unlock()
	}
	s.settle(r.Context(), res, status)
	if problem != "" {
		s.problem(w, op, status, problem, http.StatusText(status), detail)
		return
	}
	s.reply(w, op, status, &dict.CreateEntryResponse{
		ResponseTime:  dict.Timestamp{Time: now},
		CorrelationID: dict.NewCorrelationID(participant, now),
		Entry:         req.Entry,
	})
}

// deleteEntry handles "POST /api/v2/entries/{key}/delete".
func (s *Server) deleteEntry(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpDeleteEntry
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	res, ok := s.charge(w, r, op, "", s.catalog.Key(dict.PolicyEntriesWrite, participant))
	if !ok {
		return
	}
	status, problem, detail := http.StatusOK, "", ""
	var req dict.DeleteEntryRequest
	if err := dict.Decode(r.Body, &req); err != nil {
		status, problem, detail = http.StatusBadRequest, dict.ProblemBadRequest, err.Error()
	} else if req.Key != r.PathValue("key") {
		status, problem, detail = http.StatusBadRequest, dict.ProblemBadRequest, "the body's Key is not the path's"
	} else {
		s.mu.Lock()
		e, exists := s.entries[req.Key]
		switch {
		case !exists:
			status, problem = http.StatusNotFound, dict.ProblemEntryNotFound
		case e.Account.Participant != participant:
			status, problem, detail = http.StatusForbidden, dict.ProblemForbidden, "the entry is another participant's"
		default:
			delete(s.entries, req.Key)
		}
		s.mu.Unlock()
	}
	s.settle(r.Context(), res, status)
	if problem != "" {
		s.problem(w, op, status, problem, http.StatusText(status), detail)
		return
	}
	now := s.clock.Now()
	s.reply(w, op, status, &dict.DeleteEntryResponse{
		ResponseTime:  dict.Timestamp{Time: now},
		CorrelationID: dict.NewCorrelationID(participant, now),
		Key:           req.Key,
	})
}

// checkKeys handles "POST /api/v2/keys/check".
func (s *Server) checkKeys(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpCheckKeys
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	res, ok := s.charge(w, r, op, "", s.catalog.Key(dict.PolicyKeysCheck, participant))
	if !ok {
		return
	}
	var req dict.CheckKeysRequest
	err := dict.Decode(r.Body, &req)
	if err == nil && len(req.Keys) == 0 {
		err = errors.New("no key to check")
	}
	for _, k := range req.Keys {
		if err != nil {
			break
		}
		_, err = dict.ParseKey(k)
	}
	if err != nil {
		s.settle(r.Context(), res, http.StatusBadRequest)
		s.badRequest(w, op, err)
		return
	}
	out := &dict.CheckKeysResponse{Keys: make([]dict.KeyCheck, len(req.Keys))}
	s.mu.Lock()
	for i, k := range req.Keys {
		_, found := s.entries[k]
		out.Keys[i] = dict.KeyCheck{Key: k, HasEntry: found}
	}
	s.mu.Unlock()
	s.settle(r.Context(), res, http.StatusOK)
	now := s.clock.Now()
	out.ResponseTime, out.CorrelationID = dict.Timestamp{Time: now}, dict.NewCorrelationID(participant, now)
	s.reply(w, op, http.StatusOK, out)
}

// listClaims handles "GET /api/v2/claims/": the simulator holds no claims.
func (s *Server) listClaims(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpListClaims
	participant, ok := s.requester(w, r, op, http.StatusBadRequest)
	if !ok {
		return
	}
	q := r.URL.Query()
	policy := dict.PolicyClaimsListWithoutRole
	if q.Get("IsDonor") == "true" || q.Get("IsClaimer") == "true" {
		policy = dict.PolicyClaimsListWithRole
	}
	res, ok := s.charge(w, r, op, "", s.catalog.Key(policy, participant))
	if !ok {
		return
	}
	s.settle(r.Context(), res, http.StatusOK)
	now := s.clock.Now()
	s.reply(w, op, http.StatusOK, &dict.ListClaimsResponse{
		ResponseTime:  dict.Timestamp{Time: now},
		CorrelationID: dict.NewCorrelationID(participant, now),
	})
}

// listPolicies handles "GET /api/v2/policies/".
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpListBucketStates
	participant, ok := s.requester(w, r, op, http.StatusForbidden)
	if !ok {
		return
	}
	res, ok := s.charge(w, r, op, "", s.catalog.Key(dict.PolicyPoliciesList, participant))
	if !ok {
		return
	}
	s.settle(r.Context(), res, http.StatusOK)
	out, err := dict.ListPolicies(r.Context(), s.limiter, s.catalog, participant)
	if err != nil {
		s.logger.Error("dictsim: list policies", slog.Any("error", err))
		s.problem(w, op, http.StatusServiceUnavailable, dict.ProblemServiceUnavailable, "Service unavailable", "")
		return
	}
	s.reply(w, op, http.StatusOK, out)
}

// getPolicy handles "GET /api/v2/policies/{policy}".
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	const op = dict.OpGetBucketState
	participant, ok := s.requester(w, r, op, http.StatusForbidden)
	if !ok {
		return
	}
	res, ok := s.charge(w, r, op, "", s.catalog.Key(dict.PolicyPoliciesRead, participant))
	if !ok {
		return
	}
	name := r.PathValue("policy")
	out, err := dict.GetPolicy(r.Context(), s.limiter, s.catalog, participant, name)
	switch {
	case errors.Is(err, throttle.ErrUnknownPolicy):
		s.settle(r.Context(), res, http.StatusNotFound)
		s.problem(w, op, http.StatusNotFound, dict.ProblemNotFound, "Policy not found", "no policy "+strings.ToValidUTF8(name, "?"))
		return
	case err != nil:
		s.settle(r.Context(), res, http.StatusServiceUnavailable)
		s.logger.Error("dictsim: get policy", slog.Any("error", err))
		s.problem(w, op, http.StatusServiceUnavailable, dict.ProblemServiceUnavailable, "Service unavailable", "")
		return
	}
	s.settle(r.Context(), res, http.StatusOK)
	s.reply(w, op, http.StatusOK, out)
}
