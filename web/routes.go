package web

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/balde-throttle/balde/internal/audit"
)

// format is how a route answers, errors included.
type format uint8

const (
	formatAuto format = iota // by path, for unmatched requests (requestInfo.format)
	formatHTML
	formatJSON
	formatXML // the DICT's: errors as RFC 7807 problems in XML
)

// route is one entry of the route table.
type route struct {
	name   string // URLs are built from it (Server.path)
	nav    string // the label of its link in the top navigation, in table order
	method string // GET routes also answer HEAD
	// path is a gorilla/mux template. Variables match one path segment,
	// path-escaped in URLs and unescaped by pathVars.
	path   string
	prefix bool // match path as a prefix (static files)
	format format
	admin  bool         // requires a user (any role)
	write  bool         // changes state: needs RoleAdmin, a viewer gets a 403
	audit  audit.Action // when set, each request is recorded (recordAudit)
	// attempt is, on a write route without audit, what a viewer's attempt
	// is recorded as (recordDenied; default: the route's name).
	attempt audit.Action
	probe   bool // skips the inbound limiter and logs at debug
	// needs, when set, says whether the server has the route's feature:
	// without it the route is a 404.
	needs  func(*Server) bool
	form   bool // parses its urlencoded form before the handler
	handle func(w http.ResponseWriter, r *http.Request) error
}

// routes is the route table: every path the server answers.
func (s *Server) routes() []route {
	const bucket = "/{policy}/{env}/{identifier}"
	return []route{
		{name: "home", method: http.MethodGet, path: "/", format: formatHTML, handle: s.redirectHome},
		{name: "static", method: http.MethodGet, path: "/static/", prefix: true, format: formatHTML, handle: s.serveStatic},
		{name: "favicon", method: http.MethodGet, path: "/favicon.ico", format: formatHTML, handle: s.serveFavicon},

		// Admin pages (admin.go).
		{name: "adminBuckets", nav: "Buckets", method: http.MethodGet, path: "/admin/buckets", format: formatHTML, admin: true, handle: s.showAdminBuckets},
		{name: "adminBucket", method: http.MethodGet, path: "/admin/buckets" + bucket, format: formatHTML, admin: true, handle: s.showAdminBucket},
		{name: "adminOverview", nav: "Decisions", method: http.MethodGet, path: "/admin/overview", format: formatHTML, admin: true, handle: s.showOverview},
		{name: "adminResetConfirm", method: http.MethodGet, path: "/admin/buckets" + bucket + "/reset", format: formatHTML, admin: true, write: true, attempt: audit.ActionReset, handle: s.confirmReset},
		{name: "adminWhatif", nav: "What if", method: http.MethodGet, path: "/admin/whatif", format: formatHTML, admin: true, handle: s.showWhatif},
		{name: "adminShadow", method: http.MethodPost, path: "/admin/policies/{policy}/shadow", format: formatHTML, admin: true, write: true, audit: audit.ActionShadow, form: true, needs: hasShadows, handle: s.switchShadow},
		{name: "adminReset", method: http.MethodPost, path: "/admin/buckets" + bucket + "/reset", format: formatHTML, admin: true, write: true, audit: audit.ActionReset, form: true, handle: s.resetBucket},

		// Machine endpoints (api.go, metrics.go, health.go).
		{name: "apiBuckets", method: http.MethodGet, path: "/api/buckets", format: formatJSON, admin: true, handle: s.listAPIBuckets},
		{name: "apiBucket", method: http.MethodGet, path: "/api/buckets" + bucket, format: formatJSON, admin: true, handle: s.getAPIBucket},
		{name: "metrics", method: http.MethodGet, path: "/metrics", format: formatJSON, handle: s.serveMetrics},
		{name: "livez", method: http.MethodGet, path: "/livez", format: formatJSON, probe: true, handle: s.checkHealth},
		{name: "readyz", method: http.MethodGet, path: "/readyz", format: formatJSON, probe: true, handle: s.checkHealth},
		{name: "healthz", method: http.MethodGet, path: "/healthz", format: formatJSON, probe: true, handle: s.checkHealth},

		// SIFEN documents (sifen.go): the list with the upload form, one
		// document, its Send to SIFEN button, and the override of SIFEN's
		// 48 hours for a document left sending (override.go).
		{name: "documents", nav: "Documents", method: http.MethodGet, path: "/documents", format: formatHTML, admin: true, needs: hasSifen, handle: s.listDocuments},
		{name: "importDocuments", method: http.MethodPost, path: "/documents", format: formatHTML, admin: true, write: true, attempt: deniedImport, needs: hasSifen, handle: s.importDocuments},
		{name: "document", method: http.MethodGet, path: "/documents/{id:[0-9]+}", format: formatHTML, admin: true, needs: hasSifen, handle: s.showDocument},
		{name: "sendDocument", method: http.MethodPost, path: "/documents/{id:[0-9]+}/send", format: formatHTML, admin: true, write: true, audit: audit.ActionSifenSend, form: true, needs: hasSifen, handle: s.sendDocument},
		{name: "overrideConfirm", method: http.MethodGet, path: "/documents/{id:[0-9]+}/override", format: formatHTML, admin: true, write: true, attempt: audit.ActionSifenOverride, needs: hasSifen, handle: s.confirmOverride},
		{name: "overrideDocument", method: http.MethodPost, path: "/documents/{id:[0-9]+}/override", format: formatHTML, admin: true, write: true, audit: audit.ActionSifenOverride, form: true, needs: hasSifen, handle: s.overrideDocument},
		{name: "sendRUCDrafts", method: http.MethodPost, path: "/documents/send-ruc", format: formatHTML, admin: true, write: true, audit: audit.ActionSifenSendAll, form: true, needs: hasSifen, handle: s.sendRUCDrafts},

		// DICT lookup (dict.go): the form, the lookup, the payment button.
		{name: "dictLookup", nav: "DICT lookup", method: http.MethodGet, path: "/dict/lookup", format: formatHTML, admin: true, needs: hasDict, handle: s.showDictLookup},
		{name: "dictLookupSend", method: http.MethodPost, path: "/dict/lookup", format: formatHTML, admin: true, write: true, audit: audit.ActionDictLookup, form: true, needs: hasDict, handle: s.lookupDictKey},
		{name: "dictPayment", method: http.MethodPost, path: "/dict/payments", format: formatHTML, admin: true, write: true, attempt: deniedPayment, form: true, needs: hasDict, handle: s.creditDictPayment},

		// The DICT's own GET /policies/ endpoints over the local mirror
		// (policies.go): for machines, identified by PI-RequestingParticipant.
		{name: "policies", method: http.MethodGet, path: "/policies/", format: formatXML, needs: hasDict, handle: s.servePolicies},
		{name: "policy", method: http.MethodGet, path: "/policies/{policy}", format: formatXML, needs: hasDict, handle: s.servePolicies},

		// The audit trail (audit.go).
		{name: "adminAudit", nav: "Audit", method: http.MethodGet, path: "/admin/audit", format: formatHTML, admin: true, needs: hasAudit, handle: s.showAudit},
	}
}

func hasSifen(s *Server) bool   { return s.Sifen != nil }
func hasDict(s *Server) bool    { return s.Dict != nil }
func hasAudit(s *Server) bool   { return s.Audit != nil }
func hasShadows(s *Server) bool { return s.Shadows != nil }

// Unmatched requests get pseudo-routes so that they pass through the same
// middleware (security headers, inbound limit, logs) as the others.
var (
	notFoundRoute         = route{name: "notFound", format: formatAuto}
	methodNotAllowedRoute = route{name: "methodNotAllowed", format: formatAuto}
)

// newRouter builds the mux from the route table. The middleware of every
// route, outermost first:
//
//	observe (request id, security headers, recover, log) → inbound limit → auth → CSRF → handler
//
// observe comes first so a panic anywhere becomes a clean 500 and every
// log line has the request id; the inbound limit before
// auth so that guessing the admin password is rate limited too; CSRF after
// auth (a cross-origin POST without the credential is a 401 either way).
func (s *Server) newRouter() *mux.Router {
	r := mux.NewRouter()
	// Match on the escaped path so that "%2F" inside a variable does not
	// split it, and do not clean paths: an identifier may be "..".
	r.UseEncodedPath()
	r.SkipClean(true)
	s.table = s.routes()
	for _, rt := range s.table {
		var m *mux.Route
		if rt.prefix {
			m = r.PathPrefix(rt.path)
		} else {
			m = r.Path(rt.path)
		}
		methods := []string{rt.method}
		if rt.method == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
		m.Methods(methods...).Name(rt.name).Handler(s.chain(rt))
	}
	r.NotFoundHandler = s.chain(notFoundRoute)
	r.MethodNotAllowedHandler = s.chain(methodNotAllowedRoute)
	return r
}

// chain wraps a route's handler in its middleware (see newRouter).
func (s *Server) chain(rt route) http.Handler {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aw := w.(*statusWriter) // observe's: the status the handler wrote
		err := s.handle(aw, r, rt)
		if err != nil {
			s.Error(aw, r, err)
		}
		if rt.audit != "" {
			s.recordAudit(aw, r, rt, err)
		}
	})
	if rt.admin {
		h = s.authenticate(h, rt)
	}
	if !rt.probe {
		h = s.limitInbound(h, rt)
	}
	return s.observe(h, rt)
}

// handle runs rt's handler after the checks: CSRF (state-changing requests
// from another origin are refused: http.CrossOriginProtection,
// docs/decisions/0004-csrf.md), its feature, the metrics token, its form.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, rt route) error {
	if err := s.cop.Check(r); err != nil {
		return fmt.Errorf("%w: %v", errCrossOrigin, err)
	}
	switch {
	case rt.name == notFoundRoute.name, rt.needs != nil && !rt.needs(s):
		return errNotFound
	case rt.name == methodNotAllowedRoute.name:
		return errMethodNotAllowed
	case rt.name == "metrics" && !s.metricsTokenOK(r):
		return fmt.Errorf("%w: /metrics needs its bearer token", errUnauthorized)
	}
	if rt.form {
		if err := parseForm(w, r); err != nil {
			return err
		}
	}
	return rt.handle(w, r)
}

// requestInfo is what the middleware learns about a request, kept in its
// context. It is a pointer so inner middleware (auth) can fill it in.
type requestInfo struct {
	route    *route
	id       string
	clientIP netip.Addr
	user     string // the authenticated user
	role     Role   // the user's role
	outcome  string // set by an audited handler, for recordAudit
}

type requestInfoKey struct{}

// requestInfoFrom returns the request's info (an empty one outside the
// middleware).
func requestInfoFrom(ctx context.Context) *requestInfo {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return info
	}
	return &requestInfo{route: &notFoundRoute}
}

// format tells how to answer r: the route's format, or for unmatched
// requests JSON under /api/, XML under /policies/, HTML elsewhere.
func (info *requestInfo) format(r *http.Request) format {
	if info.route.format != formatAuto {
		return info.route.format
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		return formatJSON
	case strings.HasPrefix(r.URL.Path, "/policies/"):
		return formatXML
	}
	return formatHTML
}

// path builds the escaped URL path of a route from its name and variables
// given as pairs ("policy", "P", "env", "prod", ...). It panics on an
// unknown route name or missing variable (a programming error).
func (s *Server) path(name string, pairs ...string) string {
	rt := s.router.Get(name)
	if rt == nil {
		panic(fmt.Sprintf("web: no route named %q", name))
	}
	escaped := make([]string, len(pairs))
	for i, p := range pairs {
		if i%2 == 1 {
			p = url.PathEscape(p)
		}
		escaped[i] = p
	}
	u, err := rt.URLPath(escaped...)
	if err != nil {
		panic(fmt.Sprintf("web: route %q: %v", name, err))
	}
	// u.Path holds the escaped text as built: use it as is.
	return s.BasePath + u.Path
}

// pathWithQuery is path plus an encoded query (omitted when empty).
func (s *Server) pathWithQuery(name string, q url.Values, pairs ...string) string {
	p := s.path(name, pairs...)
	if enc := q.Encode(); enc != "" {
		p += "?" + enc
	}
	return p
}

// pathVars returns the route variables of r, unescaped. An invalid escape
// is a bad request.
func pathVars(r *http.Request) (map[string]string, error) {
	vars := mux.Vars(r)
	out := make(map[string]string, len(vars))
	for k, v := range vars {
		u, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("%w: path variable %s: %v", errBadRequest, k, err)
		}
		out[k] = u
	}
	return out, nil
}

// redirectHome is GET /: the bucket list.
func (s *Server) redirectHome(w http.ResponseWriter, r *http.Request) error {
	http.Redirect(w, r, s.path("adminBuckets"), http.StatusSeeOther)
	return nil
}

// parseLimit reads the page size of a listing: empty is def, anything but
// 1..most is a bad request.
func parseLimit(s string, def, most int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%w: limit %q is not a number in 1..%d", errBadRequest, s, most)
	}
	return n, nil
}
