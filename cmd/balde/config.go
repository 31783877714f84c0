package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/web"
)

// Config is the configuration shared by every command: balde.Settings
// (defaults, then the environment variables, read by the module), then
// flags, registered here: a flag always wins. The README lists every field
// with its flag and variable.
type Config struct {
	balde.Settings
}

// ReconcileAuto is DictReconcileEvery's default (balde.ReconcileAuto):
// DefaultReconcileEvery against a real DICT, off against the simulator.
const ReconcileAuto = balde.ReconcileAuto

// Defaults of serve's background work.
const (
	DefaultReconcileEvery = balde.DefaultReconcileEvery
	DefaultPruneEvery     = balde.DefaultPruneEvery
)

// DefaultConfig returns the configuration of "make run": SQLite in the
// working directory, simulators in-process (balde.DefaultSettings).
func DefaultConfig() Config { return Config{balde.DefaultSettings()} }

// A flag is read with the parser of its environment variable
// (balde.Parse*), so it accepts exactly what its variable does.
var (
	parseInboundIPLimit = balde.ParseInboundIPLimit
	parseInboundWindow  = balde.ParseInboundWindow
	parseInboundBlock   = balde.ParseInboundBlock
	parseBlockStep      = balde.ParseSifenBlockStep
	parseBlockMax       = balde.ParseSifenBlockMax
)

// checkSifenBlock is balde.Settings.CheckSifenBlock, a usage error.
func (c Config) checkSifenBlock() error { return settingUsage(c.CheckSifenBlock()) }

// checkDictURLs is balde.Settings.CheckDictURLs, a usage error.
func (c Config) checkDictURLs() error { return settingUsage(c.CheckDictURLs()) }

// dictSigning is balde.Settings.DictSigning, its error a usage error.
func (c Config) dictSigning() (dict.Signer, dict.Verifier, error) {
	s, v, err := c.DictSigning()
	return s, v, settingUsage(err)
}

// settingUsage turns a *balde.SettingError into a usage error translated
// as its English format is (web/i18n); nil stays nil.
func settingUsage(err error) error {
	var se *balde.SettingError
	if !errors.As(err, &se) {
		return err
	}
	return &ExitError{Code: ExitUsage, Err: err, format: se.Format, args: se.Args}
}

// setParsed stores in dst what parse reads from s; on an error dst keeps
// its value. The flags share balde.Settings' parsers, so a flag and its
// variable accept the same values.
func setParsed[T any](dst *T, parse func(string) (T, error), s string) error {
	v, err := parse(s)
	if err != nil {
		return err
	}
	*dst = v
	return nil
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
	return setParsed(f.d, balde.ParseSeconds, s)
}

// intervalFlag is a SIFEN interval in seconds, more than 0
// (balde.ParseInterval).
type intervalFlag struct{ d *time.Duration }

func (f intervalFlag) String() string { return secondsFlag(f).String() }

func (f intervalFlag) Set(s string) error { return setParsed(f.d, balde.ParseInterval, s) }

// addStoreFlags registers --db.
func (c *Config) addStoreFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DB, "db", c.DB, "database DSN: sqlite://FILE, a file path, or postgres://... (env BALDE_DB)")
}

// addDictFlags registers the DICT endpoint and identity flags.
func (c *Config) addDictFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DictURL, "dict-url", c.DictURL, "DICT base URL (env BALDE_DICT_URL)")
	fs.StringVar(&c.DictPoliciesURL, "dict-policies-url", c.DictPoliciesURL, "base URL of the DICT's GET /policies/ when it has its own host (default: --dict-url) (env BALDE_DICT_POLICIES_URL)")
	fs.StringVar(&c.DictParticipant, "dict-participant", c.DictParticipant, "this participant's ISPB, 8 digits (env BALDE_DICT_PARTICIPANT)")
	fs.StringVar(&c.DictCategory, "dict-category", c.DictCategory, "participant category A..H until learned from the DICT's GET /policies/ (default: the strictest, H) (env BALDE_DICT_CATEGORY)")
	fs.StringVar(&c.DictEnv, "dict-env", c.DictEnv, "env part of DICT bucket keys (env BALDE_DICT_ENV)")
}

// addSifenFlags registers the SIFEN endpoint flags.
func (c *Config) addSifenFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.SifenURL, "sifen-url", c.SifenURL, `SIFEN base URL, "{env}" standing for test or prod, or "official" for SIFEN's endpoints (env BALDE_SIFEN_URL)`)
	fs.Var(intervalFlag{&c.SifenThrottle}, "sifen-throttle", "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)")
	fs.Var(intervalFlag{&c.SifenThrottleProd}, "sifen-throttle-prod", "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)")
	fs.Var(parsedFlag[time.Duration]{&c.SifenBlockStep, parseBlockStep}, "sifen-block-step", "local block of a RUC after SIFEN's first 0301, one step longer at each recurrence within a day; at least 10m (env BALDE_SIFEN_BLOCK_STEP)")
	fs.Var(parsedFlag[time.Duration]{&c.SifenBlockMax, parseBlockMax}, "sifen-block-max", "longest local block after repeated 0301s, at least --sifen-block-step (env BALDE_SIFEN_BLOCK_MAX)")
}

// addPolicyFlags registers --policies.
func (c *Config) addPolicyFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PolicyFile, "policies", c.PolicyFile, "JSON file overriding or adding policies (env BALDE_POLICY_FILE)")
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

func (f everyFlag) Set(s string) error { return setParsed(f.d, balde.ParsePeriod, s) }

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
	return setParsed(f.d, balde.ParseReconcileEvery, s)
}

// parsedFlag is a flag.Value read with the parser of the matching
// environment variable, so a flag accepts exactly what its variable does.
type parsedFlag[T any] struct {
	v     *T
	parse func(string) (T, error)
}

func (f parsedFlag[T]) String() string {
	if f.v == nil {
		return ""
	}
	return fmt.Sprint(*f.v)
}

func (f parsedFlag[T]) Set(s string) error { return setParsed(f.v, f.parse, s) }

// durationFlag is a flag.Value of a Go duration that may not be negative.
func durationFlag(d *time.Duration) parsedFlag[time.Duration] {
	return parsedFlag[time.Duration]{d, func(s string) (time.Duration, error) {
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q is not a duration (e.g. 1m)", s)
		}
		return v, nil
	}}
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
	return setParsed(f.p, web.ParseTrustedProxies, s)
}

// addBackgroundFlags registers the periods of serve's background work.
func (c *Config) addBackgroundFlags(fs *flag.FlagSet) {
	fs.Var(reconcileFlag{&c.DictReconcileEvery}, "dict-reconcile-every", `period of the background DICT reconciliation, "auto" (every minute against a real DICT, off against the simulator) or "off" (env BALDE_DICT_RECONCILE_EVERY)`)
	fs.Var(everyFlag{&c.PruneEvery}, "prune-every", `period of the background prune of old ledger rows, DICT lookups and idle buckets, or "off" (env BALDE_PRUNE_EVERY)`)
}

// addWebFlags registers the flags of serve's web server.
func (c *Config) addWebFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "address to listen on, HOST:PORT (env BALDE_ADDR)")
	fs.StringVar(&c.AdminUser, "admin-user", c.AdminUser, "admin user name; the password comes from BALDE_ADMIN_PASSWORD, BALDE_ADMIN_PASSWORD_BCRYPT or BALDE_ADMIN_PASSWORD_FILE, else DATA_DIR/admin-password, generated once (env BALDE_ADMIN_USER)")
	fs.StringVar(&c.UsersFile, "users-file", c.UsersFile, "file of more admin-page users, NAME:ROLE:SECRET a line, ROLE viewer or admin, SECRET a bcrypt hash or a password (env BALDE_USERS_FILE; BALDE_USERS lists them inline)")
	fs.StringVar(&c.DictSimAddr, "dict-sim-addr", c.DictSimAddr, "where the built-in DICT simulator listens, loopback HOST:PORT (env BALDE_DICT_SIM_ADDR)")
	fs.StringVar(&c.SifenSimAddr, "sifen-sim-addr", c.SifenSimAddr, "where the built-in SIFEN simulator listens, loopback HOST:PORT (env BALDE_SIFEN_SIM_ADDR)")
	fs.Var(proxiesFlag{&c.TrustedProxies}, "trusted-proxies", "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)")
	fs.Var(parsedFlag[int64]{&c.InboundIPLimit, parseInboundIPLimit}, "inbound-ip-limit", "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)")
	fs.Var(parsedFlag[time.Duration]{&c.InboundWindow, parseInboundWindow}, "inbound-window", "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)")
	fs.Var(parsedFlag[time.Duration]{&c.InboundBlock, parseInboundBlock}, "inbound-block", "how long a client over its limit is refused (env BALDE_INBOUND_BLOCK)")
}
