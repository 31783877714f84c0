package main

import (
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	cfg := DefaultConfig()
	require.NoError(t, cfg.ParseEnv(func(k string) string { return env[k] }))
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.addStoreFlags(fs)
	cfg.addSifenFlags(fs)
	cfg.addDictFlags(fs)
	require.NoError(t, fs.Parse([]string{"--db", "sqlite://flag.db", "--sifen-throttle", "2.5"}))

	require.Equal(t, "sqlite://flag.db", cfg.DB)               // the flag wins
	require.Equal(t, 2500*time.Millisecond, cfg.SifenThrottle) // the flag wins
	require.Equal(t, "87654321", cfg.DictParticipant)          // env over default
	require.Equal(t, throttle.LedgerAggregateTakes, cfg.Ledger)
	require.Equal(t, throttle.Thresholds{Medium: 60, High: 30, Critical: 5, Recover: throttle.DefaultThresholds.Recover}, cfg.Thresholds)
	require.Equal(t, "", cfg.DictCategory) // default: unknown, the strictest (H) until learned
	require.Equal(t, "https://dict-ratelimit.example:16422/api/v1", cfg.DictPoliciesURL)

	// The policies host: unset by default, the flag over the env.
	require.Equal(t, "", DefaultConfig().DictPoliciesURL)
	require.NoError(t, fs.Parse([]string{"--dict-policies-url", "https://flag.example/api/v1"}))
	require.Equal(t, "https://flag.example/api/v1", cfg.DictPoliciesURL)
}

func TestConfigBadEnv(t *testing.T) {
	tests := []struct{ name, key, value, want string }{
		{"ThrottleNotANumber", "SIFEN_THROTTLE_SECONDS", "ten", "SIFEN_THROTTLE_SECONDS"},
		{"ThrottleNegative", "SIFEN_THROTTLE_SECONDS", "-1", "SIFEN_THROTTLE_SECONDS"},
		{"ThrottleZero", "SIFEN_THROTTLE_SECONDS", "0", "must be more than 0 seconds"},
		{"LedgerUnknown", "BALDE_LEDGER", "sometimes", "BALDE_LEDGER"},
		{"RetentionBad", "BALDE_LEDGER_RETENTION", "30 days", "BALDE_LEDGER_RETENTION"},
		{"ThresholdsUnordered", "BALDE_SEVERITY_THRESHOLDS", "10,25,50", "BALDE_SEVERITY_THRESHOLDS"},
		{"PerMinuteNegative", "BALDE_SIFEN_PER_MINUTE", "-1", `BALDE_SIFEN_PER_MINUTE: "-1" is not a whole number of lots per minute`},
		{"GroupCommitUnknown", "BALDE_GROUP_COMMIT", "maybe", `BALDE_GROUP_COMMIT: "maybe" (want on or off)`},
		{"IPLimitTooBig", "BALDE_INBOUND_IP_LIMIT", "99999999", "BALDE_INBOUND_IP_LIMIT"},
		{"WindowZero", "BALDE_INBOUND_WINDOW", "0s", `BALDE_INBOUND_WINDOW: "0s" is not a positive duration`},
		{"BlockNegative", "BALDE_INBOUND_BLOCK", "-1s", "BALDE_INBOUND_BLOCK"},
		{"PathNotAPrefix", "BALDE_INBOUND_PATHS", "/api,admin", `BALDE_INBOUND_PATHS: "admin" is not a path prefix`},
		{"FailUnknown", "BALDE_INBOUND_FAIL", "ajar", `BALDE_INBOUND_FAIL: "ajar" (want open or closed)`},
		{"PruneEveryNegative", "BALDE_PRUNE_EVERY", "-1m", "BALDE_PRUNE_EVERY"},
		{"BlockStepShort", "BALDE_SIFEN_BLOCK_STEP", "5m", `BALDE_SIFEN_BLOCK_STEP: "5m" is not a duration from 10m to 24h`},
		{"BlockStepNotADuration", "BALDE_SIFEN_BLOCK_STEP", "10", "BALDE_SIFEN_BLOCK_STEP"},
		{"BlockMaxLong", "BALDE_SIFEN_BLOCK_MAX", "25h", `BALDE_SIFEN_BLOCK_MAX: "25h" is not a duration from 10m to 24h`},
		{"ReconcileTooOften", "BALDE_DICT_RECONCILE_EVERY", "5s", "BALDE_DICT_RECONCILE_EVERY: 5s is more often than POLICIES_LIST allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			err := cfg.ParseEnv(func(k string) string {
				if k == tt.key {
					return tt.value
				}
				return ""
			})
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestConfigEnvValues(t *testing.T) {
	env := map[string]string{
		"BALDE_GROUP_COMMIT":    "off",
		"BALDE_INBOUND_BLOCK":   "0",
		"BALDE_INBOUND_PATHS":   " /api , /admin/,",
		"BALDE_INBOUND_FAIL":    "closed",
		"BALDE_PRUNE_EVERY":     "off",
		"BALDE_TRUSTED_PROXIES": "10.0.0.0/8",
	}
	cfg := DefaultConfig()
	require.NoError(t, cfg.ParseEnv(func(k string) string { return env[k] }))
	require.False(t, cfg.GroupCommit)
	require.Equal(t, time.Duration(0), cfg.InboundBlock)
	require.Equal(t, []string{"/api", "/admin/"}, cfg.InboundPaths)
	require.Equal(t, throttle.FailClosed, cfg.InboundFailMode)
	require.Equal(t, time.Duration(0), cfg.PruneEvery)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, cfg.TrustedProxies)
	require.Equal(t, DefaultConfig().InboundWindow, cfg.InboundWindow, "unset: the default stays")
}

// TestReadmeListsEveryVariable: every variable ParseEnv reads is documented.
func TestReadmeListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	var cfg Config
	for _, v := range cfg.envVars() {
		require.Contains(t, string(readme), v.name)
	}
}
