package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/throttle"
)

func TestConfigPrecedence(t *testing.T) {
	env := map[string]string{
		"BALDE_DB":                  "postgres://env@127.0.0.1/x",
		"SIFEN_THROTTLE_SECONDS":    "30",
		"BALDE_LEDGER":              "minute",
		"BALDE_SEVERITY_THRESHOLDS": "60,30,5",
		"BALDE_DICT_PARTICIPANT":    "87654321",
		"BALDE_DICT_POLICIES_URL":   "https://dict-ratelimit.example:16422/api/v1",
	}
	cfg := settings.Default()
	require.NoError(t, cfg.ParseEnv(func(k string) string { return env[k] }))
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs, storeFlags...)
	cfg.AddFlags(fs, sifenFlags...)
	cfg.AddFlags(fs, dictFlags...)
	require.NoError(t, fs.Parse([]string{"--db", "sqlite://flag.db", "--sifen-throttle", "2.5"}))

	require.Equal(t, "sqlite://flag.db", cfg.DB)               // the flag wins
	require.Equal(t, 2500*time.Millisecond, cfg.SifenThrottle) // the flag wins
	require.Equal(t, "87654321", cfg.DictParticipant)          // env over default
	require.Equal(t, throttle.LedgerAggregateTakes, cfg.Ledger)
	require.Equal(t, throttle.Thresholds{Medium: 60, High: 30, Critical: 5, Recover: throttle.DefaultThresholds.Recover}, cfg.Thresholds)
	require.Equal(t, "", cfg.DictCategory) // default: unknown, the strictest (H) until learned
	require.Equal(t, "https://dict-ratelimit.example:16422/api/v1", cfg.DictPoliciesURL)

	// The policies host: unset by default, the flag over the env.
	require.Equal(t, "", settings.Default().DictPoliciesURL)
	require.NoError(t, fs.Parse([]string{"--dict-policies-url", "https://flag.example/api/v1"}))
	require.Equal(t, "https://flag.example/api/v1", cfg.DictPoliciesURL)
}
