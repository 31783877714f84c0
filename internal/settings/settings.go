// Package settings is the balde binary's configuration: every setting with
// its variable, flag and default, the checks across settings (*Error), and
// their translation into balde.Config and the DICT, SIFEN, inbound and web
// configurations. The module takes none of it (docs/decisions/0126).
package settings

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/devsims"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// Settings are balde's settings as the binary reads them: Default, then
// the variables (ParseEnv), then the flags (AddFlags). Each field's
// variable and flag are in the table of settings(); the guides
// (docs/guides) list them all.
type Settings struct {
	DB   string
	Addr string // where serve listens

	DictURL         string // the DICT's base URL; empty: serve starts the simulator
	DictPoliciesURL string // the base URL of GET /policies/, on its own host; empty: DictPolicies
	DictParticipant string // this participant's ISPB, required unless against a simulator
	// DictCategory is the category A..H until learned from the DICT;
	// empty: the strictest, H.
	DictCategory string
	DictEnv      string // env part of DICT bucket keys
	// DictCert, DictKey and DictCA are PEM files for mutual TLS with the DICT.
	DictCert, DictKey, DictCA string
	// DictSignCert and DictSignKey sign DICT writes (dict.XMLSigner); with
	// neither, only DictSignWithTLSKey signs, with DictCert and DictKey.
	DictSignCert, DictSignKey string
	DictSignWithTLSKey        bool
	// DictVerifyCert is the PEM file the DICT's signed answers are checked
	// against, required against a real DICT unless DictUnverified.
	DictVerifyCert string
	DictUnverified bool

	SifenURL string // SIFEN's base URL; empty: serve starts the simulator
	// SifenThrottle is the least interval between two lots of one RUC and
	// env (default 10 s); SifenThrottleProd overrides it for prod.
	SifenThrottle, SifenThrottleProd time.Duration
	// SifenBlockStep and SifenBlockMax shape the local block after a 0301
	// (sifen.DefaultRemoteBlock).
	SifenBlockStep, SifenBlockMax time.Duration
	// SifenPollEvery is how often serve looks for lots whose result is due
	// (default 30 s; 0: off).
	SifenPollEvery time.Duration
	// SifenCert, SifenKey and SifenCA are PEM files for mutual TLS with SIFEN.
	SifenCert, SifenKey, SifenCA string
	SifenPerMinute               int64 // when positive, lots per minute of a RUC and env

	PolicyFile         string // catalog overrides
	DisableGroupCommit bool

	// Ledger is how routine takes are written; rows are kept
	// LedgerRetention, at least MinRetention unless LedgerRetentionForce.
	Ledger               throttle.LedgerGranularity
	LedgerRetention      time.Duration
	LedgerRetentionForce bool
	Thresholds           throttle.Thresholds
	AlertWebhook         string // receives severity changes

	// AdminUser is the admin, with AdminPassword, AdminPasswordBcrypt
	// (wins) or the first line of AdminPasswordFile; see FindAdminLogin.
	// Secrets have no flag: a command line is visible to every user.
	AdminUser, AdminPassword, AdminPasswordBcrypt string
	AdminPasswordFile                             string
	// Users are more users of the admin pages (web.ParseUsers), and
	// UsersFile holds more; see AllUsers.
	Users     []web.Credentials
	UsersFile string
	DataDir   string         // where serve keeps what it generates; see ResolveDataDir
	TimeZone  *time.Location // where the admin pages show times; nil: the server's
	// DictSimAddr and SifenSimAddr are where serve's simulators listen,
	// loopback only.
	DictSimAddr, SifenSimAddr string
	MetricsToken              string         // bearer token of /metrics
	TrustedProxies            []netip.Prefix // the peers whose X-Forwarded-For is believed
	// InboundIPLimit is the requests per InboundWindow of a client IP (0:
	// no inbound limiter), refused InboundBlock beyond it.
	InboundIPLimit int64
	InboundWindow  time.Duration
	InboundBlock   time.Duration
	// InboundTokens are API tokens with limits of their own
	// (web.ParseInboundTokens), and InboundTokensFile holds more.
	InboundTokens     []web.InboundToken
	InboundTokensFile string
	// InboundPaths are the limited path prefixes and InboundExempt those
	// never limited; nil: web's.
	InboundPaths, InboundExempt []string
	InboundFailClosed           bool

	// DictReconcileEvery, PruneEvery and SeverityEvery are the periods of
	// serve's background jobs; 0 is off.
	DictReconcileEvery time.Duration
	PruneEvery         time.Duration
	SeverityEvery      time.Duration

	Gateway // balde gateway's clients and listener
}

// ReconcileAuto, as Settings.DictReconcileEvery, is every minute against
// a real DICT and off against the simulator (balde.Jobs' 0).
const ReconcileAuto time.Duration = -1

// MinReconcileEvery keeps reconciliation within POLICIES_LIST's 6 a minute.
const MinReconcileEvery = 10 * time.Second

// defaultDSN is the database of a command given none.
const defaultDSN = "sqlite://balde.db"

// Default returns the settings of "make run": SQLite in the working
// directory, simulators in-process.
func Default() Settings {
	jobs := balde.DefaultJobs()
	return Settings{
		DB:              defaultDSN,
		Addr:            "127.0.0.1:8080",
		DictEnv:         dict.DefaultEnv,
		SifenThrottle:   sifen.DefaultInterval,
		SifenPollEvery:  jobs.SifenPollEvery,
		SifenBlockStep:  sifen.DefaultRemoteBlock,
		SifenBlockMax:   sifen.DefaultRemoteBlockMax,
		LedgerRetention: throttle.DefaultRetention,
		AdminUser:       "admin",
		DictSimAddr:     devsims.DefaultAddr,
		SifenSimAddr:    devsims.DefaultAddr,
		InboundIPLimit:  web.DefaultInboundIPLimit,
		InboundWindow:   web.DefaultInboundWindow,
		InboundBlock:    web.DefaultInboundBlock,

		DictReconcileEvery: ReconcileAuto,
		PruneEvery:         jobs.PruneEvery,
		SeverityEvery:      jobs.SeverityEvery,
	}
}

// ParseEnv reads the variables through getenv: an empty one keeps the
// current value, a malformed one is an error naming it.
func (c *Settings) ParseEnv(getenv func(string) string) error {
	for _, v := range c.settings() {
		if s := getenv(v.env); s != "" {
			if err := v.set(s); err != nil {
				return fmt.Errorf("%s: %w", v.env, err)
			}
		}
	}
	return nil
}

// EnvVariables lists the names of every variable ParseEnv reads.
func EnvVariables() []string {
	var names []string
	for _, v := range new(Settings).settings() {
		names = append(names, v.env)
	}
	return names
}

// Config is the engine's Config of these settings; the caller adds what is
// not a setting (Migrate, Clock, Dict, Sifen, Logger...).
func (c Settings) Config() balde.Config {
	sc := sifen.PolicyConfig{Interval: c.SifenThrottle, PerMinute: c.SifenPerMinute}
	if c.SifenThrottleProd > 0 {
		sc.EnvInterval = map[sifen.Env]time.Duration{sifen.EnvProd: c.SifenThrottleProd}
	}
	return balde.Config{
		DB:                 c.DB,
		DisableGroupCommit: c.DisableGroupCommit,
		Ledger:             c.Ledger,
		Thresholds:         c.Thresholds,
		AlertWebhook:       c.AlertWebhook,
		DictEnv:            c.DictEnv,
		DictCategory:       c.DictCategory,
		PolicyFile:         c.PolicyFile,
		SifenPolicy:        sc,
		Jobs:               c.Jobs(),
	}
}

// Jobs are the periods of Run's background work: a setting's 0 is Off,
// ReconcileAuto is Jobs' 0, and documents left sending settle at each prune.
func (c Settings) Jobs() balde.Jobs {
	off := func(every time.Duration) time.Duration {
		if every <= 0 {
			return balde.Off
		}
		return every
	}
	reconcile := off(c.DictReconcileEvery)
	if c.DictReconcileEvery == ReconcileAuto {
		reconcile = 0
	}
	return balde.Jobs{
		SifenPollEvery:     off(c.SifenPollEvery),
		SifenResolveEvery:  off(c.PruneEvery),
		SeverityEvery:      off(c.SeverityEvery),
		DictReconcileEvery: reconcile,
		PruneEvery:         off(c.PruneEvery),
		Retention:          c.LedgerRetention,
	}
}

// onOff parses a switch: on, true, 1 or off, false, 0.
var onOff = oneOf(map[string]bool{"on": true, "true": true, "1": true, "off": false, "false": false, "0": false}, "on or off")

// setting is one variable and, when it has one, its flag: set reads the
// variable into the field (its error describes the value), add registers
// the flag, the field's current value its default.
type setting struct {
	env, flag, help string
	field
}

type field struct {
	set func(string) error
	add func(fs *flag.FlagSet, name, help string)
}

// str, boolean and parsed are the fields of a string, a switch (its flag
// Go's bool) and a value read with parse, shown in --help with format
// (nil: fmt.Sprint).
func str(p *string) field {
	set := func(s string) error {
		*p = s
		return nil
	}
	return field{set, func(fs *flag.FlagSet, name, help string) { fs.StringVar(p, name, *p, help) }}
}

func boolean(p *bool) field {
	return field{FlagOf(p, onOff, nil).Set, func(fs *flag.FlagSet, name, help string) { fs.BoolVar(p, name, *p, help) }}
}

func parsed[T any](p *T, parse func(string) (T, error), format func(T) string) field {
	v := FlagOf(p, parse, format)
	return field{v.Set, func(fs *flag.FlagSet, name, help string) { fs.Var(v, name, help) }}
}

// settings lists every variable ParseEnv reads, with the flags AddFlags
// registers (docs/decisions/0249-one-table-of-settings.md).
func (c *Settings) settings() []setting {
	inboundLimit := intIn(0, throttle.MaxRollingCapacity, fmt.Sprintf("a number of requests in 0..%d", throttle.MaxRollingCapacity))
	blockRange := func(want string) func(string) (time.Duration, error) {
		return durationIn(sifen.DefaultRemoteBlock, 24*time.Hour, want)
	}
	return []setting{
		{"BALDE_DB", "db", "database DSN: sqlite://FILE, a file path, or postgres://... (env BALDE_DB); " +
			"a SQLite file is integrity-checked at open and, by serve's /readyz, every " + formatPeriod(sqlstore.DefaultIntegrityEvery), str(&c.DB)},
		{"BALDE_ADDR", "addr", "address to listen on, HOST:PORT (env BALDE_ADDR)", str(&c.Addr)},
		{"BALDE_DICT_URL", "dict-url", "DICT base URL (env BALDE_DICT_URL)", str(&c.DictURL)},
		{"BALDE_DICT_POLICIES_URL", "dict-policies-url", "base URL of the DICT's GET /policies/, on its own host (default: derived from --dict-url as the DICT's spec names it, dict… → dict-ratelimit…; required for another host) (env BALDE_DICT_POLICIES_URL)", str(&c.DictPoliciesURL)},
		{"BALDE_DICT_PARTICIPANT", "dict-participant", "this participant's ISPB, 8 digits; required against a DICT that is not a simulator (env BALDE_DICT_PARTICIPANT)", str(&c.DictParticipant)},
		{"BALDE_DICT_CATEGORY", "dict-category", "participant category A..H until learned from the DICT's GET /policies/ (default: the strictest, H) (env BALDE_DICT_CATEGORY)", str(&c.DictCategory)},
		{"BALDE_DICT_ENV", "dict-env", "env part of DICT bucket keys (env BALDE_DICT_ENV)", str(&c.DictEnv)},
		{"BALDE_DICT_CERT", "", "", str(&c.DictCert)},
		{"BALDE_DICT_KEY", "", "", str(&c.DictKey)},
		{"BALDE_DICT_CA", "", "", str(&c.DictCA)},
		{"BALDE_DICT_SIGN_CERT", "", "", str(&c.DictSignCert)},
		{"BALDE_DICT_SIGN_KEY", "", "", str(&c.DictSignKey)},
		{"BALDE_DICT_VERIFY_CERT", "", "", str(&c.DictVerifyCert)},
		{"BALDE_DICT_UNVERIFIED", "dict-unverified", "run against a DICT without BALDE_DICT_VERIFY_CERT: its answers are not verified (logged, balde_dict_answers_unverified 1) (env BALDE_DICT_UNVERIFIED=on)", boolean(&c.DictUnverified)},
		{"BALDE_DICT_SIGN_WITH_TLS_KEY", "dict-sign-with-tls-key", "sign DICT writes with the mutual-TLS pair BALDE_DICT_CERT/BALDE_DICT_KEY when BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY are unset (env BALDE_DICT_SIGN_WITH_TLS_KEY=on)", boolean(&c.DictSignWithTLSKey)},
		{"BALDE_SIFEN_URL", "sifen-url", `SIFEN base URL, "{env}" standing for test or prod, or "official" for SIFEN's endpoints (env BALDE_SIFEN_URL)`, str(&c.SifenURL)},
		{"BALDE_SIFEN_CERT", "", "", str(&c.SifenCert)},
		{"BALDE_SIFEN_KEY", "", "", str(&c.SifenKey)},
		{"BALDE_SIFEN_CA", "", "", str(&c.SifenCA)},
		{"BALDE_POLICY_FILE", "policies", "JSON file overriding or adding policies (env BALDE_POLICY_FILE)", str(&c.PolicyFile)},
		{"BALDE_ALERT_WEBHOOK", "", "", str(&c.AlertWebhook)},
		{"SIFEN_THROTTLE_SECONDS", "sifen-throttle", "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)", parsed(&c.SifenThrottle, parseInterval, formatSeconds)},
		{"SIFEN_THROTTLE_SECONDS_PROD", "sifen-throttle-prod", "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)", parsed(&c.SifenThrottleProd, parseInterval, formatSeconds)},
		{"BALDE_SIFEN_POLL_EVERY", "", "", parsed(&c.SifenPollEvery, parsePeriod, nil)},
		// From 10m, SIFEN's own shortest block, which a shorter step would send into.
		{"BALDE_SIFEN_BLOCK_STEP", "sifen-block-step", "local block of a RUC after SIFEN's first 0301, one step longer at each recurrence within a day; at least 10m (env BALDE_SIFEN_BLOCK_STEP)",
			parsed(&c.SifenBlockStep, blockRange("a duration from 10m to 24h (SIFEN blocks a RUC at least 10 minutes)"), nil)},
		{"BALDE_SIFEN_BLOCK_MAX", "sifen-block-max", "longest local block after repeated 0301s, at least --sifen-block-step (env BALDE_SIFEN_BLOCK_MAX)",
			parsed(&c.SifenBlockMax, blockRange("a duration from 10m to 24h"), nil)},
		{"BALDE_SIFEN_PER_MINUTE", "", "", parsed(&c.SifenPerMinute, intIn(0, math.MaxInt64, "a whole number of lots per minute"), nil)},
		{"BALDE_GROUP_COMMIT", "", "", parsed(&c.DisableGroupCommit, func(s string) (bool, error) { on, err := onOff(s); return !on, err }, nil)},
		{"BALDE_LEDGER", "", "", parsed(&c.Ledger, throttle.ParseLedgerGranularity, nil)},
		{"BALDE_LEDGER_RETENTION", "", "", parsed(&c.LedgerRetention, durationIn(1, math.MaxInt64, "a positive duration (e.g. 720h)"), nil)},
		{"BALDE_LEDGER_RETENTION_FORCE", "", "", boolean(&c.LedgerRetentionForce)},
		{"BALDE_SEVERITY_THRESHOLDS", "", "", parsed(&c.Thresholds, parseThresholds, nil)},

		// serve's web server.
		{"BALDE_ADMIN_USER", "admin-user", "admin user name; the password comes from BALDE_ADMIN_PASSWORD, BALDE_ADMIN_PASSWORD_BCRYPT or BALDE_ADMIN_PASSWORD_FILE, else DATA_DIR/admin-password, generated once (env BALDE_ADMIN_USER)", str(&c.AdminUser)},
		{"BALDE_ADMIN_PASSWORD", "", "", str(&c.AdminPassword)},
		{"BALDE_ADMIN_PASSWORD_BCRYPT", "", "", str(&c.AdminPasswordBcrypt)},
		{"BALDE_ADMIN_PASSWORD_FILE", "", "", str(&c.AdminPasswordFile)},
		{"BALDE_USERS", "", "", parsed(&c.Users, func(s string) ([]web.Credentials, error) {
			return web.ParseUsers(strings.NewReader(s))
		}, nil)},
		{"BALDE_USERS_FILE", "users-file", "file of more admin-page users, NAME:ROLE:SECRET a line, ROLE viewer or admin, SECRET a bcrypt hash or a password (env BALDE_USERS_FILE; BALDE_USERS lists them inline)", str(&c.UsersFile)},
		{"BALDE_DATA_DIR", "", "", str(&c.DataDir)},
		{"BALDE_TIME_ZONE", "", "", parsed(&c.TimeZone, time.LoadLocation, nil)},
		{"BALDE_DICT_SIM_ADDR", "dict-sim-addr", "where the built-in DICT simulator listens, loopback HOST:PORT (env BALDE_DICT_SIM_ADDR)", str(&c.DictSimAddr)},
		{"BALDE_SIFEN_SIM_ADDR", "sifen-sim-addr", "where the built-in SIFEN simulator listens, loopback HOST:PORT (env BALDE_SIFEN_SIM_ADDR)", str(&c.SifenSimAddr)},
		{"BALDE_METRICS_TOKEN", "", "", str(&c.MetricsToken)},
		{"BALDE_INBOUND_TOKENS_FILE", "", "", str(&c.InboundTokensFile)},
		{"BALDE_TRUSTED_PROXIES", "trusted-proxies", "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)", parsed(&c.TrustedProxies, ParseTrustedProxies, formatProxies)},
		{"BALDE_INBOUND_IP_LIMIT", "inbound-ip-limit", "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)", parsed(&c.InboundIPLimit, inboundLimit, nil)},
		{"BALDE_INBOUND_WINDOW", "inbound-window", "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)", parsed(&c.InboundWindow, durationIn(1, math.MaxInt64, "a positive duration (e.g. 1m)"), nil)},
		{"BALDE_INBOUND_BLOCK", "inbound-block", "how long a client over its limit is refused (env BALDE_INBOUND_BLOCK)", parsed(&c.InboundBlock, durationIn(0, math.MaxInt64, "a duration (e.g. 5m, or 0 for no block)"), nil)},
		{"BALDE_INBOUND_TOKENS", "", "", parsed(&c.InboundTokens, func(s string) ([]web.InboundToken, error) {
			return web.ParseInboundTokens(strings.NewReader(s))
		}, nil)},
		{"BALDE_INBOUND_PATHS", "", "", parsed(&c.InboundPaths, parsePathPrefixes, nil)},
		{"BALDE_INBOUND_EXEMPT", "", "", parsed(&c.InboundExempt, parsePathPrefixes, nil)},
		{"BALDE_INBOUND_FAIL", "", "", parsed(&c.InboundFailClosed, oneOf(map[string]bool{"open": false, "closed": true}, "open or closed"), nil)},

		// serve's background work.
		{"BALDE_DICT_RECONCILE_EVERY", "dict-reconcile-every", `period of the background DICT reconciliation, "auto" (every minute against a real DICT, off against the simulator) or "off" (env BALDE_DICT_RECONCILE_EVERY)`,
			parsed(&c.DictReconcileEvery, parseReconcileEvery, formatReconcile)},
		{"BALDE_PRUNE_EVERY", "prune-every", `period of the background prune of old ledger rows, DICT lookups and idle buckets, or "off" (env BALDE_PRUNE_EVERY)`, parsed(&c.PruneEvery, parsePeriod, formatPeriod)},
		{"BALDE_SEVERITY_EVERY", "", "", parsed(&c.SeverityEvery, parsePeriod, nil)},

		// balde gateway.
		{"BALDE_GATEWAY_CLIENTS_FILE", "clients", "file of the gateway's clients, a line each: NAME sha256:HEX (a bearer token's SHA-256), NAME token:TOKEN or NAME cn:NAME (a client certificate); reloaded on SIGHUP and when it changes (env BALDE_GATEWAY_CLIENTS_FILE)", str(&c.ClientsFile)},
		{"BALDE_GATEWAY_TLS_CERT", "tls-cert", "PEM certificate the gateway serves HTTPS with, with --tls-key (env BALDE_GATEWAY_TLS_CERT)", str(&c.TLSCert)},
		{"BALDE_GATEWAY_TLS_KEY", "tls-key", "PEM key of --tls-cert (env BALDE_GATEWAY_TLS_KEY)", str(&c.TLSKey)},
		{"BALDE_GATEWAY_CLIENT_CA", "client-ca", "PEM bundle of the CAs whose client certificates the gateway accepts, for clients listed as cn:NAME (env BALDE_GATEWAY_CLIENT_CA)", str(&c.ClientCA)},
		{"BALDE_INBOUND_CLIENT_LIMIT", "inbound-client-limit", "requests per window per gateway client, never blocked beyond its window (default 10000) (env BALDE_INBOUND_CLIENT_LIMIT)",
			parsed(&c.InboundClientLimit, func(s string) (int64, error) {
				n, err := inboundLimit(s)
				if err == nil && n == 0 {
					err = fmt.Errorf("%q: a client's limit is at least 1", s)
				}
				return n, err
			}, nil)},
	}
}

// durationIn parses a Go duration in lowest..highest, intIn a whole
// number; want says what is expected.
func durationIn(lowest, highest time.Duration, want string) func(string) (time.Duration, error) {
	return inRange(time.ParseDuration, lowest, highest, want)
}

func intIn(lowest, highest int64, want string) func(string) (int64, error) {
	return inRange(func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, lowest, highest, want)
}

func inRange[T int64 | time.Duration](parse func(string) (T, error), lowest, highest T, want string) func(string) (T, error) {
	return func(s string) (T, error) {
		v, err := parse(s)
		if err != nil || v < lowest || v > highest {
			return 0, fmt.Errorf("%q is not %s", s, want)
		}
		return v, nil
	}
}

// oneOf parses one of the words of values, which want lists.
func oneOf[T any](values map[string]T, want string) func(string) (T, error) {
	return func(s string) (T, error) {
		v, ok := values[s]
		if !ok {
			return v, fmt.Errorf("%q (want %s)", s, want)
		}
		return v, nil
	}
}

// parsePathPrefixes reads a comma-separated list of path prefixes, each
// starting with "/".
func parsePathPrefixes(s string) ([]string, error) {
	var prefixes []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if !strings.HasPrefix(p, "/") {
				return nil, fmt.Errorf("%q is not a path prefix (want /...)", p)
			}
			prefixes = append(prefixes, p)
		}
	}
	return prefixes, nil
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
	t := throttle.Thresholds{Medium: n[0], High: n[1], Critical: n[2], Recover: throttle.DefaultThresholds.Recover}
	return t, t.Validate()
}

// parseInterval reads SIFEN_THROTTLE_SECONDS: seconds, more than 0 and
// at most 86400 (SIFEN blocks a RUC that sends too often: the interval
// cannot be off).
func parseInterval(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 86400 {
		return 0, fmt.Errorf("%q is not a number of seconds between 0 and 86400", s)
	}
	if d := time.Duration(f * float64(time.Second)).Round(time.Millisecond); d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%q: the interval between two lots of a RUC must be more than 0 seconds (SIFEN blocks a RUC that sends too often)", s)
}

// parsePeriod reads the period of background work: a positive Go duration,
// or "off" or "0" for never (0).
func parsePeriod(s string) (time.Duration, error) {
	if s == "off" || s == "0" {
		return 0, nil
	}
	return durationIn(1, math.MaxInt64, "a period (e.g. 10m) or off")(s)
}

// parseReconcileEvery reads BALDE_DICT_RECONCILE_EVERY: "auto"
// (ReconcileAuto), a parsePeriod of at least MinReconcileEvery, or off.
func parseReconcileEvery(s string) (time.Duration, error) {
	if s == "auto" {
		return ReconcileAuto, nil
	}
	d, err := parsePeriod(s)
	if err != nil {
		return 0, err
	}
	if d != 0 && d < MinReconcileEvery {
		return 0, fmt.Errorf("%s is more often than POLICIES_LIST allows (6 a minute): use %s or more", d, MinReconcileEvery)
	}
	return d, nil
}

// AllUsers is Users and those of UsersFile; a file that cannot be read, or
// a name given twice or as the admin's, is a *Error.
func (c Settings) AllUsers() ([]web.Credentials, error) {
	users, err := withFile(c.Users, "BALDE_USERS_FILE", c.UsersFile, web.ParseUsers)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{c.AdminUser: true}
	for _, u := range users {
		if seen[u.User] {
			return nil, errorf("BALDE_USERS: user %q is configured twice (or is the admin, BALDE_ADMIN_USER)", u.User)
		}
		seen[u.User] = true
	}
	return users, nil
}

// withFile is inline and the entries of file read with parse, when file is
// set; a file that cannot be read or parsed is a *Error naming variable.
func withFile[T any](inline []T, variable, file string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	if file == "" {
		return inline, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, errorf(variable+": %v", err)
	}
	defer f.Close()
	more, err := parse(f)
	if err != nil {
		return nil, errorf(variable+" %s: %v", file, err)
	}
	return append(slices.Clip(inline), more...), nil
}
