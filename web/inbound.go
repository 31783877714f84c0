package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Policy names of the inbound limiter's buckets. Keys are
// (INBOUND_IP, env, client IP or IPv6 /64) and
// (INBOUND_TOKEN, env, hex SHA-256 of the API token): a raw token is never
// stored, logged or shown. An authenticated admin on the admin pages is
// charged to (INBOUND_ADMIN, env, user name) instead of its IP, and a
// gateway's client (InboundConfig.Client) to (INBOUND_CLIENT, env, its
// name).
const (
	PolicyInboundIP     = "INBOUND_IP"
	policyInboundToken  = "INBOUND_TOKEN"
	policyInboundAdmin  = "INBOUND_ADMIN"
	policyInboundClient = "INBOUND_CLIENT"
)

// defaultTokenHeader is the request header that carries an API token,
// unless InboundConfig.TokenHeader names another.
const defaultTokenHeader = "API_KEY"

// InboundConfig configures the inbound limiter (docs/decisions/0006): an exact sliding
// window of Limit requests per Window for each client IP, and a Block after
// the limit is exceeded, during which every request is refused.
type InboundConfig struct {
	// Env is the env part of the keys (default "prod").
	Env string
	// IPLimit requests per Window per client IP (1..10000).
	IPLimit int64
	// Window is the sliding window (default 1 min).
	Window time.Duration
	// Block is how long a client is refused after exceeding its limit; 0
	// only refuses until the window frees a slot. DefaultInboundBlock (5
	// min) is balde serve's.
	Block time.Duration
	// AdminLimit requests per Window for each admin credential on the admin
	// pages (default DefaultInboundAdminLimit). An authenticated admin is
	// charged here instead of to its IP, so the public per-IP limit never
	// locks the operator out; without the credential the IP limit applies.
	AdminLimit int64
	// Client, when set, names the authenticated client of a request (a
	// gateway's, GatewayClients.Authenticate): such a request is charged
	// to the client's own bucket, ClientLimit requests per Window and never
	// blocked beyond its window, instead of its IP's. A backend behind one
	// address is one client, not a flood. Anyone else is limited per IP.
	Client func(r *http.Request) (client string, ok bool)
	// ClientLimit is each client's requests per Window (default 10,000,
	// the most a window holds: 166 a second in the default minute).
	ClientLimit int64
	// Tokens have limits of their own that replace the IP limit for
	// requests carrying them in the API_KEY header. A token that is not
	// listed is ignored (the IP limit applies), so a client cannot escape
	// its IP's limit by inventing tokens.
	Tokens []InboundToken
	// Paths are the path prefixes limited (default "/": everything).
	// Exempt paths are never limited (default DefaultInboundExempt). An
	// exempt entry is an exact path ("/healthz" exempts /healthz, not
	// /healthzX nor /healthz/x), unless it ends in "/", which exempts the
	// whole subtree ("/static/").
	//
	// Both are matched against one path, by Middleware and by a Server
	// alike: the request's path as the application's router sees it, its
	// BasePath included when the Server is mounted under one
	// ("/balde/api/" limits balde's API mounted under /balde). The default
	// Exempt also exempts its paths under the BasePath of every Server
	// using this limiter (/balde/static/, /balde/healthz).
	Paths, Exempt []string
	// FailClosed refuses every limited request (503 with Retry-After)
	// while the store cannot answer. The zero value fails open: requests
	// are admitted, each logged and counted (throttle.Observer.FailOpen),
	// so that a locked or unreachable database does not take every page
	// of the application down with it.
	FailClosed bool

	// The options below matter to Middleware, which has no Server around
	// it; a Server uses its own TrustedProxies and error pages.

	// TrustedProxies are the peers whose ForwardedHeader is believed when
	// finding a client's IP. Empty: the socket address is the client.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the header a trusted proxy appends the client to,
	// a comma-separated list read from the right (default
	// "X-Forwarded-For").
	ForwardedHeader string
	// TokenHeader is the header that carries an API token (default
	// "API_KEY").
	TokenHeader string
	// Refused writes the answer to a refused request: err is a
	// *RateLimitError (429), or the store's error when the limiter fails
	// closed. Default: a plain-text 429 or 503 with Retry-After.
	Refused func(w http.ResponseWriter, r *http.Request, err error)
}

// Default inbound limits (see docs/decisions/0006-inbound-limiter.md).
const (
	DefaultInboundIPLimit = 120
	DefaultInboundWindow  = time.Minute
	DefaultInboundBlock   = 5 * time.Minute
	DefaultInboundEnv     = "prod"
	// defaultInboundAdminLimit is generous: an operator clicking through
	// the admin pages, each with its stylesheet, stays far below it.
	defaultInboundAdminLimit = 1200
	// defaultInboundClientLimit is sized for a backend: the most a window
	// holds (throttle.MaxRollingCapacity), 166 requests a second in the
	// default minute, with no block (docs/decisions/0165).
	defaultInboundClientLimit = throttle.MaxRollingCapacity
)

// defaultInboundExempt are the paths not limited by default: the probes
// (exact paths), the Prometheus scrape (protect it with
// Server.MetricsToken), the icon and the stylesheets (a subtree).
var defaultInboundExempt = []string{"/healthz", "/livez", "/readyz", "/metrics", "/favicon.ico", "/static/"}

// InboundToken is one API token with its own limit. Window and Block of 0
// take the IP limit's.
type InboundToken struct {
	// Hash is the hex SHA-256 of the token (see HashToken).
	Hash   string
	Limit  int64
	Window time.Duration
	Block  time.Duration
}

// HashToken returns the hex SHA-256 of an API token: its identity in keys,
// configuration and logs.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParseInboundTokens reads API tokens with their limits, one entry per line
// or separated by commas; blank lines and lines starting with # are
// skipped. An entry is
//
//	TOKEN=LIMIT[/WINDOW[/BLOCK]]
//
// where TOKEN is the raw token or "sha256:" and its 64-hex-digit SHA-256
// (so a configuration file need not hold the secret), LIMIT a number of
// requests, WINDOW and BLOCK Go durations. The split is at the last "=",
// so base64 padding in a token is fine; a token cannot hold a comma.
//
//	s3cr3t-monitor=1000/1m/10m
//	sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08=60
func ParseInboundTokens(r io.Reader) ([]InboundToken, error) {
	return parseEntries(r, "inbound tokens", parseInboundToken, func(t InboundToken) (string, string) {
		return t.Hash, fmt.Sprintf("token sha256:%s…", t.Hash[:8])
	})
}

func parseInboundToken(entry string) (InboundToken, error) {
	i := strings.LastIndexByte(entry, '=')
	if i <= 0 {
		return InboundToken{}, fmt.Errorf("want TOKEN=LIMIT[/WINDOW[/BLOCK]]")
	}
	token, spec := strings.TrimSpace(entry[:i]), entry[i+1:]
	var t InboundToken
	if h, ok := strings.CutPrefix(token, "sha256:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return InboundToken{}, fmt.Errorf("sha256: wants 64 hex digits")
		}
		t.Hash = strings.ToLower(h)
	} else {
		if strings.ContainsAny(token, " \t") {
			return InboundToken{}, fmt.Errorf("a token cannot hold spaces")
		}
		t.Hash = HashToken(token)
	}
	parts := strings.Split(spec, "/")
	if len(parts) > 3 {
		return InboundToken{}, fmt.Errorf("token sha256:%s…: want LIMIT[/WINDOW[/BLOCK]]", t.Hash[:8])
	}
	n, err := strconv.ParseInt(strings.TrimSpace(parts[0]), 10, 64)
	if err != nil || n < 1 || n > throttle.MaxRollingCapacity {
		return InboundToken{}, fmt.Errorf("token sha256:%s…: limit %q is not a number in 1..%d", t.Hash[:8], parts[0], throttle.MaxRollingCapacity)
	}
	t.Limit = n
	durs := []*time.Duration{&t.Window, &t.Block}
	for k, p := range parts[1:] {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d < 0 || (k == 0 && d == 0) {
			return InboundToken{}, fmt.Errorf("token sha256:%s…: %q is not a positive duration (e.g. 1m)", t.Hash[:8], p)
		}
		*durs[k] = d
	}
	return t, nil
}

// Inbound is the inbound limiter: it decides whether a request to the
// server's own endpoints is admitted, through the same engine (and so the
// same SQL store, shared by every instance) as the outbound throttles.
//
// Build it with NewInbound, put Policies() in the resolver of a
// throttle.Limiter over the shared store, and set Limiter to it before
// Server.Open. A Limiter of its own (rather than the outbound one) lets the
// caller keep routine inbound takes out of the ledger.
type Inbound struct {
	// Limiter takes the inbound charges. Required before use.
	Limiter *throttle.Limiter

	env    string
	ip     throttle.Policy
	admin  throttle.Policy
	client throttle.Policy
	// clientOf is InboundConfig.Client.
	clientOf func(*http.Request) (string, bool)
	tokens   map[string]throttle.Policy // by token hash
	paths    []string
	exempt   []string
	// defaultExempt: Exempt was not configured, so DefaultInboundExempt
	// applies under every mounted Server's BasePath too.
	defaultExempt bool

	mu     sync.RWMutex
	mounts []inboundMount // Servers using this limiter (see mount)

	trusted     []netip.Prefix
	forwarded   string
	tokenHeader string
	refused     func(http.ResponseWriter, *http.Request, error)
}

// NewInbound validates cfg and returns the limiter (without its
// throttle.Limiter yet).
func NewInbound(cfg InboundConfig) (*Inbound, error) {
	if cfg.Env == "" {
		cfg.Env = DefaultInboundEnv
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultInboundWindow
	}
	if cfg.Paths == nil {
		cfg.Paths = []string{"/"}
	}
	defaultExempt := cfg.Exempt == nil
	if defaultExempt {
		cfg.Exempt = defaultInboundExempt
	}
	if cfg.AdminLimit == 0 {
		cfg.AdminLimit = defaultInboundAdminLimit
	}
	if cfg.ClientLimit == 0 {
		cfg.ClientLimit = defaultInboundClientLimit
	}
	if cfg.ForwardedHeader == "" {
		cfg.ForwardedHeader = "X-Forwarded-For"
	}
	if cfg.TokenHeader == "" {
		cfg.TokenHeader = defaultTokenHeader
	}
	if cfg.Refused == nil {
		cfg.Refused = writeRefusedPlain
	}
	fail := throttle.FailOpen
	if cfg.FailClosed {
		fail = throttle.FailClosed
	}
	in := &Inbound{
		env:    cfg.Env,
		ip:     rollingPolicy(PolicyInboundIP, cfg.IPLimit, cfg.Window, cfg.Block, fail),
		admin:  rollingPolicy(policyInboundAdmin, cfg.AdminLimit, cfg.Window, 0, fail),
		client: rollingPolicy(policyInboundClient, cfg.ClientLimit, cfg.Window, 0, fail),

		clientOf: cfg.Client,
		tokens:   make(map[string]throttle.Policy, len(cfg.Tokens)),
		paths:    cfg.Paths,
		exempt:   cfg.Exempt,

		defaultExempt: defaultExempt,

		trusted:     cfg.TrustedProxies,
		forwarded:   http.CanonicalHeaderKey(cfg.ForwardedHeader),
		tokenHeader: cfg.TokenHeader,
		refused:     cfg.Refused,
	}
	if err := in.ip.Validate(); err != nil {
		return nil, fmt.Errorf("web: inbound IP limit: %w", err)
	}
	if err := in.admin.Validate(); err != nil {
		return nil, fmt.Errorf("web: inbound admin limit: %w", err)
	}
	if err := in.client.Validate(); err != nil {
		return nil, fmt.Errorf("web: inbound client limit: %w", err)
	}
	if err := (throttle.Key{Policy: PolicyInboundIP, Env: cfg.Env, Identifier: "x"}).Validate(); err != nil {
		return nil, fmt.Errorf("web: inbound env: %w", err)
	}
	for _, t := range cfg.Tokens {
		window, block := t.Window, t.Block
		if window == 0 {
			window = cfg.Window
		}
		if block == 0 {
			block = cfg.Block
		}
		p := rollingPolicy(policyInboundToken, t.Limit, window, block, fail)
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("web: inbound token sha256:%.8s…: %w", t.Hash, err)
		}
		in.tokens[t.Hash] = p
	}
	return in, nil
}

// UseStore sets in.Limiter to a limiter of its own over store (the store
// of the outbound limiter, or its group commit), with cfg's Clock,
// Thresholds, Observer and Logger. Its Ledger is throttle.LedgerNoTakes and
// it skips refusal rows: every request is a take, and a ledger row for each
// (or for each refusal of a flood) would bury the outbound history. Its
// decisions still reach the Observer.
func (in *Inbound) UseStore(store throttle.Store, cfg throttle.Config) error {
	cfg.Ledger = throttle.LedgerNoTakes
	cfg.SkipRefusalRows = true
	lim, err := throttle.NewLimiter(store, in.Policies(), cfg)
	if err != nil {
		return fmt.Errorf("web: inbound limiter: %w", err)
	}
	in.Limiter = lim
	return nil
}

// inboundGrains is how many grains a window of the inbound limiter is cut
// into: a request is counted at the end of its grain (1 s of the default
// 1-minute window), so a key's state holds at most InboundGrains+1 spends
// whatever its limit (docs/decisions/0110-inbound-fixed-size-window.md).
const inboundGrains = 60

// rollingPolicy is a sliding window of limit requests per window: at most
// limit requests are admitted in any window, each token spent coming back
// one window after the end of its grain (RefillRolling with a
// RollingGrain of window/InboundGrains: between one window and one window
// and a grain after it was spent), and exceeding the limit blocks the key
// for block. Its takes write no ledger rows (throttle.LedgerNoTakes),
// whichever limiter resolves it.
func rollingPolicy(name string, limit int64, window, block time.Duration, fail throttle.FailMode) throttle.Policy {
	return throttle.Policy{
		Name:         name,
		Refill:       throttle.RefillRolling,
		Capacity:     limit,
		RefillTokens: limit,
		RefillPeriod: window,
		RollingGrain: window / inboundGrains,
		BlockFor:     block,
		FailMode:     fail,
		Ledger:       throttle.LedgerNoTakes,
	}
}

// Policies resolves the inbound keys: INBOUND_IP to the IP policy, and
// INBOUND_TOKEN keys to the policy of their token (ErrUnknownPolicy for a
// token no longer configured: its row shows as an orphan).
func (in *Inbound) Policies() throttle.Resolver {
	return throttle.ResolverFunc(func(k throttle.Key) (throttle.Policy, error) {
		switch k.Policy {
		case PolicyInboundIP:
			return in.ip, nil
		case policyInboundAdmin:
			return in.admin, nil
		case policyInboundClient:
			return in.client, nil
		case policyInboundToken:
			if p, ok := in.tokens[k.Identifier]; ok {
				return p, nil
			}
			return throttle.Policy{}, fmt.Errorf("%w: %s for a token no longer configured", throttle.ErrUnknownPolicy, k.Policy)
		}
		return throttle.Policy{}, fmt.Errorf("%w: %q", throttle.ErrUnknownPolicy, k.Policy)
	})
}

// InboundPolicyNames lists the inbound limiter's policy names, whether or
// not a limiter is configured (balde buckets filters on them).
func InboundPolicyNames() []string {
	return []string{PolicyInboundIP, policyInboundToken, policyInboundAdmin, policyInboundClient}
}

// applies reports whether a request path, as the application's router
// sees it, is limited: under one of the limited prefixes and not exempt
// (an exact exempt path, or under an exempt entry ending in "/"; with the
// default Exempt, such a path under a mounted Server's BasePath too).
func (in *Inbound) applies(path string) bool {
	if exempted(in.exempt, path) {
		return false
	}
	if in.defaultExempt {
		in.mu.RLock()
		for _, m := range in.mounts {
			if rest, ok := under(path, m.base); ok && exempted(defaultInboundExempt, rest) {
				in.mu.RUnlock()
				return false
			}
		}
		in.mu.RUnlock()
	}
	for _, p := range in.paths {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

func exempted(exempt []string, path string) bool {
	for _, p := range exempt {
		if path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

// under returns path relative to base ("/" for base itself) when path is
// base or below it; base "" is the root, under which every path is.
func under(path, base string) (string, bool) {
	rest, ok := strings.CutPrefix(path, base)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	if rest == "" {
		rest = "/"
	}
	return rest, true
}

// inboundMount is a Server using this limiter: requests under base are its
// own, and admin names the admin credential a request to one of its admin
// routes carries ("" for anyone else).
type inboundMount struct {
	base  string
	admin func(*http.Request) string
}

// mount records a Server using in (Server.Handler calls it), so that
// Middleware in front of the application charges a request to the
// Server's admin pages or API to the admin's bucket, as the Server itself
// would, and the default exemptions apply under its BasePath. A Server
// stays registered for the life of the Inbound (Close does not remove it).
func (in *Inbound) mount(base string, admin func(*http.Request) string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.mounts = append(in.mounts, inboundMount{base: base, admin: admin})
}

// mountedAdmin returns the admin a request (its path as the application
// sees it) is charged to when it goes to a mounted Server's admin route
// with the admin credential; "" otherwise.
func (in *Inbound) mountedAdmin(r *http.Request) string {
	in.mu.RLock()
	mounts := in.mounts
	in.mu.RUnlock()
	for _, m := range mounts {
		if _, ok := under(r.URL.Path, m.base); ok {
			if admin := m.admin(r); admin != "" {
				return admin
			}
		}
	}
	return ""
}

// chargedKey marks a request's context once an Inbound charged it (the
// value is the *Inbound): a Server or a second Middleware behind it with
// the same limiter lets it through without charging it again.
type chargedKey struct{}

// charged reports whether in already charged the request of ctx.
func (in *Inbound) charged(ctx context.Context) bool {
	by, _ := ctx.Value(chargedKey{}).(*Inbound)
	return by == in
}

// markCharged returns r with its context marked as charged by in.
func (in *Inbound) markCharged(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), chargedKey{}, in))
}

// key returns the bucket a request is charged to, with the name of its
// RateLimit policy ("admin", "client", "token" or "ip"): the admin's when
// an authenticated admin is named, the gateway client's when one is, a
// configured token's own bucket when the request carries one, the client
// IP's otherwise.
func (in *Inbound) key(admin, client, token, ip string) (throttle.Key, string, throttle.Policy) {
	if client != "" {
		return throttle.Key{Policy: policyInboundClient, Env: in.env, Identifier: client}, "client", in.client
	}
	if admin != "" {
		k := throttle.Key{Policy: policyInboundAdmin, Env: in.env, Identifier: admin}
		if k.Validate() != nil {
			k.Identifier = HashToken(admin)
		}
		return k, "admin", in.admin
	}
	if token != "" {
		h := HashToken(token)
		if p, ok := in.tokens[h]; ok {
			return throttle.Key{Policy: policyInboundToken, Env: in.env, Identifier: h}, "token", p
		}
	}
	return throttle.Key{Policy: PolicyInboundIP, Env: in.env, Identifier: ip}, "ip", in.ip
}
