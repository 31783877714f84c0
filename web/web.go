// Package web is balde's HTTP face: the admin pages of bucket states, the
// SIFEN documents pages with their Send to SIFEN button, the DICT lookup
// page with its "payment sent" button, the DICT-format /policies/
// endpoints over the local mirror, the JSON endpoints for monitors
// (/api/buckets), /metrics, /healthz, and the inbound limiter that
// protects all of them. It is built on gorilla/mux and html/template
// files embedded from package templates.
//
// How it is put together:
//
//   - server.go: Server (fields set by the caller, then Open and Close, or
//     Handler to mount it under BasePath in an application's router).
//   - routes.go: every route in one table, with its name, method, format
//     (HTML, JSON or XML) and whether it needs the admin credential; the
//     middleware chain of each route; URLs built from route names.
//   - errors.go: the one place that turns an error into a status code and
//     an HTML, JSON or DICT problem-XML body. Handlers return errors; they
//     never write an error response themselves (a page that shows an
//     outcome, like a DICT refusal, takes its status from there too).
//   - render.go: the page templates, parsed once at Open from a declared
//     table, rendered into a buffer (a template error is a clean 500);
//     view.go formats buckets for pages, static.go serves the stylesheet.
//   - admin.go, summary.go, chart.go: the admin pages; panels.go: the
//     summary's DICT and SIFEN boxes; scope.go: the scope column.
//   - sifen.go: /documents (sifenSender: the same send path as the batch
//     command); dict.go: /dict/lookup and /dict/payments (dictClient);
//     policies.go: GET /policies/ and /policies/{policy}.
//   - api.go: JSON for monitors; health.go: /healthz.
//   - ratelimit.go, inbound.go, clientip.go: the inbound limiter (per client
//     IP and per API token, an exact sliding window plus a block, stored
//     through the throttle engine like every other bucket; the admin has a
//     bucket of its own), also as Inbound.Middleware for any router.
//   - auth.go: HTTP basic authentication of the admin; csrf in middleware.go.
//   - metrics.go: Prometheus metrics, including the engine's Observer.
package web
