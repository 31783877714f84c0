package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"balde/throttle"
	"balde/throttle/sqlstore"
	"balde/web"
)

// Config is the configuration shared by every command. Defaults come from
// DefaultConfig, then environment variables (ParseEnv), then flags: a flag
// always wins. The README lists every field with its flag and variable.
type Config struct {
	// DB is the store's DSN (--db, BALDE_DB).
	DB string
	// Addr is where serve listens (--addr, BALDE_ADDR).
	Addr string

	// DictURL is the DICT's base URL, e.g. https://dict.pi.rsfn.net.br:16522
	// (--dict-url, BALDE_DICT_URL). Empty: serve starts the simulator.
	DictURL string
	// DictParticipant is this participant's ISPB (--dict-participant,
	// BALDE_DICT_PARTICIPANT).
	DictParticipant string
	// DictCategory is the participant's category A..H until reconcile learns
	// it (--dict-category, BALDE_DICT_CATEGORY).
	DictCategory string
	// DictEnv is the env part of DICT bucket keys (--dict-env, BALDE_DICT_ENV).
	DictEnv string
	// DictCert, DictKey and DictCA are PEM files for mutual TLS with the DICT
	// (BALDE_DICT_CERT, BALDE_DICT_KEY, BALDE_DICT_CA).
	DictCert, DictKey, DictCA string

	// SifenURL is the base URL of SIFEN (--sifen-url, BALDE_SIFEN_URL).
	// Empty: serve starts the simulator.
	SifenURL string
	// SifenThrottle is the minimum interval between two lots of one RUC in
	// one environment (SIFEN_THROTTLE_SECONDS, default 10 s);
	// SifenThrottleProd overrides it for prod (SIFEN_THROTTLE_SECONDS_PROD).
	SifenThrottle, SifenThrottleProd time.Duration
	// SifenCert, SifenKey and SifenCA are PEM files for mutual TLS with SIFEN
	// (BALDE_SIFEN_CERT, BALDE_SIFEN_KEY, BALDE_SIFEN_CA).
	SifenCert, SifenKey, SifenCA string

	// SifenPerMinute, when positive, also caps the lots of one RUC and env
	// per minute (BALDE_SIFEN_PER_MINUTE).
	SifenPerMinute int64

	// PolicyFile overrides and extends the policy catalog (--policies,
	// BALDE_POLICY_FILE).
	PolicyFile string

	// GroupCommit batches the concurrent decisions of a process into one
	// transaction (BALDE_GROUP_COMMIT=on|off, default on).
	GroupCommit bool

	// Ledger is how routine takes are written: every, minute or none
	// (BALDE_LEDGER). LedgerRetention is how long rows are kept
	// (BALDE_LEDGER_RETENTION, default 720h).
	Ledger          throttle.LedgerGranularity
	LedgerRetention time.Duration
	// Thresholds grade severity (BALDE_SEVERITY_THRESHOLDS "50,25,10").
	Thresholds throttle.Thresholds
	// AlertWebhook receives severity changes as JSON (BALDE_ALERT_WEBHOOK).
	AlertWebhook string

	// AdminUser is the admin's name (--admin-user, BALDE_ADMIN_USER); the
	// ledger records it on a reset. AdminPassword (BALDE_ADMIN_PASSWORD) or
	// AdminPasswordBcrypt (BALDE_ADMIN_PASSWORD_BCRYPT, wins) is the
	// password; with neither, serve generates one and prints it once.
	// Passwords have no flag: a command line is visible to every user.
	AdminUser, AdminPassword, AdminPasswordBcrypt string
	// TrustedProxies are the peers whose X-Forwarded-For is believed
	// (--trusted-proxies, BALDE_TRUSTED_PROXIES: CIDR prefixes or
	// addresses, comma-separated). Empty: the socket address is the client.
	TrustedProxies []netip.Prefix
	// InboundIPLimit is the number of requests per InboundWindow a client
	// IP may make to serve's endpoints (--inbound-ip-limit,
	// BALDE_INBOUND_IP_LIMIT, default 120; 0 turns the inbound limiter
	// off). InboundBlock is how long a client that exceeded its limit is
	// refused (--inbound-block, BALDE_INBOUND_BLOCK, default 5m).
	InboundIPLimit int64
	InboundWindow  time.Duration
	InboundBlock   time.Duration
	// InboundTokens are API tokens (API_KEY header) with limits of their
	// own (BALDE_INBOUND_TOKENS: "TOKEN=LIMIT[/WINDOW[/BLOCK]]", comma- or
	// newline-separated); InboundTokensFile holds more, one per line
	// (BALDE_INBOUND_TOKENS_FILE). See web.ParseInboundTokens.
	InboundTokens     []web.InboundToken
	InboundTokensFile string
	// InboundPaths are the limited path prefixes (BALDE_INBOUND_PATHS,
	// default "/"); InboundExempt are never limited (BALDE_INBOUND_EXEMPT,
	// default "/healthz,/metrics,/static/").
	InboundPaths, InboundExempt []string
	// InboundFailMode is what the inbound limiter does when the database
	// is down (BALDE_INBOUND_FAIL: open, the default, or closed).
	InboundFailMode throttle.FailMode

	// DictReconcileEvery is how often serve reconciles the local DICT
	// buckets with the DICT's GET /policies/ in the background
	// (--dict-reconcile-every, BALDE_DICT_RECONCILE_EVERY: a duration of at
	// least 10 s, POLICIES_LIST allowing 6 a minute, or "off").
	// ReconcileAuto, the default, is every minute against a real DICT and
	// off against the simulator, which shares no traffic with it.
	DictReconcileEvery time.Duration
	// PruneEvery is how often serve deletes ledger rows and DICT lookups
	// older than LedgerRetention and idle bucket rows, and settles SIFEN
	// documents a crashed send left in "sending" (--prune-every,
	// BALDE_PRUNE_EVERY, default 10m; "off" or 0 turns it off).
	PruneEvery time.Duration
}

// ReconcileAuto is DictReconcileEvery's default: DefaultReconcileEvery
// against a real DICT, off against the simulator.
const ReconcileAuto time.Duration = -1

// Defaults of serve's background work.
const (
	DefaultReconcileEvery = time.Minute
	DefaultPruneEvery     = 10 * time.Minute
	// minReconcileEvery keeps reconciliation within POLICIES_LIST's 6 a minute.
	minReconcileEvery = 10 * time.Second
)

// DefaultConfig returns the configuration of "make run": SQLite in the
// working directory, simulators in-process.
func DefaultConfig() Config {
	return Config{
		DB:              sqlstore.DefaultDSN,
		Addr:            "127.0.0.1:8080",
		DictParticipant: "12345678",
		DictCategory:    "A",
		DictEnv:         "prod",
		SifenThrottle:   10 * time.Second,
		Ledger:          throttle.LedgerEveryTake,
		GroupCommit:     true,
		LedgerRetention: throttle.DefaultRetention,
		Thresholds:      throttle.DefaultThresholds,
		AdminUser:       "admin",
		InboundIPLimit:  web.DefaultInboundIPLimit,
		InboundWindow:   web.DefaultInboundWindow,
		InboundBlock:    web.DefaultInboundBlock,
		InboundPaths:    []string{"/"},
		InboundExempt:   web.DefaultInboundExempt,
		InboundFailMode: throttle.FailOpen,

		DictReconcileEvery: ReconcileAuto,
		PruneEvery:         DefaultPruneEvery,
	}
}

// ParseEnv reads the environment variables through getenv. An unset or
// empty variable keeps the current value; a malformed one is an error naming
// the variable.
func (c *Config) ParseEnv(getenv func(string) string) error {
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	str("BALDE_DB", &c.DB)
	str("BALDE_ADDR", &c.Addr)
	str("BALDE_DICT_URL", &c.DictURL)
	str("BALDE_DICT_PARTICIPANT", &c.DictParticipant)
	str("BALDE_DICT_CATEGORY", &c.DictCategory)
	str("BALDE_DICT_ENV", &c.DictEnv)
	str("BALDE_DICT_CERT", &c.DictCert)
	str("BALDE_DICT_KEY", &c.DictKey)
	str("BALDE_DICT_CA", &c.DictCA)
	str("BALDE_SIFEN_URL", &c.SifenURL)
	str("BALDE_SIFEN_CERT", &c.SifenCert)
	str("BALDE_SIFEN_KEY", &c.SifenKey)
	str("BALDE_SIFEN_CA", &c.SifenCA)
	str("BALDE_POLICY_FILE", &c.PolicyFile)
	str("BALDE_ALERT_WEBHOOK", &c.AlertWebhook)

	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{"SIFEN_THROTTLE_SECONDS", &c.SifenThrottle}, {"SIFEN_THROTTLE_SECONDS_PROD", &c.SifenThrottleProd}} {
		if s := getenv(v.name); s != "" {
			d, err := parseSeconds(s)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			*v.dst = d
		}
	}
	if s := getenv("BALDE_SIFEN_PER_MINUTE"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("BALDE_SIFEN_PER_MINUTE: %q is not a whole number of lots per minute", s)
		}
		c.SifenPerMinute = n
	}
	if s := getenv("BALDE_GROUP_COMMIT"); s != "" {
		switch s {
		case "on", "true", "1":
			c.GroupCommit = true
		case "off", "false", "0":
			c.GroupCommit = false
		default:
			return fmt.Errorf("BALDE_GROUP_COMMIT: %q (want on or off)", s)
		}
	}
	if s := getenv("BALDE_LEDGER"); s != "" {
		g, err := throttle.ParseLedgerGranularity(s)
		if err != nil {
			return fmt.Errorf("BALDE_LEDGER: %w", err)
		}
		c.Ledger = g
	}
	if s := getenv("BALDE_LEDGER_RETENTION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("BALDE_LEDGER_RETENTION: %q is not a positive duration (e.g. 720h)", s)
		}
		c.LedgerRetention = d
	}
	if s := getenv("BALDE_SEVERITY_THRESHOLDS"); s != "" {
		t, err := parseThresholds(s)
		if err != nil {
			return fmt.Errorf("BALDE_SEVERITY_THRESHOLDS: %w", err)
		}
		c.Thresholds = t
	}
	return c.parseWebEnv(getenv)
}

// parseSeconds reads a whole or decimal number of seconds ("10", "2.5").
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 86400 {
		return 0, fmt.Errorf("%q is not a number of seconds between 0 and 86400", s)
	}
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond), nil
}

// parseThresholds reads "medium,high,critical" percentages.
func parseThresholds(s string) (throttle.Thresholds, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return throttle.Thresholds{}, fmt.Errorf("%q: want three percentages medium,high,critical (e.g. 50,25,10)", s)
	}
	var n [3]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return throttle.Thresholds{}, fmt.Errorf("%q: %q is not a whole percentage", s, p)
		}
		n[i] = v
	}
	t := throttle.Thresholds{Medium: n[0], High: n[1], Critical: n[2]}
	return t, t.Validate()
}

// secondsFlag is a flag.Value of a number of seconds, like the env variable.
type secondsFlag struct{ d *time.Duration }

func (f secondsFlag) String() string {
	if f.d == nil {
		return ""
	}
	return strconv.FormatFloat(f.d.Seconds(), 'f', -1, 64)
}

func (f secondsFlag) Set(s string) error {
	d, err := parseSeconds(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// addStoreFlags registers --db.
func (c *Config) addStoreFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DB, "db", c.DB, "database DSN: sqlite://FILE, a file path, or postgres://... (env BALDE_DB)")
}

// addDictFlags registers the DICT endpoint and identity flags.
func (c *Config) addDictFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DictURL, "dict-url", c.DictURL, "DICT base URL (env BALDE_DICT_URL)")
	fs.StringVar(&c.DictParticipant, "dict-participant", c.DictParticipant, "this participant's ISPB, 8 digits (env BALDE_DICT_PARTICIPANT)")
	fs.StringVar(&c.DictCategory, "dict-category", c.DictCategory, "participant category A..H until reconcile learns it (env BALDE_DICT_CATEGORY)")
	fs.StringVar(&c.DictEnv, "dict-env", c.DictEnv, "env part of DICT bucket keys (env BALDE_DICT_ENV)")
}

// addSifenFlags registers the SIFEN endpoint flags.
func (c *Config) addSifenFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.SifenURL, "sifen-url", c.SifenURL, `SIFEN base URL, "{env}" standing for test or prod, or "official" for SIFEN's endpoints (env BALDE_SIFEN_URL)`)
	fs.Var(secondsFlag{&c.SifenThrottle}, "sifen-throttle", "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)")
	fs.Var(secondsFlag{&c.SifenThrottleProd}, "sifen-throttle-prod", "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)")
}

// addPolicyFlags registers --policies.
func (c *Config) addPolicyFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PolicyFile, "policies", c.PolicyFile, "JSON file overriding or adding policies (env BALDE_POLICY_FILE)")
}

// parseWebEnv reads the variables of serve's web server (admin credential,
// trusted proxies, inbound limiter).
func (c *Config) parseWebEnv(getenv func(string) string) error {
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	str("BALDE_ADMIN_USER", &c.AdminUser)
	str("BALDE_ADMIN_PASSWORD", &c.AdminPassword)
	str("BALDE_ADMIN_PASSWORD_BCRYPT", &c.AdminPasswordBcrypt)
	str("BALDE_INBOUND_TOKENS_FILE", &c.InboundTokensFile)
	if s := getenv("BALDE_TRUSTED_PROXIES"); s != "" {
		p, err := web.ParseTrustedProxies(s)
		if err != nil {
			return fmt.Errorf("BALDE_TRUSTED_PROXIES: %w", err)
		}
		c.TrustedProxies = p
	}
	if s := getenv("BALDE_INBOUND_IP_LIMIT"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > throttle.MaxRollingCapacity {
			return fmt.Errorf("BALDE_INBOUND_IP_LIMIT: %q is not a number of requests in 0..%d", s, throttle.MaxRollingCapacity)
		}
		c.InboundIPLimit = n
	}
	for _, v := range []struct {
		name     string
		dst      *time.Duration
		zeroOK   bool
		positive string
	}{
		{"BALDE_INBOUND_WINDOW", &c.InboundWindow, false, "a positive duration (e.g. 1m)"},
		{"BALDE_INBOUND_BLOCK", &c.InboundBlock, true, "a duration (e.g. 5m, or 0 for no block)"},
	} {
		if s := getenv(v.name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 || (d == 0 && !v.zeroOK) {
				return fmt.Errorf("%s: %q is not %s", v.name, s, v.positive)
			}
			*v.dst = d
		}
	}
	if s := getenv("BALDE_INBOUND_TOKENS"); s != "" {
		tokens, err := web.ParseInboundTokens(strings.NewReader(s))
		if err != nil {
			return fmt.Errorf("BALDE_INBOUND_TOKENS: %w", err)
		}
		c.InboundTokens = tokens
	}
	for _, v := range []struct {
		name string
		dst  *[]string
	}{{"BALDE_INBOUND_PATHS", &c.InboundPaths}, {"BALDE_INBOUND_EXEMPT", &c.InboundExempt}} {
		if s := getenv(v.name); s != "" {
			var prefixes []string
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					if !strings.HasPrefix(p, "/") {
						return fmt.Errorf("%s: %q is not a path prefix (want /...)", v.name, p)
					}
					prefixes = append(prefixes, p)
				}
			}
			*v.dst = prefixes
		}
	}
	switch s := getenv("BALDE_INBOUND_FAIL"); s {
	case "":
	case "open":
		c.InboundFailMode = throttle.FailOpen
	case "closed":
		c.InboundFailMode = throttle.FailClosed
	default:
		return fmt.Errorf("BALDE_INBOUND_FAIL: %q (want open or closed)", s)
	}
	return c.parseBackgroundEnv(getenv)
}

// parseBackgroundEnv reads the periods of serve's background work.
func (c *Config) parseBackgroundEnv(getenv func(string) string) error {
	if s := getenv("BALDE_DICT_RECONCILE_EVERY"); s != "" {
		if err := (reconcileFlag{&c.DictReconcileEvery}).Set(s); err != nil {
			return fmt.Errorf("BALDE_DICT_RECONCILE_EVERY: %w", err)
		}
	}
	if s := getenv("BALDE_PRUNE_EVERY"); s != "" {
		if err := (everyFlag{&c.PruneEvery}).Set(s); err != nil {
			return fmt.Errorf("BALDE_PRUNE_EVERY: %w", err)
		}
	}
	return nil
}

// everyFlag is a flag.Value of a period: a positive duration, or "off"
// (or 0) for never.
type everyFlag struct{ d *time.Duration }

func (f everyFlag) String() string {
	if f.d == nil {
		return ""
	}
	if *f.d == 0 {
		return "off"
	}
	return f.d.String()
}

func (f everyFlag) Set(s string) error {
	if s == "off" || s == "0" {
		*f.d = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is not a period (e.g. 10m) or off", s)
	}
	*f.d = d
	return nil
}

// reconcileFlag is DictReconcileEvery's flag.Value: "auto", "off" (or
// 0), or a period of at least 10 s.
type reconcileFlag struct{ d *time.Duration }

func (f reconcileFlag) String() string {
	if f.d != nil && *f.d == ReconcileAuto {
		return "auto"
	}
	return everyFlag(f).String()
}

func (f reconcileFlag) Set(s string) error {
	if s == "auto" {
		*f.d = ReconcileAuto
		return nil
	}
	var d time.Duration
	if err := (everyFlag{&d}).Set(s); err != nil {
		return err
	}
	if d != 0 && d < minReconcileEvery {
		return fmt.Errorf("%s is more often than POLICIES_LIST allows (6 a minute): use %s or more", d, minReconcileEvery)
	}
	*f.d = d
	return nil
}

// durationFlag is a flag.Value of a Go duration that may not be negative.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration (e.g. 1m)", s)
	}
	*f.d = d
	return nil
}

// proxiesFlag is a flag.Value of trusted proxy prefixes.
type proxiesFlag struct{ p *[]netip.Prefix }

func (f proxiesFlag) String() string {
	if f.p == nil {
		return ""
	}
	var parts []string
	for _, p := range *f.p {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (f proxiesFlag) Set(s string) error {
	p, err := web.ParseTrustedProxies(s)
	if err != nil {
		return err
	}
	*f.p = p
	return nil
}

// addBackgroundFlags registers the periods of serve's background work.
func (c *Config) addBackgroundFlags(fs *flag.FlagSet) {
	fs.Var(reconcileFlag{&c.DictReconcileEvery}, "dict-reconcile-every", `period of the background DICT reconciliation, "auto" (every minute against a real DICT, off against the simulator) or "off" (env BALDE_DICT_RECONCILE_EVERY)`)
	fs.Var(everyFlag{&c.PruneEvery}, "prune-every", `period of the background prune of old ledger rows, DICT lookups and idle buckets, or "off" (env BALDE_PRUNE_EVERY)`)
}

// addWebFlags registers the flags of serve's web server.
func (c *Config) addWebFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "address to listen on, HOST:PORT (env BALDE_ADDR)")
	fs.StringVar(&c.AdminUser, "admin-user", c.AdminUser, "admin user name; the password comes from BALDE_ADMIN_PASSWORD or BALDE_ADMIN_PASSWORD_BCRYPT (env BALDE_ADMIN_USER)")
	fs.Var(proxiesFlag{&c.TrustedProxies}, "trusted-proxies", "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)")
	fs.Int64Var(&c.InboundIPLimit, "inbound-ip-limit", c.InboundIPLimit, "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)")
	fs.Var(durationFlag{&c.InboundWindow}, "inbound-window", "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)")
	fs.Var(durationFlag{&c.InboundBlock}, "inbound-block", "how long a client over its limit is refused (env BALDE_INBOUND_BLOCK)")
}
