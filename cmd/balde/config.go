package main

import (
	"errors"
	"flag"

	"github.com/balde-throttle/balde/internal/settings"
)

// settingUsage turns a *settings.Error into a usage error translated as
// its English format is (internal/i18n); nil stays nil.
func settingUsage(err error) error {
	var se *settings.Error
	if !errors.As(err, &se) {
		return err
	}
	return &ExitError{Code: ExitUsage, Err: err, format: se.Format, args: se.Args}
}

// The flags of the settings (settings.Settings.AddFlags), by group, for
// newCommand.
var (
	storeFlags      = []string{"db"}
	dictFlags       = []string{"dict-url", "dict-policies-url", "dict-participant", "dict-category", "dict-env", "dict-unverified", "dict-sign-with-tls-key"}
	sifenFlags      = []string{"sifen-url", "sifen-throttle", "sifen-throttle-prod", "sifen-block-step", "sifen-block-max"}
	policyFlags     = []string{"policies"}
	backgroundFlags = []string{"dict-reconcile-every", "prune-every"}
	// webFlags are those of serve's web server.
	webFlags = []string{"addr", "admin-user", "users-file", "dict-sim-addr", "sifen-sim-addr", "trusted-proxies",
		"inbound-ip-limit", "inbound-window", "inbound-block"}
)

// newCommand starts a command: its settings, the defaults then the
// environment, with the flags of groups registered on its FlagSet
// (newFlagSet), and parse, which parses the command line (parseFlags) once
// the command has added its own flags. A bad environment variable is
// parse's error, a usage error (exit 2) naming it.
func (m *Main) newCommand(name, synopsis, example string, groups ...[]string) (*settings.Settings, *flag.FlagSet, func(args []string) error) {
	cfg := settings.Default()
	envErr := cfg.ParseEnv(m.Getenv)
	fs := m.newFlagSet(name, synopsis, example)
	for _, g := range groups {
		cfg.AddFlags(fs, g...)
	}
	return &cfg, fs, func(args []string) error {
		if envErr != nil {
			return UsageError("%v", envErr)
		}
		return parseFlags(fs, args)
	}
}

// checkDict refuses a missing DICT URL (noURL, the command's usage
// error), then bad DICT URLs or client settings.
func checkDict(cfg settings.Settings, noURL error) error {
	if cfg.DictURL == "" {
		return noURL
	}
	if err := settingUsage(cfg.CheckDictURLs()); err != nil {
		return err
	}
	return settingUsage(cfg.CheckDictClient())
}
