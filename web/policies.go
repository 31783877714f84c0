package web

import (
	"fmt"
	"net/http"

	"github.com/balde-throttle/balde/dict"
)

// servePolicies is the DICT's GET /policies/ over the local mirror: the
// participant's PSP buckets in a ListPoliciesResponse (the DICT manual,
// chapter 19: CorrelationId, ResponseTime, Category, one Policy per bucket
// with its AvailableTokens, which may be negative after a penalty), and GET
// /policies/{policy}: one of them in a GetPolicyResponse, a 404 problem for
// a name that is not a PSP policy of the catalog. Code written against the
// DICT's own endpoint can read the mirror instead, without spending its 6 a
// minute. It requires PI-RequestingParticipant, equal to the configured
// participant (403 problem otherwise); a store that cannot answer is a 503
// problem with Retry-After. Nothing is taken from any bucket. The document
// is encoded into memory first, so an encoding error is a clean 500.
func (s *Server) servePolicies(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkRequestingParticipant(r); err != nil {
		return err
	}
	vars, err := pathVars(r)
	if err != nil {
		return err
	}
	var resp any
	if policy, ok := vars["policy"]; ok {
		resp, err = s.Dict.LocalPolicy(r.Context(), policy)
	} else {
		resp, err = s.Dict.LocalPolicies(r.Context())
	}
	if err != nil {
		return err
	}
	data, err := dict.Marshal(resp)
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, dict.ContentTypeXML, data)
	return nil
}

// checkRequestingParticipant requires the PI-RequestingParticipant header
// of the DICT API (^[0-9]{8}$), naming this participant: the mirror holds
// no other participant's buckets.
func (s *Server) checkRequestingParticipant(r *http.Request) error {
	p := r.Header.Get(dict.HeaderRequestingParticipant)
	if err := dict.ValidateISPB(p); err != nil {
		return fmt.Errorf("%w: %s must be an ISPB of 8 digits", errForbidden, dict.HeaderRequestingParticipant)
	}
	if p != s.Dict.Participant() {
		return fmt.Errorf("%w: %s is not the participant this mirror serves", errForbidden, dict.HeaderRequestingParticipant)
	}
	return nil
}
