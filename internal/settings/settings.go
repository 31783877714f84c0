// Package settings is the balde binary's configuration: every setting with
// its variable, flag and default, the checks across settings (*Error), and
// their translation into balde.Config and the DICT, SIFEN, inbound and web
// configurations. The module takes none of it (docs/decisions/0126).
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

// Settings are balde's settings as the binary reads them: Default, then
// the variables (ParseEnv), then the flags (AddFlags). The guides
// (docs/guides) list every field with its flag and variable.
type Settings struct {
	DB   string // --db, BALDE_DB
	Addr string // where serve listens: --addr, BALDE_ADDR

	// DictURL is the DICT's base URL (--dict-url, BALDE_DICT_URL); empty:
	// serve starts the simulator.
	DictURL string
	// DictPoliciesURL is the base URL of GET /policies/, on its own host
	// (--dict-policies-url, BALDE_DICT_POLICIES_URL); empty: DictPolicies.
	DictPoliciesURL string
	// DictParticipant is this participant's ISPB (--dict-participant,
	// BALDE_DICT_PARTICIPANT), required unless against a simulator.
	DictParticipant string
	// DictCategory is the category A..H until learned from the DICT
	// (--dict-category, BALDE_DICT_CATEGORY); empty: the strictest, H.
	DictCategory string
	DictEnv      string // env part of DICT bucket keys: --dict-env, BALDE_DICT_ENV
	// DictCert, DictKey and DictCA are PEM files for mutual TLS with the DICT
	// (BALDE_DICT_CERT, BALDE_DICT_KEY, BALDE_DICT_CA).
	DictCert, DictKey, DictCA string
	// DictSignCert and DictSignKey sign DICT writes (dict.XMLSigner;
	// BALDE_DICT_SIGN_CERT, BALDE_DICT_SIGN_KEY); with neither, only
	// DictSignWithTLSKey (--dict-sign-with-tls-key) signs, with DictCert
	// and DictKey.
	DictSignCert, DictSignKey string
	DictSignWithTLSKey        bool
	// DictVerifyCert is the PEM file the DICT's signed answers are checked
	// against (BALDE_DICT_VERIFY_CERT), required against a real DICT unless
	// DictUnverified (--dict-unverified, BALDE_DICT_UNVERIFIED=on).
	DictVerifyCert string
	DictUnverified bool

	// SifenURL is SIFEN's base URL (--sifen-url, BALDE_SIFEN_URL); empty:
	// serve starts the simulator.
	SifenURL string
	// SifenThrottle is the least interval between two lots of one RUC and
	// env (SIFEN_THROTTLE_SECONDS, default 10 s); SifenThrottleProd
	// overrides it for prod (SIFEN_THROTTLE_SECONDS_PROD).
	SifenThrottle, SifenThrottleProd time.Duration
	// SifenBlockStep and SifenBlockMax shape the local block after a 0301
	// (BALDE_SIFEN_BLOCK_STEP, BALDE_SIFEN_BLOCK_MAX; sifen.DefaultRemoteBlock).
	SifenBlockStep, SifenBlockMax time.Duration
	// SifenPollEvery is how often serve looks for lots whose result is due
	// (BALDE_SIFEN_POLL_EVERY, default 30 s; 0: off).
	SifenPollEvery time.Duration
	// SifenCert, SifenKey and SifenCA are PEM files for mutual TLS with SIFEN
	// (BALDE_SIFEN_CERT, BALDE_SIFEN_KEY, BALDE_SIFEN_CA).
	SifenCert, SifenKey, SifenCA string
	SifenPerMinute               int64 // when positive, lots per minute of a RUC and env: BALDE_SIFEN_PER_MINUTE

	PolicyFile         string // catalog overrides: --policies, BALDE_POLICY_FILE
	DisableGroupCommit bool   // BALDE_GROUP_COMMIT=off

	// Ledger is how routine takes are written (BALDE_LEDGER); rows are kept
	// LedgerRetention (BALDE_LEDGER_RETENTION), at least MinRetention unless
	// LedgerRetentionForce (BALDE_LEDGER_RETENTION_FORCE).
	Ledger               throttle.LedgerGranularity
	LedgerRetention      time.Duration
	LedgerRetentionForce bool
	Thresholds           throttle.Thresholds // BALDE_SEVERITY_THRESHOLDS "50,25,10"
	AlertWebhook         string              // receives severity changes: BALDE_ALERT_WEBHOOK

	// AdminUser is the admin (--admin-user, BALDE_ADMIN_USER), with
	// AdminPassword (BALDE_ADMIN_PASSWORD), AdminPasswordBcrypt
	// (BALDE_ADMIN_PASSWORD_BCRYPT, wins) or the first line of
	// AdminPasswordFile (BALDE_ADMIN_PASSWORD_FILE); see FindAdminLogin.
	// Secrets have no flag: a command line is visible to every user.
	AdminUser, AdminPassword, AdminPasswordBcrypt string
	AdminPasswordFile                             string
	// Users are more users of the admin pages (BALDE_USERS, see
	// web.ParseUsers), and UsersFile holds more (--users-file,
	// BALDE_USERS_FILE); see AllUsers.
	Users     []web.Credentials
	UsersFile string
	// DataDir is where serve keeps what it generates (BALDE_DATA_DIR); see
	// ResolveDataDir.
	DataDir string
	// TimeZone is where the admin pages show times (BALDE_TIME_ZONE); nil:
	// the server's.
	TimeZone *time.Location
	// DictSimAddr and SifenSimAddr are where serve's simulators listen,
	// loopback only (--dict-sim-addr, --sifen-sim-addr, BALDE_DICT_SIM_ADDR,
	// BALDE_SIFEN_SIM_ADDR).
	DictSimAddr, SifenSimAddr string
	MetricsToken              string // bearer token of /metrics: BALDE_METRICS_TOKEN
	// TrustedProxies are the peers whose X-Forwarded-For is believed
	// (--trusted-proxies, BALDE_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix
	// InboundIPLimit is the requests per InboundWindow of a client IP (0:
	// no inbound limiter), refused InboundBlock beyond it
	// (--inbound-ip-limit, --inbound-window, --inbound-block, BALDE_INBOUND_*).
	InboundIPLimit int64
	InboundWindow  time.Duration
	InboundBlock   time.Duration
	// InboundTokens are API tokens with limits of their own
	// (BALDE_INBOUND_TOKENS, web.ParseInboundTokens), and InboundTokensFile
	// holds more (BALDE_INBOUND_TOKENS_FILE).
	InboundTokens     []web.InboundToken
	InboundTokensFile string
	// InboundPaths are the limited path prefixes (BALDE_INBOUND_PATHS) and
	// InboundExempt those never limited (BALDE_INBOUND_EXEMPT); nil: web's.
	InboundPaths, InboundExempt []string
	InboundFailClosed           bool // BALDE_INBOUND_FAIL=closed

	// DictReconcileEvery (--dict-reconcile-every,
	// BALDE_DICT_RECONCILE_EVERY), PruneEvery (--prune-every,
	// BALDE_PRUNE_EVERY) and SeverityEvery (BALDE_SEVERITY_EVERY) are the
	// periods of serve's background jobs; 0 is off.
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

// FromEnv is Default read over by the variables of getenv (ParseEnv).
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Default()
	if err := s.ParseEnv(getenv); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// ParseEnv reads the variables through getenv: an empty one keeps the
// current value, a malformed one is an error naming it.
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

// envVar is one variable and the setter of its field, whose error
// describes the value.
type envVar struct {
	name string
	set  func(string) error
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
		{"BALDE_GROUP_COMMIT", setParsed(&c.DisableGroupCommit, func(s string) (bool, error) { on, err := onOff(s); return !on, err })},
		{"BALDE_LEDGER", setParsed(&c.Ledger, throttle.ParseLedgerGranularity)},
		{"BALDE_LEDGER_RETENTION", setParsed(&c.LedgerRetention, durationMin(1, "a positive duration (e.g. 720h)"))},
		{"BALDE_LEDGER_RETENTION_FORCE", setParsed(&c.LedgerRetentionForce, onOff)},
		{"BALDE_SEVERITY_THRESHOLDS", setParsed(&c.Thresholds, parseThresholds)},

		// serve's web server.
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
	return setParsed(dst, func(s string) (string, error) { return s, nil })
}

// ParseInboundIPLimit reads BALDE_INBOUND_IP_LIMIT: requests per window
// in 0..throttle.MaxRollingCapacity.
func ParseInboundIPLimit(s string) (int64, error) {
	return intIn(0, throttle.MaxRollingCapacity, fmt.Sprintf("a number of requests in 0..%d", throttle.MaxRollingCapacity))(s)
}

// ParseInboundWindow reads BALDE_INBOUND_WINDOW: a positive Go duration.
func ParseInboundWindow(s string) (time.Duration, error) {
	return durationMin(1, "a positive duration (e.g. 1m)")(s)
}

// ParseInboundBlock reads BALDE_INBOUND_BLOCK: a Go duration, 0 or more.
func ParseInboundBlock(s string) (time.Duration, error) {
	return durationMin(0, "a duration (e.g. 5m, or 0 for no block)")(s)
}

// ParseSifenBlockStep reads BALDE_SIFEN_BLOCK_STEP, from 10m (SIFEN's own
// shortest block, which a shorter step would send into) to 24h.
func ParseSifenBlockStep(s string) (time.Duration, error) {
	return durationIn(sifen.DefaultRemoteBlock, 24*time.Hour, "a duration from 10m to 24h (SIFEN blocks a RUC at least 10 minutes)")(s)
}

// ParseSifenBlockMax reads BALDE_SIFEN_BLOCK_MAX, from 10m to 24h.
func ParseSifenBlockMax(s string) (time.Duration, error) {
	return durationIn(sifen.DefaultRemoteBlock, 24*time.Hour, "a duration from 10m to 24h")(s)
}

// setParsed returns the setter of a field read by parse; an error keeps
// the value.
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

// durationMin parses a Go duration of at least lowest, durationIn one in
// lowest..highest and intIn a whole number; want says what is expected.
func durationMin(lowest time.Duration, want string) func(string) (time.Duration, error) {
	return durationIn(lowest, math.MaxInt64, want)
}

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

// ParseInterval reads SIFEN_THROTTLE_SECONDS: seconds, more than 0 (SIFEN
// blocks a RUC that sends too often: the interval cannot be off).
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

// ParsePeriod reads the period of background work: a positive Go duration,
// or "off" or "0" for never (0).
func ParsePeriod(s string) (time.Duration, error) {
	if s == "off" || s == "0" {
		return 0, nil
	}
	return durationMin(1, "a period (e.g. 10m) or off")(s)
}

// ParseReconcileEvery reads BALDE_DICT_RECONCILE_EVERY: "auto"
// (ReconcileAuto), a ParsePeriod of at least MinReconcileEvery, or off.
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

// AllUsers is Users and those of UsersFile; a file that cannot be read, or
// a name given twice or as the admin's, is a *Error.
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
