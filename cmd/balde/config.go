package main

import (
	"errors"
	"flag"

	"github.com/balde-throttle/balde/internal/settings"
)

// Config is the configuration shared by every command: settings.Settings
// (defaults, then the environment variables), then flags, registered here:
// a flag always wins. The guides (docs/guides) list every field with its flag and
// variable.
type Config struct {
	settings.Settings
}

// DefaultConfig returns the configuration of "make run": SQLite in the
// working directory, simulators in-process.
func DefaultConfig() Config { return Config{settings.Default()} }

// settingUsage turns a *settings.Error into a usage error translated as
// its English format is (internal/i18n); nil stays nil.
func settingUsage(err error) error {
	var se *settings.Error
	if !errors.As(err, &se) {
		return err
	}
	return &ExitError{Code: ExitUsage, Err: err, format: se.Format, args: se.Args}
}

// The flags of the settings (settings.Settings.AddFlags), by group.

func (c *Config) addStoreFlags(fs *flag.FlagSet) { c.AddFlags(fs, "db") }

func (c *Config) addDictFlags(fs *flag.FlagSet) {
	c.AddFlags(fs, "dict-url", "dict-policies-url", "dict-participant", "dict-category", "dict-env", "dict-unverified", "dict-sign-with-tls-key")
}

func (c *Config) addSifenFlags(fs *flag.FlagSet) {
	c.AddFlags(fs, "sifen-url", "sifen-throttle", "sifen-throttle-prod", "sifen-block-step", "sifen-block-max")
}

func (c *Config) addPolicyFlags(fs *flag.FlagSet) { c.AddFlags(fs, "policies") }

func (c *Config) addBackgroundFlags(fs *flag.FlagSet) {
	c.AddFlags(fs, "dict-reconcile-every", "prune-every")
}

// addWebFlags registers the flags of serve's web server.
func (c *Config) addWebFlags(fs *flag.FlagSet) {
	c.AddFlags(fs, "addr", "admin-user", "users-file", "dict-sim-addr", "sifen-sim-addr", "trusted-proxies",
		"inbound-ip-limit", "inbound-window", "inbound-block")
}

// envConfig is the settings every command starts from: the defaults, then
// the environment; a bad variable is a usage error (exit 2) naming it.
func (m *Main) envConfig() (Config, error) {
	cfg := DefaultConfig()
	if err := cfg.ParseEnv(m.Getenv); err != nil {
		return cfg, UsageError("%v", err)
	}
	return cfg, nil
}

// checkDict refuses a missing DICT URL (noURL, the command's usage
// error), then bad DICT URLs or client settings.
func checkDict(cfg Config, noURL error) error {
	if cfg.DictURL == "" {
		return noURL
	}
	if err := settingUsage(cfg.CheckDictURLs()); err != nil {
		return err
	}
	return settingUsage(cfg.CheckDictClient())
}
