package main

import (
	"errors"
	"flag"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
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

// flagOf and parseDuration are balde's (a flag read with its variable's
// parser, a duration that may not be negative).
func flagOf[T any](v *T, parse func(string) (T, error), format func(T) string) flag.Value {
	return balde.FlagOf(v, parse, format)
}

var parseDuration = balde.ParseDuration

// The flags of the settings (balde.Settings.AddFlags), by group.

func (c *Config) addStoreFlags(fs *flag.FlagSet) { c.AddFlags(fs, "db") }

func (c *Config) addDictFlags(fs *flag.FlagSet) {
	c.AddFlags(fs, "dict-url", "dict-policies-url", "dict-participant", "dict-category", "dict-env")
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
