package settings_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/web"
)

func TestSettingsInboundConfig(t *testing.T) {
	t.Run("OffIsNil", func(t *testing.T) {
		ic, err := settings.Settings{InboundTokensFile: "/nonexistent"}.InboundConfig()
		require.NoError(t, err, "an inbound limiter that is off reads no file")
		require.Nil(t, ic)
	})
	t.Run("TokensOfTheFileAfterTheVariable", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "tokens")
		require.NoError(t, os.WriteFile(file, []byte("# monitors\ns3cr3t=60/1m\n"), 0o600))
		first := web.InboundToken{Hash: web.HashToken("a"), Limit: 5}
		s := settings.Settings{InboundIPLimit: 100, InboundWindow: time.Minute, InboundTokens: []web.InboundToken{first}, InboundTokensFile: file}
		ic, err := s.InboundConfig()
		require.NoError(t, err)
		require.Equal(t, int64(100), ic.IPLimit)
		require.Equal(t, time.Minute, ic.Window)
		require.Equal(t, []web.InboundToken{first, {Hash: web.HashToken("s3cr3t"), Limit: 60, Window: time.Minute}}, ic.Tokens)
		require.Len(t, s.InboundTokens, 1, "the settings are not changed")
	})
	t.Run("ErrMissingFile", func(t *testing.T) {
		_, err := settings.Settings{InboundIPLimit: 1, InboundTokensFile: filepath.Join(t.TempDir(), "none")}.InboundConfig()
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "BALDE_INBOUND_TOKENS_FILE: ")
	})
	t.Run("ErrBadFile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "tokens")
		require.NoError(t, os.WriteFile(file, []byte("no-limit\n"), 0o600))
		_, err := settings.Settings{InboundIPLimit: 1, InboundTokensFile: file}.InboundConfig()
		require.ErrorContains(t, err, "BALDE_INBOUND_TOKENS_FILE "+file+": ")
	})
}

// A DictReconcileEvery setting and the Jobs period it gives the engine:
// auto is the engine's automatic 0 (every minute against a real DICT, off
// against the simulator: TestRunReconcilePeriod at the root); a period set
// is kept; 0 is off.
func TestSettingsReconcilePeriod(t *testing.T) {
	tests := []struct {
		name  string
		every time.Duration
		want  time.Duration
	}{
		{"Auto", settings.ReconcileAuto, 0},
		{"Set", 30 * time.Second, 30 * time.Second},
		{"Off", 0, balde.Off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, settings.Settings{DictReconcileEvery: tt.every}.Jobs().DictReconcileEvery)
		})
	}
}
