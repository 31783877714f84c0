package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/storebound"
	"github.com/balde-throttle/balde/internal/templates"
	"github.com/balde-throttle/balde/throttle"
)

// Server is balde's HTTP server. Create it with NewServer and set its
// fields; then either Open it (it listens on Addr) or mount its Handler in
// an application's router (no listener of its own). Close shuts down
// either. Fields must not change after Open or Handler.
type Server struct {
	// Addr is the TCP address Open listens on ("127.0.0.1:0" picks a free
	// port, see URL).
	Addr string
	// BasePath is the path prefix the handler is mounted under, e.g.
	// "/balde" (no trailing slash); "" is the root.
	BasePath string
	// Limiter answers the bucket questions of the pages and the API.
	// Required.
	Limiter *throttle.Limiter
	// Reader answers the listings, counts and ledger reads: inspect.New
	// over Limiter and its store. Required.
	Reader *inspect.Reader
	// Admin is the HTTP basic credential of a RoleAdmin. Required unless
	// Users or Authenticate is set: the admin is never open.
	Admin Credentials
	// Users are more users (HTTP basic, unique names), each with its role:
	// a RoleViewer reads; only a RoleAdmin changes state. See ParseUsers.
	Users []Credentials
	// Authenticate, when set, replaces the basic authentication: it returns
	// the name of the user that sent r, or ok false for a 401 without a
	// challenge. It may be called twice per request.
	Authenticate func(r *http.Request) (user string, ok bool)
	// RoleOf, with Authenticate, gives the role of the user it returned;
	// nil makes every such user a RoleAdmin.
	RoleOf func(r *http.Request, user string) Role
	// Inbound limits the server's own endpoints; nil does not.
	Inbound *Inbound
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	// Empty: the Inbound limiter's, if any.
	TrustedProxies []netip.Prefix
	// MetricsToken, when set, protects /metrics: a scrape must send
	// "Authorization: Bearer <MetricsToken>", else 401. Empty: open.
	MetricsToken string
	// Metrics is served at /metrics and should also be the Limiters'
	// throttle.Observer; its gauges count the Reader's buckets.
	Metrics *Metrics
	// RuntimeMetrics adds the Go and process collectors to /metrics.
	RuntimeMetrics bool
	// HealthCheck reports whether the store is reachable and its
	// migrations current (else /healthz is a 503). Nil: always healthy.
	HealthCheck func(context.Context) error
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// LogRequests logs one line per request (at Info; probes, scrapes and
	// static files at Debug).
	LogRequests bool

	// Audit, when set, records every state-changing action with who, when,
	// what and why (a reset then needs a reason), and serves
	// /admin/audit. Nil: nothing is recorded, and the page is a 404.
	Audit audit.Store
	// Shadows, when set, switches a policy's shadow mode from the bucket
	// page (docs/decisions/0200).
	Shadows shadowSwitch

	// Sifen is the send path of the documents pages (/documents); nil:
	// they are 404s.
	Sifen sifenSender
	// Dict is the DICT client of /dict/lookup and /policies/; nil: they are
	// 404s.
	Dict dictClient
	// UploadLimit bounds an uploaded DE or lot, in bytes (NewServer: 8 MiB).
	UploadLimit int64
	// ReadHeaderTimeout bounds the time a client of Open's server has to
	// send a request's line and headers (NewServer: 10 s); zero falls back
	// to the 30 s bound on reading a whole request.
	ReadHeaderTimeout time.Duration

	// TimeZone is where the admin pages show times next to UTC; nil is
	// the server's local zone.
	TimeZone *time.Location
	// Policies lists policy names the bucket filter suggests.
	Policies []string
	// Scope, when set, names the scope of a key in the bucket list.
	Scope func(throttle.Key) string
	// Panels are extra boxes of the admin summary, cached with it.
	Panels []PanelFunc
	// SummaryTTL is how long the admin summary (a full scan) is reused
	// before it is recomputed in the background; 0: every request.
	// NewServer sets 15 s.
	SummaryTTL time.Duration
	// SummaryFresh: while computing the summary takes less than this,
	// every request computes it; negative always uses the cache. Default
	// 50 ms.
	SummaryFresh time.Duration

	router         *mux.Router
	table          []route // routes(), in table order
	metricsHandler http.Handler
	pages          map[string]*template.Template
	cop            *http.CrossOriginProtection
	auth           *authenticator
	summary        summaryCache

	ready bool // set by Handler: the configuration was checked
	ln    net.Listener
	srv   *http.Server
	done  chan struct{} // closed when Serve returns

	bgCtx    context.Context // canceled by Close; background work runs under it
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

const defaultReadHeaderTimeout = 10 * time.Second

// NewHTTPServer returns the http.Server every listener of balde is served
// by: h with bounds on each phase of a request (ReadHeaderTimeout 10 s,
// ReadTimeout 30 s, WriteTimeout 60 s, IdleTimeout 2 min, MaxHeaderBytes
// 64 KiB). Its errors go to logger at Warn; nil discards them.
func NewHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: defaultReadHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(cmp.Or(logger, nowhere).Handler(), slog.LevelWarn),
	}
}

// NewServer returns a Server with its routes and defaults.
func NewServer() *Server {
	s := &Server{
		Metrics:           NewMetrics(),
		SummaryTTL:        15 * time.Second,
		SummaryFresh:      50 * time.Millisecond,
		UploadLimit:       defaultUploadLimit,
		ReadHeaderTimeout: defaultReadHeaderTimeout,
		cop:               http.NewCrossOriginProtection(),
	}
	s.router = s.newRouter()
	return s
}

// Handler validates the configuration and returns the server as an
// http.Handler with no listener, for an application to mount under
// BasePath (with or without http.StripPrefix):
//
//	s.BasePath = "/balde"
//	h, err := s.Handler()
//	mux.Handle("/balde/", h)
//
// Background work runs until Close. Calling Handler again returns the
// same handler.
func (s *Server) Handler() (http.Handler, error) {
	if s.ready {
		return s, nil
	}
	if s.Limiter == nil {
		return nil, fmt.Errorf("web: server needs a Limiter")
	}
	if s.Reader == nil {
		return nil, fmt.Errorf("web: server needs a Reader (inspect.New over the Limiter and its store)")
	}
	if s.BasePath != "" && (!strings.HasPrefix(s.BasePath, "/") || strings.HasSuffix(s.BasePath, "/")) {
		return nil, fmt.Errorf("web: base path %q must start with / and not end with one (e.g. /balde)", s.BasePath)
	}
	s.Logger = cmp.Or(s.Logger, nowhere)
	if s.Metrics == nil {
		s.Metrics = NewMetrics()
	}
	s.Metrics.CountFrom(s.Reader, s.Logger)
	s.metricsHandler = s.Metrics.handler(s.RuntimeMetrics)
	var err error
	if s.Authenticate == nil {
		if s.auth, err = newAuthenticator(s.Admin, s.Users); err != nil {
			return nil, err
		}
	}
	if s.Inbound != nil && s.Inbound.Limiter == nil {
		return nil, fmt.Errorf("web: the inbound limiter needs its throttle.Limiter")
	}
	if s.Inbound != nil && len(s.TrustedProxies) == 0 {
		s.TrustedProxies = s.Inbound.cfg.TrustedProxies
	}
	if s.pages, err = parsePages(templates.FS, pageFiles); err != nil {
		return nil, err
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	if s.Inbound != nil {
		s.Inbound.mount(s)
	}
	s.ready = true
	s.refreshSummaryInBackground()
	return s, nil
}

// relative returns r with its path relative to BasePath (r itself when
// the path is not under it).
func (s *Server) relative(r *http.Request) *http.Request {
	rest, ok := under(r.URL.Path, s.BasePath)
	if s.BasePath == "" || !ok {
		return r
	}
	u := *r.URL
	u.Path = rest
	if u.RawPath != "" {
		u.RawPath = "/" + strings.TrimPrefix(strings.TrimPrefix(u.RawPath, s.BasePath), "/")
	}
	r = r.WithContext(r.Context()) // a shallow copy
	r.URL = &u
	return r
}

// Open validates the configuration (see Handler), listens on Addr and
// serves in the background.
func (s *Server) Open() error {
	h, err := s.Handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		s.bgCancel()
		s.bg.Wait()
		return fmt.Errorf("web: listen: %w", err)
	}
	s.ln = ln
	s.srv = NewHTTPServer(h, s.Logger)
	s.srv.ReadHeaderTimeout = s.ReadHeaderTimeout
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error("serve", slog.Any("error", err))
		}
	}()
	return nil
}

// Close stops accepting connections, waits up to 10 s for requests in
// flight (then cuts them), and stops background work.
func (s *Server) Close() error {
	var err error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = s.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, s.srv.Close())
		}
		<-s.done
	}
	if s.bgCancel != nil {
		s.bgCancel()
		s.bg.Wait()
	}
	if err != nil {
		return fmt.Errorf("web: shutdown: %w", err)
	}
	return nil
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:41234" (an
// unspecified address as localhost), or "" before Open.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	ap := s.ln.Addr().(*net.TCPAddr).AddrPort() // Open listens on TCP
	host := ap.Addr().Unmap().String()
	if ap.Addr().IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(int(ap.Port())))
}

// ServeHTTP serves r relative to BasePath, its store writes bounded to
// storebound.Request in all (docs/decisions/0190); before Open or Handler
// it answers 500.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.ready {
		http.Error(w, "web: the server is not set up: call Open or Handler first", http.StatusInternalServerError)
		return
	}
	ctx, release := storebound.With(r.Context(), storebound.Request)
	defer release()
	s.router.ServeHTTP(w, s.relative(r.WithContext(ctx)))
}

// now is the time of the pages: the Limiter's clock.
func (s *Server) now() time.Time { return s.Limiter.Now() }
