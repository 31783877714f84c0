package balde_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/web"
)

func TestSettingsInboundConfig(t *testing.T) {
	t.Run("OffIsNil", func(t *testing.T) {
		ic, err := balde.Settings{InboundTokensFile: "/nonexistent"}.InboundConfig()
		require.NoError(t, err, "an inbound limiter that is off reads no file")
		require.Nil(t, ic)
	})
	t.Run("TokensOfTheFileAfterTheVariable", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "tokens")
		require.NoError(t, os.WriteFile(file, []byte("# monitors\ns3cr3t=60/1m\n"), 0o600))
		first := web.InboundToken{Hash: web.HashToken("a"), Limit: 5}
		s := balde.Settings{InboundIPLimit: 100, InboundWindow: time.Minute, InboundTokens: []web.InboundToken{first}, InboundTokensFile: file}
		ic, err := s.InboundConfig()
		require.NoError(t, err)
		require.Equal(t, int64(100), ic.IPLimit)
		require.Equal(t, time.Minute, ic.Window)
		require.Equal(t, []web.InboundToken{first, {Hash: web.HashToken("s3cr3t"), Limit: 60, Window: time.Minute}}, ic.Tokens)
		require.Len(t, s.InboundTokens, 1, "the settings are not changed")
	})
	t.Run("ErrMissingFile", func(t *testing.T) {
		_, err := balde.Settings{InboundIPLimit: 1, InboundTokensFile: filepath.Join(t.TempDir(), "none")}.InboundConfig()
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "BALDE_INBOUND_TOKENS_FILE: ")
	})
	t.Run("ErrBadFile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "tokens")
		require.NoError(t, os.WriteFile(file, []byte("no-limit\n"), 0o600))
		_, err := balde.Settings{InboundIPLimit: 1, InboundTokensFile: file}.InboundConfig()
		require.ErrorContains(t, err, "BALDE_INBOUND_TOKENS_FILE "+file+": ")
	})
}

// A DictReconcileEvery setting and the period Run gives the reconciliation
// (Settings.Jobs, then ReconcilePeriod): auto is every minute against a
// real DICT and off against the simulator; a period set is kept; 0 is off.
func TestSettingsReconcilePeriod(t *testing.T) {
	tests := []struct {
		name      string
		every     time.Duration
		simulated bool
		want      time.Duration
	}{
		{"AutoRealDICT", balde.ReconcileAuto, false, balde.DefaultReconcileEvery},
		{"AutoSimulator", balde.ReconcileAuto, true, 0},
		{"SetSimulator", 30 * time.Second, true, 30 * time.Second},
		{"OffRealDICT", 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs := balde.Settings{DictReconcileEvery: tt.every}.Jobs()
			require.Equal(t, tt.want, balde.ReconcilePeriod(jobs.DictReconcileEvery, tt.simulated))
		})
	}
}
