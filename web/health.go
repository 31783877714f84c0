package web

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// healthTimeout bounds a readiness check.
const healthTimeout = 3 * time.Second

// The probes match their exact paths only, need no credential and are not
// counted by the inbound limiter.

// checkHealth is GET /livez, always 200 {"status":"ok"} touching nothing,
// and GET /readyz and /healthz: the same when Server.HealthCheck passes
// within healthTimeout, 503 with Retry-After otherwise (the log has the
// detail).
func (s *Server) checkHealth(w http.ResponseWriter, r *http.Request) error {
	if s.HealthCheck != nil && requestInfoFrom(r.Context()).route.name != "livez" {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := s.HealthCheck(ctx); err != nil {
			s.Logger.ErrorContext(r.Context(), "not ready", "error", err)
			return fmt.Errorf("%w: %w", errUnhealthy, err)
		}
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}
