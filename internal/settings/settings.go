// Package settings is the balde binary's configuration: every setting
// with its environment variable, its flag and its default (Default, then
// the variables, FromEnv or ParseEnv, then the flags, AddFlags), the
// checks no single parser can make (each failure an *Error naming the
// variables and flags), and their translation into the module's own
// configuration: balde.Config (Settings.Config), the DICT client's and the
// SIFEN sender's, the inbound limiter's and the web server's. The module
// takes none of it: an application configures balde.Config itself
// (docs/decisions/0126).
package settings

import (
	"fmt"
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
	"github.com/balde-throttle/balde/web"
)

// Settings are balde's settings as the balde binary reads them: defaults
// from Default, then the environment variables (ParseEnv, or FromEnv in one
// call), then flags (AddFlags). The guides (docs/guides) list every field with its flag
// and variable.
type Settings struct {
	// DB is the store's DSN (--db, BALDE_DB).
	DB string
	// Addr is where serve listens (--addr, BALDE_ADDR).
	Addr string

	// DictURL is the DICT's base URL, e.g. https://dict.pi.rsfn.net.br:16422
	// (--dict-url, BALDE_DICT_URL). Empty: serve starts the simulator.
	DictURL string
	// DictPoliciesURL is the base URL of the DICT's GET /policies/, which
	// the public spec serves from its own host (dict-ratelimit… for
	// dict…, e.g. https://dict-ratelimit.pi.rsfn.net.br:16422)
	// (--dict-policies-url, BALDE_DICT_POLICIES_URL). Empty: derived from
	// DictURL as the spec names it (DictPolicies), DictURL for a simulator.
	DictPoliciesURL string
	// DictParticipant is this participant's ISPB (--dict-participant,
	// BALDE_DICT_PARTICIPANT). Required against a DICT that is not a
	// simulator; empty against a simulator: SimulatorParticipant.
	DictParticipant string
	// DictCategory is the participant's category A..H until it is learned
	// from the DICT (--dict-category, BALDE_DICT_CATEGORY); empty: the
	// strictest, H.
	DictCategory string
	// DictEnv is the env part of DICT bucket keys (--dict-env, BALDE_DICT_ENV).
	DictEnv string
	// DictCert, DictKey and DictCA are PEM files for mutual TLS with the DICT
	// (BALDE_DICT_CERT, BALDE_DICT_KEY, BALDE_DICT_CA).
	DictCert, DictKey, DictCA string
	// DictSignCert and DictSignKey are the PEM certificate and RSA key the
	// DICT write requests are signed with (XMLDSig, dict.XMLSigner;
	// BALDE_DICT_SIGN_CERT, BALDE_DICT_SIGN_KEY). Empty: no signer (writes
	// go unsigned only to a simulator on loopback), unless
	// DictSignWithTLSKey.
	DictSignCert, DictSignKey string
	// DictSignWithTLSKey signs with the mutual-TLS pair (DictCert, DictKey)
	// when DictSignCert and DictSignKey are unset (--dict-sign-with-tls-key,
	// BALDE_DICT_SIGN_WITH_TLS_KEY=on).
	DictSignWithTLSKey bool
	// DictVerifyCert is a PEM file of the certificates the DICT's signed
	// answers are checked against: its signing certificate, or the CA that
	// issues it (dict.XMLVerifier; BALDE_DICT_VERIFY_CERT). Required
	// against a DICT that is not a simulator, unless DictUnverified.
	DictVerifyCert string
	// DictUnverified acknowledges that the DICT's answers go unverified
	// without DictVerifyCert (--dict-unverified, BALDE_DICT_UNVERIFIED=on):
	// logged at start and exported as balde_dict_answers_unverified 1.
	DictUnverified bool

	// SifenURL is the base URL of SIFEN (--sifen-url, BALDE_SIFEN_URL).
	// Empty: serve starts the simulator.
	SifenURL string
	// SifenThrottle is the minimum interval between two lots of one RUC in
	// one environment (SIFEN_THROTTLE_SECONDS, default 10 s);
	// SifenThrottleProd overrides it for prod (SIFEN_THROTTLE_SECONDS_PROD).
	SifenThrottle, SifenThrottleProd time.Duration
	// SifenBlockStep and SifenBlockMax shape the local block after SIFEN's
	// 0301 (lot not queued): the first blocks the RUC for SifenBlockStep,
	// each one within a day of the previous one step longer, up to
	// SifenBlockMax (BALDE_SIFEN_BLOCK_STEP, default 10m, at least 10m,
	// SIFEN's own shortest block; BALDE_SIFEN_BLOCK_MAX, default 60m, at
	// least the step, at most 24h). See sifen.DefaultRemoteBlock.
	SifenBlockStep, SifenBlockMax time.Duration
	// SifenPollEvery is how often serve looks for lots whose result is due
	// (BALDE_SIFEN_POLL_EVERY, default 30 s; 0 turns it off). Each lot is
	// queried only when due (10 min after the send, as the lot's schedule says).
	SifenPollEvery time.Duration
	// SifenCert, SifenKey and SifenCA are PEM files for mutual TLS with SIFEN
	// (BALDE_SIFEN_CERT, BALDE_SIFEN_KEY, BALDE_SIFEN_CA).
	SifenCert, SifenKey, SifenCA string

	// SifenPerMinute, when positive, also caps the lots of one RUC and env
	// per minute (BALDE_SIFEN_PER_MINUTE).
	SifenPerMinute int64

	// PolicyFile overrides and extends the policy catalog (--policies,
	// BALDE_POLICY_FILE).
	PolicyFile string

	// DisableGroupCommit decides each decision in a transaction of its own
	// (BALDE_GROUP_COMMIT=off; on, balde.Config's default, shares them).
	DisableGroupCommit bool

	// Ledger is how routine takes are written: every, minute or none
	// (BALDE_LEDGER). LedgerRetention is how long rows are kept
	// (BALDE_LEDGER_RETENTION, default 720h); serve refuses one under
	// MinRetention unless LedgerRetentionForce (BALDE_LEDGER_RETENTION_FORCE).
	Ledger               throttle.LedgerGranularity
	LedgerRetention      time.Duration
	LedgerRetentionForce bool
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
	// AdminPasswordFile holds the password on its first line
	// (BALDE_ADMIN_PASSWORD_FILE). With no password configured at all,
	// serve keeps the one it generates in DataDir/admin-password, so it
	// stays the same across restarts.
	AdminPasswordFile string
	// Users are more users of the admin pages beside the admin, each a
	// viewer (reads every page) or an admin (also resets and sends)
	// (BALDE_USERS: NAME:ROLE:SECRET entries, comma- or newline-separated,
	// SECRET a bcrypt hash or a password; see web.ParseUsers). UsersFile
	// holds more, one per line (--users-file, BALDE_USERS_FILE); AllUsers
	// reads it.
	Users     []web.Credentials
	UsersFile string
	// DataDir is where serve keeps what it generates (the admin password)
	// (BALDE_DATA_DIR); empty: the SQLite database's directory, or the
	// user's config directory (…/balde) for PostgreSQL.
	DataDir string
	// TimeZone is where the admin pages show times next to UTC
	// (BALDE_TIME_ZONE, an IANA name such as America/Asuncion); nil: the
	// server's local zone.
	TimeZone *time.Location
	// DictSimAddr and SifenSimAddr are where serve's built-in simulators
	// listen (--dict-sim-addr, --sifen-sim-addr, BALDE_DICT_SIM_ADDR,
	// BALDE_SIFEN_SIM_ADDR; default 127.0.0.1:0, a new port each start;
	// make run fixes them). Loopback only.
	DictSimAddr, SifenSimAddr string
	// MetricsToken, when set, protects /metrics with a bearer token
	// (BALDE_METRICS_TOKEN; no flag, like the passwords).
	MetricsToken string
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
	// InboundPaths are the limited path prefixes (BALDE_INBOUND_PATHS; nil:
	// web.InboundConfig's default, "/"); InboundExempt are never limited
	// (BALDE_INBOUND_EXEMPT; nil: web.DefaultInboundExempt): exact paths, or
	// a subtree when the entry ends in "/".
	InboundPaths, InboundExempt []string
	// InboundFailClosed refuses requests when the database is down
	// (BALDE_INBOUND_FAIL=closed; open, web.InboundConfig's default, admits
	// them).
	InboundFailClosed bool

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
	// SeverityEvery is how often serve grades again the buckets that are
	// not Healthy, delivering the recoveries refill brought
	// (BALDE_SEVERITY_EVERY, default 15s; "off" or 0 turns it off).
	SeverityEvery time.Duration

	// Gateway are balde gateway's clients and listener.
	Gateway
}

// ReconcileAuto, as Settings.DictReconcileEvery, is automatic: every
// minute against a real DICT, off against the simulator
// (balde.Jobs.DictReconcileEvery 0).
const ReconcileAuto time.Duration = -1

// MinReconcileEvery keeps reconciliation within POLICIES_LIST's 6 a minute.
const MinReconcileEvery = 10 * time.Second

// defaultDSN is the database of a command given none: a SQLite file in
// the working directory.
const defaultDSN = "sqlite://balde.db"

// Default returns the settings of "make run": SQLite in the working
// directory, simulators in-process.
func Default() Settings {
	jobs := balde.DefaultJobs()
	return Settings{
		DB:              defaultDSN,
		Addr:            "127.0.0.1:8080",
		DictCategory:    "",
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

// FromEnv is Default read over by the environment variables through
// getenv (os.Getenv, or a map's lookup in a test): see ParseEnv.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Default()
	if err := s.ParseEnv(getenv); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// ParseEnv reads the environment variables through getenv. An unset or
// empty variable keeps the current value; a malformed one is an error naming
// the variable ("SIFEN_THROTTLE_SECONDS: ...").
func (c *Settings) ParseEnv(getenv func(string) string) error {
	for _, v := range c.envVars() {
		if s := getenv(v.name); s != "" {
			if err := v.set(s); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
	}
	return nil
}

// EnvVariables lists the names of every variable ParseEnv reads.
func EnvVariables() []string {
	var c Settings
	var names []string
	for _, v := range c.envVars() {
		names = append(names, v.name)
	}
	return names
}

// Config is the engine's Config of these settings, for Open: the database,
// group commit, ledger, severity thresholds and webhook, DICT catalog,
// SIFEN lot policies and the periods of Run's jobs (Settings.Jobs). The
// caller adds what is not a setting (Migrate, Clock, Dict, Sifen, Logger...).
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

// Jobs are the periods of Run's background work: a setting's 0 ("off") is
// Off, ReconcileAuto is Jobs' automatic 0, and SIFEN documents left in
// "sending" are settled at each prune.
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

// envVar is one environment variable and how it sets its Config field.
type envVar struct {
	name string
	// set parses a non-empty value into the field; its error describes the
	// value (ParseEnv adds the variable's name).
	set func(string) error
}

// envVars lists every variable ParseEnv reads.
func (c *Settings) envVars() []envVar {
	return append([]envVar{
		{"BALDE_DB", setString(&c.DB)},
		{"BALDE_ADDR", setString(&c.Addr)},
		{"BALDE_DICT_URL", setString(&c.DictURL)},
		{"BALDE_DICT_POLICIES_URL", setString(&c.DictPoliciesURL)},
		{"BALDE_DICT_PARTICIPANT", setString(&c.DictParticipant)},
		{"BALDE_DICT_CATEGORY", setString(&c.DictCategory)},
		{"BALDE_DICT_ENV", setString(&c.DictEnv)},
		{"BALDE_DICT_CERT", setString(&c.DictCert)},
		{"BALDE_DICT_KEY", setString(&c.DictKey)},
		{"BALDE_DICT_CA", setString(&c.DictCA)},
		{"BALDE_DICT_SIGN_CERT", setString(&c.DictSignCert)},
		{"BALDE_DICT_SIGN_KEY", setString(&c.DictSignKey)},
		{"BALDE_DICT_VERIFY_CERT", setString(&c.DictVerifyCert)},
		{"BALDE_DICT_UNVERIFIED", setParsed(&c.DictUnverified, onOff)},
		{"BALDE_DICT_SIGN_WITH_TLS_KEY", setParsed(&c.DictSignWithTLSKey, onOff)},
		{"BALDE_SIFEN_URL", setString(&c.SifenURL)},
		{"BALDE_SIFEN_CERT", setString(&c.SifenCert)},
		{"BALDE_SIFEN_KEY", setString(&c.SifenKey)},
		{"BALDE_SIFEN_CA", setString(&c.SifenCA)},
		{"BALDE_POLICY_FILE", setString(&c.PolicyFile)},
		{"BALDE_ALERT_WEBHOOK", setString(&c.AlertWebhook)},
		{"SIFEN_THROTTLE_SECONDS", setParsed(&c.SifenThrottle, ParseInterval)},
		{"SIFEN_THROTTLE_SECONDS_PROD", setParsed(&c.SifenThrottleProd, ParseInterval)},
		{"BALDE_SIFEN_POLL_EVERY", setParsed(&c.SifenPollEvery, ParsePeriod)},
		{"BALDE_SIFEN_BLOCK_STEP", setParsed(&c.SifenBlockStep, ParseSifenBlockStep)},
		{"BALDE_SIFEN_BLOCK_MAX", setParsed(&c.SifenBlockMax, ParseSifenBlockMax)},
		{"BALDE_SIFEN_PER_MINUTE", setParsed(&c.SifenPerMinute, intIn(0, math.MaxInt64, "a whole number of lots per minute"))},
		{"BALDE_GROUP_COMMIT", setParsed(&c.DisableGroupCommit, oneOf(map[string]bool{
			"on": false, "true": false, "1": false, "off": true, "false": true, "0": true}, "on or off"))},
		{"BALDE_LEDGER", setParsed(&c.Ledger, throttle.ParseLedgerGranularity)},
		{"BALDE_LEDGER_RETENTION", setParsed(&c.LedgerRetention, durationMin(1, "a positive duration (e.g. 720h)"))},
		{"BALDE_LEDGER_RETENTION_FORCE", setParsed(&c.LedgerRetentionForce, onOff)},
		{"BALDE_SEVERITY_THRESHOLDS", setParsed(&c.Thresholds, parseThresholds)},

		// serve's web server: admin credential, trusted proxies, inbound
		// limiter.
		{"BALDE_ADMIN_USER", setString(&c.AdminUser)},
		{"BALDE_ADMIN_PASSWORD", setString(&c.AdminPassword)},
		{"BALDE_ADMIN_PASSWORD_BCRYPT", setString(&c.AdminPasswordBcrypt)},
		{"BALDE_ADMIN_PASSWORD_FILE", setString(&c.AdminPasswordFile)},
		{"BALDE_USERS", setParsed(&c.Users, func(s string) ([]web.Credentials, error) {
			return web.ParseUsers(strings.NewReader(s))
		})},
		{"BALDE_USERS_FILE", setString(&c.UsersFile)},
		{"BALDE_DATA_DIR", setString(&c.DataDir)},
		{"BALDE_TIME_ZONE", setParsed(&c.TimeZone, time.LoadLocation)},
		{"BALDE_DICT_SIM_ADDR", setString(&c.DictSimAddr)},
		{"BALDE_SIFEN_SIM_ADDR", setString(&c.SifenSimAddr)},
		{"BALDE_METRICS_TOKEN", setString(&c.MetricsToken)},
		{"BALDE_INBOUND_TOKENS_FILE", setString(&c.InboundTokensFile)},
		{"BALDE_TRUSTED_PROXIES", setParsed(&c.TrustedProxies, ParseTrustedProxies)},
		{"BALDE_INBOUND_IP_LIMIT", setParsed(&c.InboundIPLimit, ParseInboundIPLimit)},
		{"BALDE_INBOUND_WINDOW", setParsed(&c.InboundWindow, ParseInboundWindow)},
		{"BALDE_INBOUND_BLOCK", setParsed(&c.InboundBlock, ParseInboundBlock)},
		{"BALDE_INBOUND_TOKENS", setParsed(&c.InboundTokens, func(s string) ([]web.InboundToken, error) {
			return web.ParseInboundTokens(strings.NewReader(s))
		})},
		{"BALDE_INBOUND_PATHS", setParsed(&c.InboundPaths, parsePathPrefixes)},
		{"BALDE_INBOUND_EXEMPT", setParsed(&c.InboundExempt, parsePathPrefixes)},
		{"BALDE_INBOUND_FAIL", setParsed(&c.InboundFailClosed, oneOf(map[string]bool{
			"open": false, "closed": true}, "open or closed"))},

		// serve's background work.
		{"BALDE_DICT_RECONCILE_EVERY", setParsed(&c.DictReconcileEvery, ParseReconcileEvery)},
		{"BALDE_PRUNE_EVERY", setParsed(&c.PruneEvery, ParsePeriod)},
		{"BALDE_SEVERITY_EVERY", setParsed(&c.SeverityEvery, ParsePeriod)},
	}, c.gatewayEnvVars()...)
}

// setString returns the setter of a string field.
func setString(dst *string) func(string) error {
	return func(s string) error {
		*dst = s
		return nil
	}
}

// ParseInboundIPLimit reads BALDE_INBOUND_IP_LIMIT: a number of requests
// per window in 0..throttle.MaxRollingCapacity (0 turns the limiter off).
func ParseInboundIPLimit(s string) (int64, error) {
	return intIn(0, throttle.MaxRollingCapacity,
		fmt.Sprintf("a number of requests in 0..%d", throttle.MaxRollingCapacity))(s)
}

// ParseInboundWindow reads BALDE_INBOUND_WINDOW: a positive Go duration.
func ParseInboundWindow(s string) (time.Duration, error) {
	return durationMin(1, "a positive duration (e.g. 1m)")(s)
}

// ParseInboundBlock reads BALDE_INBOUND_BLOCK: a Go duration, 0 or more.
func ParseInboundBlock(s string) (time.Duration, error) {
	return durationMin(0, "a duration (e.g. 5m, or 0 for no block)")(s)
}

// ParseSifenBlockStep reads BALDE_SIFEN_BLOCK_STEP: the local block after
// SIFEN's first 0301, from 10m to 24h. A step shorter than SIFEN's own
// shortest block (10 min) would send into a block SIFEN still holds, and
// earn a longer one.
func ParseSifenBlockStep(s string) (time.Duration, error) {
	return durationIn(sifen.DefaultRemoteBlock, 24*time.Hour, "a duration from 10m to 24h (SIFEN blocks a RUC at least 10 minutes)")(s)
}

// ParseSifenBlockMax reads BALDE_SIFEN_BLOCK_MAX: the longest local block
// after repeated 0301s, from 10m to 24h.
func ParseSifenBlockMax(s string) (time.Duration, error) {
	return durationIn(sifen.DefaultRemoteBlock, 24*time.Hour, "a duration from 10m to 24h")(s)
}

// setParsed returns the setter of a field read by parse; on an error the
// field keeps its value.
func setParsed[T any](dst *T, parse func(string) (T, error)) func(string) error {
	return func(s string) error {
		v, err := parse(s)
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}
}

// durationMin parses a Go duration of at least lowest; want says what is
// expected, for the error.
func durationMin(lowest time.Duration, want string) func(string) (time.Duration, error) {
	return func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d < lowest {
			return 0, fmt.Errorf("%q is not %s", s, want)
		}
		return d, nil
	}
}

// durationIn parses a Go duration in lowest..highest; want says what is
// expected, for the error.
func durationIn(lowest, highest time.Duration, want string) func(string) (time.Duration, error) {
	return func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d < lowest || d > highest {
			return 0, fmt.Errorf("%q is not %s", s, want)
		}
		return d, nil
	}
}

// intIn parses a whole number in lowest..highest; want says what is
// expected, for the error.
func intIn(lowest, highest int64, want string) func(string) (int64, error) {
	return func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lowest || n > highest {
			return 0, fmt.Errorf("%q is not %s", s, want)
		}
		return n, nil
	}
}

// oneOf parses one of the words of values; want lists them, for the error.
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

// ParseSeconds reads a whole or decimal number of seconds ("10", "2.5").
func ParseSeconds(s string) (time.Duration, error) {
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
	t := throttle.Thresholds{Medium: n[0], High: n[1], Critical: n[2], Recover: throttle.DefaultThresholds.Recover}
	return t, t.Validate()
}

// ParseInterval reads SIFEN_THROTTLE_SECONDS: a SIFEN interval in seconds,
// more than 0 (0 used to pass and silently mean the default; SIFEN blocks a
// RUC that sends too often, so there is no way to turn the interval off).
func ParseInterval(s string) (time.Duration, error) {
	d, err := ParseSeconds(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: the interval between two lots of a RUC must be more than 0 seconds (SIFEN blocks a RUC that sends too often)", s)
	}
	return d, nil
}

// ParsePeriod reads the period of background work (BALDE_PRUNE_EVERY...):
// a positive Go duration, or "off" (or "0") for never, which is 0.
func ParsePeriod(s string) (time.Duration, error) {
	if s == "off" || s == "0" {
		return 0, nil
	}
	return durationMin(1, "a period (e.g. 10m) or off")(s)
}

// ParseReconcileEvery reads BALDE_DICT_RECONCILE_EVERY: "auto"
// (ReconcileAuto), "off" (or "0", which is 0), or a period of at least
// MinReconcileEvery.
func ParseReconcileEvery(s string) (time.Duration, error) {
	if s == "auto" {
		return ReconcileAuto, nil
	}
	d, err := ParsePeriod(s)
	if err != nil {
		return 0, err
	}
	if d != 0 && d < MinReconcileEvery {
		return 0, fmt.Errorf("%s is more often than POLICIES_LIST allows (6 a minute): use %s or more", d, MinReconcileEvery)
	}
	return d, nil
}

// AllUsers is Users and the users of UsersFile (web.ParseUsers), for
// web.Server.Users. A name listed twice, in either or across both or as
// the admin's, is a *SettingError, and so is a file that cannot be read.
func (c Settings) AllUsers() ([]web.Credentials, error) {
	users := slices.Clip(c.Users)
	if c.UsersFile != "" {
		f, err := os.Open(c.UsersFile)
		if err != nil {
			return nil, errorf("BALDE_USERS_FILE: %v", err)
		}
		more, err := web.ParseUsers(f)
		f.Close()
		if err != nil {
			return nil, errorf("BALDE_USERS_FILE %s: %v", c.UsersFile, err)
		}
		users = append(users, more...)
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
