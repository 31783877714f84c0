package web

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Policy names of the inbound limiter's buckets, whose identifiers are a
// client IP (or IPv6 /64), the hex SHA-256 of an API token (a raw token is
// never stored, logged or shown), an admin's name, a gateway client's.
const (
	PolicyInboundIP     = "INBOUND_IP"
	policyInboundToken  = "INBOUND_TOKEN"
	policyInboundAdmin  = "INBOUND_ADMIN"
	policyInboundClient = "INBOUND_CLIENT"
)

const defaultTokenHeader = "API_KEY"

// InboundConfig configures the inbound limiter (docs/decisions/0006): a
// sliding window of IPLimit requests per Window for each client IP, and a
// Block after the limit is exceeded.
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
	// pages (default 1200), charged instead of the IP limit.
	AdminLimit int64
	// Client, when set, names the authenticated client of a request (a
	// gateway's): it is charged to the client's own bucket, ClientLimit
	// requests per Window, never blocked, instead of its IP's.
	Client func(r *http.Request) (client string, ok bool)
	// ClientLimit is each client's requests per Window (default 10,000).
	ClientLimit int64
	// Tokens have limits of their own that replace the IP limit for
	// requests carrying them in TokenHeader; an unlisted token is ignored.
	Tokens []InboundToken
	// Paths are the path prefixes limited (default "/"). Exempt paths are
	// never limited (default: the probes, /metrics, /favicon.ico and
	// /static/); an entry is an exact path unless it ends in "/" (a
	// subtree). Both match the path as the application's router sees it,
	// BasePath included; the default Exempt also applies under the
	// BasePath of every Server using this limiter.
	Paths, Exempt []string
	// FailClosed refuses every limited request (503 with Retry-After)
	// while the store cannot answer; the zero value admits them, each
	// logged and counted.
	FailClosed bool

	// The options below matter to Middleware, which has no Server around
	// it; a Server uses its own TrustedProxies and error pages.

	// TrustedProxies are the peers whose ForwardedHeader (default
	// "X-Forwarded-For", read from the right) is believed when finding a
	// client's IP. Empty: the socket address is the client.
	TrustedProxies  []netip.Prefix
	ForwardedHeader string
	TokenHeader     string // the header of an API token (default "API_KEY")
	// Refused writes the answer to a refused request: err is a
	// *RateLimitError (429), or the store's error when the limiter fails
	// closed. Default: a plain-text 429 or 503 with Retry-After.
	Refused func(w http.ResponseWriter, r *http.Request, err error)
}

// Default inbound limits (see docs/decisions/0006-inbound-limiter.md).
const (
	DefaultInboundIPLimit    = 120
	DefaultInboundWindow     = time.Minute
	DefaultInboundBlock      = 5 * time.Minute
	DefaultInboundEnv        = "prod"
	defaultInboundAdminLimit = 1200
	// defaultInboundClientLimit is the most a window holds, for a backend
	// (docs/decisions/0165).
	defaultInboundClientLimit = throttle.MaxRollingCapacity
)

// defaultInboundExempt are the paths not limited by default.
var defaultInboundExempt = []string{"/healthz", "/livez", "/readyz", "/metrics", "/favicon.ico", "/static/"}

// InboundToken is one API token (Hash: HashToken's) with its own limit.
// Window and Block of 0 take the IP limit's.
type InboundToken struct {
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
	token, hashed := strings.CutPrefix(token, "sha256:")
	sum, err := tokenDigest(token, hashed)
	if err != nil {
		return InboundToken{}, err
	}
	t := InboundToken{Hash: hex.EncodeToString(sum[:])}
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

// tokenDigest is the SHA-256 of a token given as itself (no spaces) or,
// hashed, as the 64 hex digits of its SHA-256.
func tokenDigest(token string, hashed bool) ([sha256.Size]byte, error) {
	if !hashed {
		if strings.ContainsAny(token, " \t") {
			return [sha256.Size]byte{}, errors.New("a token cannot hold spaces")
		}
		return sha256.Sum256([]byte(token)), nil
	}
	b, err := hex.DecodeString(token)
	if err != nil || len(b) != sha256.Size {
		return [sha256.Size]byte{}, errors.New("sha256: wants the 64 hex digits of the token's SHA-256")
	}
	return [sha256.Size]byte(b), nil
}

// Inbound is the inbound limiter of the server's own endpoints, on the
// same SQL store as the outbound throttles. Build it with NewInbound and
// give it a Limiter resolving Policies() (UseStore) before Server.Open.
type Inbound struct {
	// Limiter takes the inbound charges. Required before use.
	Limiter *throttle.Limiter

	cfg           InboundConfig // with its defaults
	ip            throttle.Policy
	admin         throttle.Policy
	client        throttle.Policy
	tokens        map[string]throttle.Policy // by token hash
	defaultExempt bool

	mu     sync.RWMutex
	mounts []*Server // Servers using this limiter (see mount)
}

// NewInbound validates cfg and returns the limiter (without its
// throttle.Limiter yet).
func NewInbound(cfg InboundConfig) (*Inbound, error) {
	cfg.Env = cmp.Or(cfg.Env, DefaultInboundEnv)
	cfg.Window = cmp.Or(cfg.Window, DefaultInboundWindow)
	cfg.AdminLimit = cmp.Or(cfg.AdminLimit, defaultInboundAdminLimit)
	cfg.ClientLimit = cmp.Or(cfg.ClientLimit, defaultInboundClientLimit)
	cfg.ForwardedHeader = http.CanonicalHeaderKey(cmp.Or(cfg.ForwardedHeader, "X-Forwarded-For"))
	cfg.TokenHeader = cmp.Or(cfg.TokenHeader, defaultTokenHeader)
	if cfg.Paths == nil {
		cfg.Paths = []string{"/"}
	}
	defaultExempt := cfg.Exempt == nil
	if defaultExempt {
		cfg.Exempt = defaultInboundExempt
	}
	if cfg.Refused == nil {
		cfg.Refused = writeRefusedPlain
	}
	fail := throttle.FailOpen
	if cfg.FailClosed {
		fail = throttle.FailClosed
	}
	in := &Inbound{
		cfg:           cfg,
		ip:            rollingPolicy(PolicyInboundIP, cfg.IPLimit, cfg.Window, cfg.Block, fail),
		admin:         rollingPolicy(policyInboundAdmin, cfg.AdminLimit, cfg.Window, 0, fail),
		client:        rollingPolicy(policyInboundClient, cfg.ClientLimit, cfg.Window, 0, fail),
		tokens:        make(map[string]throttle.Policy, len(cfg.Tokens)),
		defaultExempt: defaultExempt,
	}
	for i, p := range []throttle.Policy{in.ip, in.admin, in.client} {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("web: inbound %s limit: %w", []string{"IP", "admin", "client"}[i], err)
		}
	}
	if err := (throttle.Key{Policy: PolicyInboundIP, Env: cfg.Env, Identifier: "x"}).Validate(); err != nil {
		return nil, fmt.Errorf("web: inbound env: %w", err)
	}
	for _, t := range cfg.Tokens {
		p := rollingPolicy(policyInboundToken, t.Limit, cmp.Or(t.Window, cfg.Window), cmp.Or(t.Block, cfg.Block), fail)
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("web: inbound token sha256:%.8s…: %w", t.Hash, err)
		}
		in.tokens[t.Hash] = p
	}
	return in, nil
}

// UseStore sets in.Limiter to a limiter of its own over store with cfg,
// writing no ledger rows for takes or refusals (they would bury the
// outbound history); its decisions still reach the Observer.
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

// inboundGrains is how many grains a window is cut into: a key's state
// holds at most inboundGrains+1 spends whatever its limit
// (docs/decisions/0110-inbound-fixed-size-window.md).
const inboundGrains = 60

// rollingPolicy admits at most limit requests in any window, each token
// coming back one window after the end of its grain; exceeding the limit
// blocks the key for block. Its takes write no ledger rows.
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
// sees it, is limited (see InboundConfig.Paths).
func (in *Inbound) applies(path string) bool {
	if exempted(in.cfg.Exempt, path) {
		return false
	}
	if in.defaultExempt {
		in.mu.RLock()
		for _, m := range in.mounts {
			if rest, ok := under(path, m.BasePath); ok && exempted(defaultInboundExempt, rest) {
				in.mu.RUnlock()
				return false
			}
		}
		in.mu.RUnlock()
	}
	return slices.ContainsFunc(in.cfg.Paths, func(p string) bool { return strings.HasPrefix(path, p) })
}

func exempted(exempt []string, path string) bool {
	return slices.ContainsFunc(exempt, func(p string) bool {
		return path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p))
	})
}

// under returns path relative to base ("/" for base itself) when path is
// base or below it; base "" is the root, under which every path is.
func under(path, base string) (string, bool) {
	rest, ok := strings.CutPrefix(path, base)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return cmp.Or(rest, "/"), true
}

// mount records a Server using in, so that Middleware charges its admin's
// requests as the Server would and the default exemptions apply under its
// BasePath. It stays registered for the life of the Inbound.
func (in *Inbound) mount(s *Server) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.mounts = append(in.mounts, s)
}

// mountedAdmin returns the admin a request to a mounted Server's admin
// route is charged to, or "".
func (in *Inbound) mountedAdmin(r *http.Request) string {
	in.mu.RLock()
	mounts := in.mounts
	in.mu.RUnlock()
	for _, s := range mounts {
		if _, ok := under(r.URL.Path, s.BasePath); ok {
			if admin := s.routedAdmin(r); admin != "" {
				return admin
			}
		}
	}
	return ""
}

// key returns the bucket a request is charged to and its RateLimit policy
// name: the gateway client's, the admin's, a configured token's, else the
// client IP's.
func (in *Inbound) key(admin, client, token, ip string) (throttle.Key, string, throttle.Policy) {
	if client != "" {
		return throttle.Key{Policy: policyInboundClient, Env: in.cfg.Env, Identifier: client}, "client", in.client
	}
	if admin != "" {
		k := throttle.Key{Policy: policyInboundAdmin, Env: in.cfg.Env, Identifier: admin}
		if k.Validate() != nil {
			k.Identifier = HashToken(admin)
		}
		return k, "admin", in.admin
	}
	if token != "" {
		h := HashToken(token)
		if p, ok := in.tokens[h]; ok {
			return throttle.Key{Policy: policyInboundToken, Env: in.cfg.Env, Identifier: h}, "token", p
		}
	}
	return throttle.Key{Policy: PolicyInboundIP, Env: in.cfg.Env, Identifier: ip}, "ip", in.ip
}
