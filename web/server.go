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
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/balde-throttle/balde/throttle"
)

// Server is balde's HTTP server. Create it with NewServer, set its fields,
// then call Open; Close shuts it down gracefully. Fields must not change
// after Open.
type Server struct {
	// Addr is the TCP address to listen on, e.g. "127.0.0.1:8080";
	// "127.0.0.1:0" picks a free port (see URL and Port).
	Addr string
	// Limiter answers every bucket question of the admin pages and the API.
	// Required.
	Limiter *throttle.Limiter
	// Admin is the credential of the admin pages, the API and the reset
	// action. Required: the admin is never open.
	Admin Credentials
	// Inbound limits the server's own endpoints per client IP and API
	// token. Nil disables inbound limiting.
	Inbound *Inbound
	// TrustedProxies are the peers whose X-Forwarded-For is believed when
	// finding a client's IP. Empty: the socket address is the client.
	TrustedProxies []netip.Prefix
	// Metrics is served at /metrics and should also be the Limiters'
	// throttle.Observer. NewServer creates one.
	Metrics *Metrics
	// HealthCheck reports whether the store is reachable and its migrations
	// current; /healthz answers 503 when it fails. Nil: always healthy.
	HealthCheck func(context.Context) error
	// Logger defaults to slog.Default().WithGroup("web").
	Logger *slog.Logger

	// Sifen is the SIFEN send path of the documents pages (/documents): the
	// same sifen.Sender the batch command sends with. Nil: those pages
	// answer 404 and leave the navigation.
	Sifen SifenSender
	// Dict is the DICT client of the lookup page (/dict/lookup) and of the
	// DICT-format /policies/ endpoints over the local mirror. Nil: they
	// answer 404.
	Dict DictClient
	// UploadLimit bounds an uploaded DE or lot, in bytes. NewServer sets
	// DefaultUploadLimit.
	UploadLimit int64

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

	router  *mux.Router
	pages   map[string]*template.Template
	cop     *http.CrossOriginProtection
	auth    *authenticator
	summary summaryCache

	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve returns

	bgCtx    context.Context // canceled by Close; background work runs under it
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// NewServer returns a Server with its routes and defaults; set the fields,
// then Open it.
func NewServer() *Server {
	s := &Server{
		Metrics:      NewMetrics(),
		SummaryTTL:   15 * time.Second,
		SummaryFresh: 50 * time.Millisecond,
		UploadLimit:  DefaultUploadLimit,
		cop:          http.NewCrossOriginProtection(),
	}
	s.router = s.newRouter()
	return s
}

// Open validates the configuration, parses the templates, listens on Addr
// and starts serving in the background. When Open returns without error
// the server accepts connections (URL and Port tell where).
func (s *Server) Open() error {
	if s.Limiter == nil {
		return fmt.Errorf("web: server needs a Limiter")
	}
	if s.Logger == nil {
		s.Logger = slog.Default().WithGroup("web")
	}
	if s.Metrics == nil {
		s.Metrics = NewMetrics()
	}
	auth, err := newAuthenticator(s.Admin)
	if err != nil {
		return err
	}
	s.auth = auth
	if s.Inbound != nil && s.Inbound.Limiter == nil {
		return fmt.Errorf("web: the inbound limiter needs its throttle.Limiter")
	}
	if s.pages, err = parsePages(); err != nil {
		return err
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())

	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		s.bgCancel()
		return fmt.Errorf("web: listen: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error("serve", slog.Any("error", err))
		}
	}()
	// Warm the summary so the first admin page does not pay for it.
	s.refreshSummaryInBackground()
	return nil
}

// Close stops accepting connections, waits up to 10 s for requests in
// flight to finish (then cuts them), and stops background work.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	<-s.done
	s.bgCancel()
	s.bg.Wait()
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
func (s *Server) Port() int {
	if s.ln == nil {
		return 0
	}
	return s.ln.Addr().(*net.TCPAddr).Port
}

// ServeHTTP routes r through the route table. It is usable after Open
// (tests call it with httptest recorders).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.router.ServeHTTP(w, r)
}

// now is the time of the admin pages: the Limiter's clock, so that a fake
// clock in tests drives everything.
func (s *Server) now() time.Time { return s.Limiter.Now() }
