package sifensim

import (
	"cmp"
	"slices"
)

// Count is the number of requests of one service, environment, RUC (empty
// when none could be read) and code: SIFEN's (dCodRes, dCodResLot), "fault"
// for a SOAP fault, "dropped" for Config.BeforeRecepcion's, "404" for an
// unknown environment.
type Count struct {
	Service string `json:"service"`
	Env     string `json:"env"`
	RUC     string `json:"ruc"`
	Code    string `json:"code"`
	N       int64  `json:"n"`
}

// Stats is what GET /sim/stats answers.
type Stats struct {
	Total     int64            `json:"total"`
	ByService map[string]int64 `json:"by_service"`
	ByRUC     map[string]int64 `json:"by_ruc"`
	ByCode    map[string]int64 `json:"by_code"`
	// Counts has one entry per (service, env, RUC, code), sorted.
	Counts []Count `json:"counts"`
}

// Count sums the requests matching service, env, ruc and code; an empty
// argument matches everything.
func (s Stats) Count(service, env, ruc, code string) int64 {
	var n int64
	for _, c := range s.Counts {
		if (service == "" || c.Service == service) && (env == "" || c.Env == env) &&
			(ruc == "" || c.RUC == ruc) && (code == "" || c.Code == code) {
			n += c.N
		}
	}
	return n
}

// count records one request.
func (s *Server) count(service, env, ruc, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats[Count{Service: service, Env: env, RUC: ruc, Code: code}]++
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{ByService: map[string]int64{}, ByRUC: map[string]int64{}, ByCode: map[string]int64{}, Counts: []Count{}}
	for k, n := range s.stats {
		k.N = n
		st.Counts = append(st.Counts, k)
		st.Total += n
		st.ByService[k.Service] += n
		st.ByCode[k.Code] += n
		if k.RUC != "" {
			st.ByRUC[k.RUC] += n
		}
	}
	slices.SortFunc(st.Counts, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Env, b.Env), cmp.Compare(a.RUC, b.RUC), cmp.Compare(a.Code, b.Code))
	})
	return st
}
