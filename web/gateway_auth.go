package web

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/storebound"
)

// GatewayClients are the clients a gateway serves, read from a file
// (LoadGatewayClients): each a name with one or more credentials (a bearer
// token kept as its SHA-256, or a client certificate's subject CN); a name
// on several lines is how a credential is rotated. GatewayHandler takes
// the file again when it changes and on its reload channel (balde
// gateway: SIGHUP; docs/decisions/0165). Safe
// for concurrent use.
type GatewayClients struct {
	path   string
	logger *slog.Logger
	set    atomic.Pointer[clientSet]
}

// clientSet is one reading of the clients file.
type clientSet struct {
	tokens map[[sha256.Size]byte]string // the SHA-256 of a token → its client
	certs  map[string]string            // a certificate's subject CN → its client
	names  map[string]bool
	// mod and size tell a changed file from the one read.
	mod  time.Time
	size int64
}

// clientName is what a client's name (in logs, labels, keys) may hold.
var clientName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// LoadGatewayClients reads the clients file at path, one credential a
// line; blank lines and lines starting with # are skipped:
//
//	NAME sha256:HEX   a bearer token by its SHA-256 (64 hex digits): the file holds no secret
//	NAME token:TOKEN  a bearer token as it is sent (no spaces)
//	NAME cn:NAME      a client certificate issued by the client CA, by its subject CN
//
// NAME is 1 to 64 letters, digits, '.', '_' or '-'. A credential listed
// twice is an error, and so is a file naming no client. Reloads are logged
// to logger (nil: nowhere).
func LoadGatewayClients(path string, logger *slog.Logger) (*GatewayClients, error) {
	c := &GatewayClients{path: path, logger: cmp.Or(logger, nowhere)}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the file again and, when it is valid, serves its clients
// from the next request on; otherwise the clients stay as they were.
func (c *GatewayClients) reload() error {
	f, err := os.Open(c.path)
	if err != nil {
		return fmt.Errorf("web: gateway clients: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("web: gateway clients: %w", err)
	}
	set, err := parseGatewayClients(f)
	if err != nil {
		return fmt.Errorf("web: gateway clients %s: %w", c.path, err)
	}
	set.mod, set.size = fi.ModTime(), fi.Size()
	c.set.Store(set)
	return nil
}

// GatewayHandler is a gateway as balde gateway serves it: api behind in
// (nil: no inbound limit), and ops at /metrics, /healthz, /readyz and
// /livez. With clients, it takes their file again when it changes (looked
// at every 2 s) and on each value of reload (nil: never; balde gateway
// passes its SIGHUP), until ctx ends. It registers for no signal: what a
// signal does to the process stays the application's choice.
func GatewayHandler(ctx context.Context, api, ops http.Handler, in *Inbound, clients *GatewayClients, reload <-chan os.Signal) http.Handler {
	if in != nil {
		api = in.Middleware(api)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/livez"} {
		mux.Handle(p, ops)
	}
	if clients != nil {
		go clients.watch(ctx, clientsCheckEvery, reload)
	}
	return mux
}

const clientsCheckEvery = 2 * time.Second

// watch reloads the file on a signal and when its modification time or
// size changes, until ctx ends; a failed reload is logged at Error.
func (c *GatewayClients) watch(ctx context.Context, every time.Duration, signals <-chan os.Signal) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		why := "the file changed"
		select {
		case <-ctx.Done():
			return
		case s := <-signals:
			why = s.String()
		case <-t.C:
			fi, err := os.Stat(c.path)
			if set := c.set.Load(); err != nil || (fi.ModTime() == set.mod && fi.Size() == set.size) {
				continue
			}
		}
		if err := c.reload(); err != nil {
			c.logger.Error("gateway clients not reloaded: the previous clients stay", slog.String("why", why), slog.Any("error", err))
			continue
		}
		c.logger.Info("gateway clients reloaded", slog.String("why", why), slog.Int("clients", len(c.set.Load().names)))
	}
}

// Authenticate names the client that sent r by its verified certificate's
// subject CN, else its bearer token; ok false when neither is a
// configured client's. It suits a gateway's Authenticate and
// InboundConfig.Client.
func (c *GatewayClients) Authenticate(r *http.Request) (string, bool) {
	set := c.set.Load()
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		if name, ok := set.certs[r.TLS.VerifiedChains[0][0].Subject.CommonName]; ok {
			return name, true
		}
	}
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if name, ok := set.tokens[sha256.Sum256([]byte(strings.TrimSpace(token)))]; ok {
			return name, true
		}
	}
	return "", false
}

// Certificates reports whether a client is known by its certificate (the
// gateway then needs TLS and a client CA).
func (c *GatewayClients) Certificates() bool { return len(c.set.Load().certs) > 0 }

// gatewayCredential is one line of the clients file.
type gatewayCredential struct {
	name, kind, value string
	digest            [sha256.Size]byte // of a token (kinds sha256 and token)
}

func parseGatewayClients(r io.Reader) (*clientSet, error) {
	creds, err := parseEntries(r, "gateway clients", parseGatewayCredential, func(c gatewayCredential) (string, string) {
		return c.kind + ":" + c.value, "the credential of " + strconv.Quote(c.name)
	})
	if err != nil {
		return nil, err
	}
	set := &clientSet{tokens: map[[sha256.Size]byte]string{}, certs: map[string]string{}, names: map[string]bool{}}
	for _, c := range creds {
		if c.kind == "cn" {
			set.certs[c.value] = c.name
		} else {
			set.tokens[c.digest] = c.name
		}
		set.names[c.name] = true
	}
	if len(set.names) == 0 {
		return nil, fmt.Errorf("no client: list each with its credential, NAME sha256:HEX, NAME token:TOKEN or NAME cn:NAME")
	}
	return set, nil
}

func parseGatewayCredential(entry string) (gatewayCredential, error) {
	name, cred, ok := strings.Cut(entry, " ")
	cred = strings.TrimSpace(cred)
	kind, value, kindOK := strings.Cut(cred, ":")
	switch {
	case !ok || !kindOK || value == "":
		return gatewayCredential{}, fmt.Errorf("want NAME sha256:HEX, NAME token:TOKEN or NAME cn:NAME")
	case !clientName.MatchString(name):
		return gatewayCredential{}, fmt.Errorf("client name %q: 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	c := gatewayCredential{name: name, kind: kind, value: value}
	switch kind {
	case "sha256", "token":
		var err error
		if c.digest, err = tokenDigest(value, kind == "sha256"); err != nil {
			return gatewayCredential{}, fmt.Errorf("client %q: %w", name, err)
		}
		if kind == "sha256" {
			c.value = strings.ToLower(value)
		}
	case "cn":
	default:
		return gatewayCredential{}, fmt.Errorf("client %q: %q is not a credential (sha256:, token: or cn:)", name, kind+":")
	}
	return c, nil
}

// gateway is what both gateways share: each request's client is named
// (or answered 401), then the request is counted, logged and audited
// (docs/decisions/0165); a problem is answered in the gateway's format.
type gateway struct {
	name         string // "dict" or "sifen"
	authenticate func(*http.Request) (string, bool)
	audit        audit.Store
	metrics      *Metrics
	logger       *slog.Logger
	write        func(problem, http.ResponseWriter) // a problem in the gateway's format
	// handle answers the request of a known client; an error is answered
	// as a problem (fail).
	handle func(http.ResponseWriter, *http.Request) error
}

func newGateway(name string, authenticate func(*http.Request) (string, bool), trail audit.Store, m *Metrics, logger *slog.Logger,
	handle func(http.ResponseWriter, *http.Request) error, write func(problem, http.ResponseWriter)) (gateway, error) {
	if authenticate == nil {
		return gateway{}, fmt.Errorf("web: the %s gateway needs Authenticate (GatewayClients.Authenticate, or the application's own): a gateway serves its clients, not anyone who reaches it", name)
	}
	return gateway{name: name, authenticate: authenticate, audit: trail, metrics: m, logger: cmp.Or(logger, nowhere), handle: handle, write: write}, nil
}

// fail answers err (problemOf) in the gateway's format, recorded as r's
// answer and logged when it is a server error.
func (g *gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	p, call := problemOf(r, err), callOf(r)
	call.message = p.message
	logProblem(g.logger, r, p, err, slog.String("gateway", g.name), slog.String("client", call.client))
	g.write(p, w)
}

// gatewayCall is one request to a gateway, for the audit trail: a request
// that changes state at the remote sets target.
type gatewayCall struct {
	client  string
	target  string
	outcome url.Values
	message string // the problem answered, if any
}

type gatewayCallKey struct{}

// callOf returns r's call (a zero one outside serve).
func callOf(r *http.Request) *gatewayCall {
	if c, ok := r.Context().Value(gatewayCallKey{}).(*gatewayCall); ok {
		return c
	}
	return &gatewayCall{}
}

// ServeHTTP runs g.handle for r once its client is known.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	call := &gatewayCall{outcome: url.Values{}}
	// One bound on the store writes of the request (docs/decisions/0190).
	ctx, release := storebound.With(r.Context(), storebound.Request)
	defer release()
	r = r.WithContext(context.WithValue(ctx, gatewayCallKey{}, call))
	if client, ok := g.authenticate(r); ok {
		call.client = client
		if err := g.handle(sw, r); err != nil {
			g.fail(sw, r, err)
		}
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="balde `+g.name+` gateway"`)
		g.fail(sw, r, fmt.Errorf("%w: a gateway client's credential (a bearer token or a client certificate) is required", errUnauthorized))
	}
	status := sw.code()
	if g.metrics != nil {
		g.metrics.gatewayRequests.WithLabelValues(g.name, call.client, strconv.Itoa(status)).Inc()
	}
	level := slog.LevelDebug
	if call.target != "" || status == http.StatusUnauthorized {
		level = slog.LevelInfo
	}
	g.logger.LogAttrs(r.Context(), level, "gateway request", slog.String("gateway", g.name), slog.String("client", call.client),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.Duration("duration", time.Since(start)), slog.String("target", call.target))
	if g.audit == nil || call.target == "" {
		return
	}
	call.outcome.Set("status", strconv.Itoa(status))
	if status >= 400 && call.message != "" {
		call.outcome.Set("error", call.message)
	}
	e := audit.Entry{User: "gateway:" + call.client, Action: audit.ActionGateway, Target: call.target, Outcome: call.outcome.Encode()}
	err := storebound.ErrSpent // the store did not answer within the bound: the row would wait on it again
	if !storebound.Spent(r.Context()) {
		_, err = g.audit.Record(context.WithoutCancel(r.Context()), e)
	}
	if err != nil {
		g.logger.Error("gateway request not recorded in the audit trail", slog.String("client", call.client), slog.String("target", call.target), slog.Any("error", err))
	}
}
