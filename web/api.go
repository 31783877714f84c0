package web

import (
	"cmp"
	"net/http"

	"github.com/balde-throttle/balde/internal/view"
)

// listAPIBuckets is GET /api/buckets with the admin list's query (see
// bucketQuery: policy, env, identifier, severity, state, sort, after,
// page, limit); every policy (a lot waiting for its result is no bucket).
func (s *Server) listAPIBuckets(w http.ResponseWriter, r *http.Request) error {
	lq, err := bucketQuery(r)
	if err != nil {
		return err
	}
	lq.Tab = "all"
	list, err := s.list(r.Context(), lq)
	if err != nil {
		return err
	}
	out := view.NewAPIBucketList(list.States, s.Scope)
	out.Partial = list.Partial
	if list.Next != nil {
		out.Next = cmp.Or(list.Next.Get("after"), list.Next.Get("page"))
		list.Next.Del("trail")
		out.NextURL = s.pathWithQuery("apiBuckets", list.Next)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// getAPIBucket is GET /api/buckets/{policy}/{env}/{identifier} : one bucket's
// state. A key with no row is a full bucket
// ("stored": false); an unknown policy is a 404.
func (s *Server) getAPIBucket(w http.ResponseWriter, r *http.Request) error {
	_, st, err := s.routeBucket(r)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, view.NewAPIBucket(st, s.Scope))
	return nil
}
