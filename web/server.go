package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/storebound"
	"github.com/balde-throttle/balde/throttle"
)

// Server is balde's HTTP server. Create it with NewServer and set its
// fields; then either Open it (it listens on Addr) or mount its Handler in
// an application's router (no listener of its own). Close shuts down
// either. Fields must not change after Open or Handler.
type Server struct {
	// Addr is the TCP address Open listens on, e.g. "127.0.0.1:8080";
	// "127.0.0.1:0" picks a free port (see URL and Port). Handler ignores
	// it.
	Addr string
	// BasePath is the path prefix the application mounts the handler under,
	// e.g. "/balde" (no trailing slash); every link and redirect is built
	// under it. "" is the root.
	BasePath string
	// Limiter answers every bucket question of the admin pages and the API.
	// Required.
	Limiter *throttle.Limiter
	// Reader answers the listings, counts and ledger reads of the admin
	// pages, the API and /metrics: inspect.New over Limiter and the store
	// Limiter decides on. Required.
	Reader *inspect.Reader
	// Admin is the credential of the admin pages, the API and the reset
	// action (HTTP basic), always RoleAdmin. Required unless Users or
	// Authenticate is set: the admin is never open.
	Admin Credentials
	// Users are more users of the admin pages (HTTP basic, beside Admin),
	// each with its role: a RoleViewer sees every page and the /api/ read
	// endpoints; only a RoleAdmin resets, sends and looks up. Names must be
	// unique. See ParseUsers.
	Users []Credentials
	// Authenticate, when set, replaces the built-in basic authentication:
	// it returns the name of the admin that sent r (recorded in the ledger
	// on a reset), or ok false for a 401 without a basic-auth challenge.
	// An app mounting Handler brings its own login this way (its session
	// cookie, its SSO proxy's header). It may be called twice per request.
	Authenticate func(r *http.Request) (user string, ok bool)
	// RoleOf, with Authenticate, gives the role of the user it returned;
	// nil makes every such user a RoleAdmin.
	RoleOf func(r *http.Request, user string) Role
	// Inbound limits the server's own endpoints per client IP and API
	// token. Nil disables inbound limiting.
	Inbound *Inbound
	// TrustedProxies are the peers whose X-Forwarded-For is believed when
	// finding a client's IP. Empty: the Inbound limiter's, if any, else the
	// socket address is the client.
	TrustedProxies []netip.Prefix
	// MetricsToken, when set, protects /metrics: a scrape must send
	// "Authorization: Bearer <MetricsToken>" (compared in constant time),
	// anything else is a 401. Empty: /metrics is open, as probes are.
	MetricsToken string
	// Metrics is served at /metrics and should also be the Limiters'
	// throttle.Observer. NewServer creates one. Handler makes its bucket
	// gauges count the Reader's buckets (Metrics.CountFrom).
	Metrics *Metrics
	// RuntimeMetrics adds the Go and process collectors to /metrics (balde
	// serve sets it). Off, /metrics serves balde's metrics alone: an
	// application whose own registry has the runtime collectors registers
	// Metrics there and scrapes no duplicate.
	RuntimeMetrics bool
	// HealthCheck reports whether the store is reachable and its migrations
	// current; /healthz answers 503 when it fails. Nil: always healthy.
	HealthCheck func(context.Context) error
	// Logger receives the server's warnings and errors (and the request
	// lines with LogRequests). Nil discards: an embedding application's
	// slog.Default() is never written to.
	Logger *slog.Logger
	// LogRequests logs one line per request (at Info; probes, scrapes and
	// static files at Debug) to Logger. Off by default for an application
	// mounting Handler, which logs its own requests; balde serve sets it.
	LogRequests bool

	// Audit, when set, records every state-changing action of the admin
	// pages (a reset, a SIFEN send or send-all, a DICT lookup from the
	// form) with who, when, what and why, and serves the Audit page
	// (/admin/audit). A reset then needs a reason. Nil: nothing is
	// recorded, and the page answers 404 and leaves the navigation.
	Audit audit.Store
	// Shadows, when set, turns a policy's shadow mode on and off from the
	// bucket page: an admin's action, audited (docs/decisions/0200).
	Shadows shadowSwitch

	// Sifen is the SIFEN send path of the documents pages (/documents): the
	// same sifen.Sender the batch command sends with. Nil: those pages
	// answer 404 and leave the navigation.
	Sifen sifenSender
	// Dict is the DICT client of the lookup page (/dict/lookup) and of the
	// DICT-format /policies/ endpoints over the local mirror. Nil: they
	// answer 404.
	Dict dictClient
	// UploadLimit bounds an uploaded DE or lot, in bytes. NewServer sets
	// DefaultUploadLimit.
	UploadLimit int64
	// ReadHeaderTimeout bounds the time a client has, from the moment its
	// connection is accepted (or its previous request ends), to send a
	// request's line and headers; past it Open's server closes the
	// connection (a slowloris sending its headers a byte at a time holds
	// nothing longer). NewServer sets 10 s (NewHTTPServer's); zero falls
	// back to the 30 s bound on reading a whole request.
	ReadHeaderTimeout time.Duration

	// TimeZone is where the admin pages show times next to UTC; nil is
	// the server's local zone.
	TimeZone *time.Location
	// Policies lists policy names the bucket filter suggests.
	Policies []string
	// Scope, when set, names the scope of a key (the DICT's PSP or USER)
	// in a column of the bucket list.
	Scope func(throttle.Key) string
	// Panels are extra boxes of the admin summary, computed with it and
	// cached as long: the DICT participant's category, the anti-scan
	// monitors.
	Panels []PanelFunc
	// SummaryTTL is how long the admin summary (counts over every bucket,
	// which cost a full scan) is reused before it is recomputed in the
	// background. 0 recomputes it on every request. NewServer sets 15 s.
	SummaryTTL time.Duration
	// SummaryFresh: while computing the summary takes less than this, every
	// request computes it (small installations always see fresh numbers);
	// negative always uses the cache. Default 50 ms.
	SummaryFresh time.Duration

	router         *mux.Router
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

// defaultReadHeaderTimeout is NewHTTPServer's ReadHeaderTimeout, and
// NewServer's.
const defaultReadHeaderTimeout = 10 * time.Second

// NewHTTPServer returns the http.Server every listener of balde is served
// by (balde serve, both gateways, Server.Open, balde.Engine.Serve), for an
// application to serve its own listener the same way: h with bounds on
// each phase of a request, so that a slow or stalled client holds a
// connection and a goroutine only so long:
//
//   - ReadHeaderTimeout 10 s from the accept (or the previous request's
//     end) to the end of the headers: a slowloris sending its headers a
//     byte at a time is cut off;
//   - ReadTimeout 30 s for a whole request, body included (an uploaded lot
//     is at most a few MB);
//   - WriteTimeout 60 s from the end of the headers to the end of the
//     answer (a SIFEN gateway moves it past its hold, 75 s by default);
//   - IdleTimeout 2 min between two requests of a kept-alive connection;
//   - MaxHeaderBytes 64 KiB (net/http's default is 1 MiB).
//
// Its errors (a TLS handshake, a panic in h) go to logger at Warn; nil
// discards them, never to the log package's default logger.
func NewHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: defaultReadHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// NewServer returns a Server with its routes and defaults; set the fields,
// then Open it.
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

// Handler validates the configuration, parses the templates and returns
// the server as an http.Handler with no listener of its own, for an
// application to mount under BasePath in its own router:
//
//	s.BasePath = "/balde"
//	h, err := s.Handler()
//	mux.Handle("/balde/", h)
//
// A request path under BasePath is served relative to it, so mounting it
// with http.StripPrefix(s.BasePath, h) works the same. The admin pages need
// the admin: Admin (basic auth, the default) or Authenticate (the
// application's own login). Background work (the summary's recount) runs
// until Close. Calling Handler again returns the same handler.
func (s *Server) Handler() (http.Handler, error) {
	if s.ready {
		return http.HandlerFunc(s.serveMounted), nil
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
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Metrics == nil {
		s.Metrics = NewMetrics()
	}
	s.Metrics.CountFrom(s.Reader, s.Logger)
	s.metricsHandler = s.Metrics.handler(s.RuntimeMetrics)
	if s.Authenticate == nil {
		auth, err := newAuthenticator(s.Admin, s.Users)
		if err != nil {
			return nil, err
		}
		s.auth = auth
	}
	if s.Inbound != nil && s.Inbound.Limiter == nil {
		return nil, fmt.Errorf("web: the inbound limiter needs its throttle.Limiter")
	}
	if s.Inbound != nil && len(s.TrustedProxies) == 0 {
		// One notion of the client for the pages and the middleware.
		s.TrustedProxies = s.Inbound.trusted
	}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.mountInbound()
	s.ready = true
	// Warm the summary so the first admin page does not pay for it.
	s.refreshSummaryInBackground()
	return http.HandlerFunc(s.serveMounted), nil
}

// serveMounted serves r relative to BasePath, its store writes bounded
// to storebound.Request in all (docs/decisions/0190).
func (s *Server) serveMounted(w http.ResponseWriter, r *http.Request) {
	ctx, release := storebound.With(r.Context(), storebound.Request)
	defer release()
	s.router.ServeHTTP(w, s.relative(r.WithContext(ctx)))
}

// relative returns r with its path relative to BasePath (r itself when
// the path is not under it).
func (s *Server) relative(r *http.Request) *http.Request {
	if s.BasePath != "" {
		if rest, ok := strings.CutPrefix(r.URL.Path, s.BasePath); ok && (rest == "" || rest[0] == '/') {
			r2 := new(http.Request)
			*r2 = *r
			r2.URL = new(url.URL)
			*r2.URL = *r.URL
			r2.URL.Path = "/" + strings.TrimPrefix(rest, "/")
			if r.URL.RawPath != "" {
				r2.URL.RawPath = "/" + strings.TrimPrefix(strings.TrimPrefix(r.URL.RawPath, s.BasePath), "/")
			}
			return r2
		}
	}
	return r
}

// Open validates the configuration (see Handler), listens on Addr and
// starts serving in the background. When Open returns without error the
// server accepts connections (URL and Port tell where).
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

// Close stops accepting connections (after Open), waits up to 10 s for
// requests in flight to finish (then cuts them), and stops background
// work. A server never opened nor mounted has nothing to close.
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

// URL returns the server's base URL, e.g. "http://127.0.0.1:41234", or ""
// before Open. An unspecified listen address is shown as localhost.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	ap, err := netip.ParseAddrPort(s.ln.Addr().String())
	if err != nil {
		return "http://" + s.ln.Addr().String()
	}
	host := ap.Addr().String()
	if ap.Addr().IsUnspecified() {
		host = "localhost"
	} else if ap.Addr().Is6() {
		host = "[" + host + "]"
	}
	return "http://" + host + ":" + strconv.Itoa(int(ap.Port()))
}

// Port returns the port the server listens on, or 0 before Open.
func (s *Server) port() int {
	if s.ln == nil {
		return 0
	}
	return s.ln.Addr().(*net.TCPAddr).Port
}

// ServeHTTP serves r as the Handler does, once Open or Handler has checked
// the configuration; before that it answers 500 (it never panics on a
// server that was not set up).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.ready {
		http.Error(w, "web: the server is not set up: call Open or Handler first", http.StatusInternalServerError)
		return
	}
	s.serveMounted(w, r)
}

// now is the time of the admin pages: the Limiter's clock, so that a fake
// clock in tests drives everything.
func (s *Server) now() time.Time { return s.Limiter.Now() }
