package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"balde/throttle"
	"balde/throttle/sqlstore"
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

	// PolicyFile overrides and extends the policy catalog (--policies,
	// BALDE_POLICY_FILE).
	PolicyFile string

	// Ledger is how routine takes are written: every, minute or none
	// (BALDE_LEDGER). LedgerRetention is how long rows are kept
	// (BALDE_LEDGER_RETENTION, default 720h).
	Ledger          throttle.LedgerGranularity
	LedgerRetention time.Duration
	// Thresholds grade severity (BALDE_SEVERITY_THRESHOLDS "50,25,10").
	Thresholds throttle.Thresholds
	// AlertWebhook receives severity changes as JSON (BALDE_ALERT_WEBHOOK).
	AlertWebhook string
}

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
		LedgerRetention: throttle.DefaultRetention,
		Thresholds:      throttle.DefaultThresholds,
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
	return nil
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
	fs.StringVar(&c.SifenURL, "sifen-url", c.SifenURL, "SIFEN base URL (env BALDE_SIFEN_URL)")
	fs.Var(secondsFlag{&c.SifenThrottle}, "sifen-throttle", "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)")
	fs.Var(secondsFlag{&c.SifenThrottleProd}, "sifen-throttle-prod", "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)")
}

// addPolicyFlags registers --policies.
func (c *Config) addPolicyFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PolicyFile, "policies", c.PolicyFile, "JSON file overriding or adding policies (env BALDE_POLICY_FILE)")
}
