package web

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// healthTimeout bounds a readiness check: a probe wants an answer quickly,
// and a database that takes longer to commit one row is not ready.
const healthTimeout = 3 * time.Second

// The probe endpoints. Each matches its exact path only (no prefix, no
// trailing slash), needs no credential, and is not counted by the inbound
// limiter (route.probe): an orchestrator probing every second must never be
// rate limited into restarting a healthy process, and a client cannot make
// a limited path unlimited by spelling it like a probe.
//
//   - GET /livez: the process answers. Always 200 {"status":"ok"}; it touches
//     nothing, so a slow or failed database never gets a live process
//     killed.
//   - GET /readyz: the process can do its job: Server.HealthCheck passes
//     within healthTimeout (serve's checks a write round trip on the store,
//     the SQLite file's identity and the schema version). 200
//     {"status":"ok"}, else 503 with Retry-After and the reason logged.
//   - GET /healthz: the same as /readyz, kept for existing monitors.

// checkLive is GET /livez.
func (s *Server) checkLive(w http.ResponseWriter, r *http.Request) error {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// checkReady is GET /readyz and GET /healthz: 200 {"status":"ok"} when
// Server.HealthCheck passes, 503 with Retry-After otherwise. It says
// nothing about the failure beyond that (the log has the detail, at
// error level).
func (s *Server) checkReady(w http.ResponseWriter, r *http.Request) error {
	if s.HealthCheck != nil {
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
