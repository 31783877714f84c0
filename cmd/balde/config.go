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

// flagOf is a flag.Value read with parse — the parser of the matching
// environment variable (balde.Parse*), so a flag accepts exactly what its
// variable does — and shown in --help with format (nil: fmt.Sprint). On
// an error the value is unchanged.
func flagOf[T any](v *T, parse func(string) (T, error), format func(T) string) flag.Value {
	if format == nil {
		format = func(t T) string { return fmt.Sprint(t) }
	}
	return parsedFlag[T]{v, parse, format}
}

type parsedFlag[T any] struct {
	v      *T
	parse  func(string) (T, error)
	format func(T) string
}

func (f parsedFlag[T]) String() string {
	if f.v == nil {
		return ""
	}
	return f.format(*f.v)
}

func (f parsedFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.v = v
	return nil
}

// Formats of the flags' defaults: seconds as the variables write them, a
// period with "off" for 0, the reconciliation's "auto", proxy prefixes.
func formatSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

func formatPeriod(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return d.String()
}

func formatReconcile(d time.Duration) string {
	if d == ReconcileAuto {
		return "auto"
	}
	return formatPeriod(d)
}

func formatProxies(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// parseDuration reads a Go duration that may not be negative.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 1m)", s)
	}
	return v, nil
}

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
	fs.Var(flagOf(&c.SifenThrottle, balde.ParseInterval, formatSeconds), "sifen-throttle", "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)")
	fs.Var(flagOf(&c.SifenThrottleProd, balde.ParseInterval, formatSeconds), "sifen-throttle-prod", "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)")
	fs.Var(flagOf(&c.SifenBlockStep, balde.ParseSifenBlockStep, nil), "sifen-block-step", "local block of a RUC after SIFEN's first 0301, one step longer at each recurrence within a day; at least 10m (env BALDE_SIFEN_BLOCK_STEP)")
	fs.Var(flagOf(&c.SifenBlockMax, balde.ParseSifenBlockMax, nil), "sifen-block-max", "longest local block after repeated 0301s, at least --sifen-block-step (env BALDE_SIFEN_BLOCK_MAX)")
}

// addPolicyFlags registers --policies.
func (c *Config) addPolicyFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PolicyFile, "policies", c.PolicyFile, "JSON file overriding or adding policies (env BALDE_POLICY_FILE)")
}

// addBackgroundFlags registers the periods of serve's background work.
func (c *Config) addBackgroundFlags(fs *flag.FlagSet) {
	fs.Var(flagOf(&c.DictReconcileEvery, balde.ParseReconcileEvery, formatReconcile), "dict-reconcile-every", `period of the background DICT reconciliation, "auto" (every minute against a real DICT, off against the simulator) or "off" (env BALDE_DICT_RECONCILE_EVERY)`)
	fs.Var(flagOf(&c.PruneEvery, balde.ParsePeriod, formatPeriod), "prune-every", `period of the background prune of old ledger rows, DICT lookups and idle buckets, or "off" (env BALDE_PRUNE_EVERY)`)
}

// addWebFlags registers the flags of serve's web server.
func (c *Config) addWebFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "address to listen on, HOST:PORT (env BALDE_ADDR)")
	fs.StringVar(&c.AdminUser, "admin-user", c.AdminUser, "admin user name; the password comes from BALDE_ADMIN_PASSWORD, BALDE_ADMIN_PASSWORD_BCRYPT or BALDE_ADMIN_PASSWORD_FILE, else DATA_DIR/admin-password, generated once (env BALDE_ADMIN_USER)")
	fs.StringVar(&c.UsersFile, "users-file", c.UsersFile, "file of more admin-page users, NAME:ROLE:SECRET a line, ROLE viewer or admin, SECRET a bcrypt hash or a password (env BALDE_USERS_FILE; BALDE_USERS lists them inline)")
	fs.StringVar(&c.DictSimAddr, "dict-sim-addr", c.DictSimAddr, "where the built-in DICT simulator listens, loopback HOST:PORT (env BALDE_DICT_SIM_ADDR)")
	fs.StringVar(&c.SifenSimAddr, "sifen-sim-addr", c.SifenSimAddr, "where the built-in SIFEN simulator listens, loopback HOST:PORT (env BALDE_SIFEN_SIM_ADDR)")
	fs.Var(flagOf(&c.TrustedProxies, web.ParseTrustedProxies, formatProxies), "trusted-proxies", "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)")
	fs.Var(flagOf(&c.InboundIPLimit, balde.ParseInboundIPLimit, nil), "inbound-ip-limit", "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)")
	fs.Var(flagOf(&c.InboundWindow, balde.ParseInboundWindow, nil), "inbound-window", "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)")
	fs.Var(flagOf(&c.InboundBlock, balde.ParseInboundBlock, nil), "inbound-block", "how long a client over its limit is refused (env BALDE_INBOUND_BLOCK)")
}
