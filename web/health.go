package web

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// healthTimeout bounds a health check: a probe wants an answer quickly.
const healthTimeout = 3 * time.Second

// checkHealth is GET /healthz: 200 {"status":"ok"} when Server.HealthCheck
// passes (the store answers and its migrations are current), 503 with
// Retry-After otherwise. It needs no credential and says nothing about
// the failure beyond that (the log has the detail).
func (s *Server) checkHealth(w http.ResponseWriter, r *http.Request) error {
	if s.HealthCheck != nil {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := s.HealthCheck(ctx); err != nil {
			return fmt.Errorf("%w: %w", ErrUnhealthy, err)
		}
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}
