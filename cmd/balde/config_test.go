package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"balde/throttle"
)

func TestConfigPrecedence(t *testing.T) {
	env := map[string]string{
		"BALDE_DB":                  "postgres://env@127.0.0.1/x",
		"SIFEN_THROTTLE_SECONDS":    "30",
		"BALDE_LEDGER":              "minute",
		"BALDE_SEVERITY_THRESHOLDS": "60,30,5",
		"BALDE_DICT_PARTICIPANT":    "87654321",
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
	require.Equal(t, throttle.Thresholds{Medium: 60, High: 30, Critical: 5}, cfg.Thresholds)
	require.Equal(t, "A", cfg.DictCategory) // default
}

func TestConfigBadEnv(t *testing.T) {
	tests := []struct{ name, key, value, want string }{
		{"ThrottleNotANumber", "SIFEN_THROTTLE_SECONDS", "ten", "SIFEN_THROTTLE_SECONDS"},
		{"ThrottleNegative", "SIFEN_THROTTLE_SECONDS", "-1", "SIFEN_THROTTLE_SECONDS"},
		{"LedgerUnknown", "BALDE_LEDGER", "sometimes", "BALDE_LEDGER"},
		{"RetentionBad", "BALDE_LEDGER_RETENTION", "30 days", "BALDE_LEDGER_RETENTION"},
		{"ThresholdsUnordered", "BALDE_SEVERITY_THRESHOLDS", "10,25,50", "BALDE_SEVERITY_THRESHOLDS"},
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
