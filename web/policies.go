package web

import (
	"fmt"
	"net/http"

	"github.com/balde-throttle/balde/dict"
)

// listPolicies is GET /policies/: the participant's PSP buckets in the
// local mirror, in the DICT's ListPoliciesResponse (the DICT manual, chapter 19: CorrelationId,
// ResponseTime, Category, one Policy per bucket with its AvailableTokens,
// which may be negative after a penalty). Code written against the DICT's
// own endpoint can read the mirror instead, without spending its 6 a
// minute. It requires PI-RequestingParticipant, equal to the configured
// participant (403 problem otherwise); a store that cannot answer is a 503
// problem with Retry-After. Nothing is taken from any bucket.
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkRequestingParticipant(r); err != nil {
		return err
	}
	resp, err := s.Dict.LocalPolicies(r.Context())
	if err != nil {
		return err
	}
	return s.writeDictXML(w, resp)
}

// getPolicy is GET /policies/{policy}: one PSP bucket in the DICT's
// GetPolicyResponse; as listPolicies, and a 404 problem for a name that is
// not a PSP policy of the catalog.
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkRequestingParticipant(r); err != nil {
		return err
	}
	vars, err := pathVars(r)
	if err != nil {
		return err
	}
	resp, err := s.Dict.LocalPolicy(r.Context(), vars["policy"])
	if err != nil {
		return err
	}
	return s.writeDictXML(w, resp)
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

// writeDictXML writes v as a DICT document (200, application/xml), encoded
// into memory first so an encoding error is a clean 500.
func (s *Server) writeDictXML(w http.ResponseWriter, v any) error {
	data, err := dict.Marshal(v)
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, dict.ContentTypeXML, data)
	return nil
}
