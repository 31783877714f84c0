package settings_test

import (
	"flag"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/settings"
)

// A setting's flag takes what its variable takes, wins over it, and names
// it in its help; every known name registers.
func TestSettingsAddFlags(t *testing.T) {
	env := map[string]string{"BALDE_DB": "sqlite://env.db", "SIFEN_THROTTLE_SECONDS": "12", "BALDE_PRUNE_EVERY": "off"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, s settings.Settings)
	}{
		{"variables", nil, "", func(t *testing.T, s settings.Settings) {
			require.Equal(t, "sqlite://env.db", s.DB)
			require.Equal(t, 12*time.Second, s.SifenThrottle)
			require.Zero(t, s.PruneEvery)
		}},
		{"flags win", []string{"--db", "sqlite://flag.db", "--sifen-throttle", "2.5", "--prune-every", "1h"}, "", func(t *testing.T, s settings.Settings) {
			require.Equal(t, "sqlite://flag.db", s.DB)
			require.Equal(t, 2500*time.Millisecond, s.SifenThrottle)
			require.Equal(t, time.Hour, s.PruneEvery)
		}},
		{"the variable's parser", []string{"--sifen-throttle", "soon"}, `invalid value "soon" for flag -sifen-throttle`, nil},
		{"off", []string{"--dict-reconcile-every", "off"}, "", func(t *testing.T, s settings.Settings) { require.Zero(t, s.DictReconcileEvery) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings.Default()
			require.NoError(t, s.ParseEnv(func(k string) string { return env[k] }))
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			s.AddFlags(fs, settings.FlagNames()...)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, s)
		})
	}

	var help strings.Builder
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&help)
	s := settings.Default()
	s.AddFlags(fs, "db", "sifen-throttle", "prune-every")
	fs.PrintDefaults()
	require.Contains(t, help.String(), "(env BALDE_DB)")
	require.Contains(t, help.String(), "(env SIFEN_THROTTLE_SECONDS)")
	require.Contains(t, help.String(), "-sifen-throttle value\n    \tseconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS) (default 10)\n", "seconds as the variable writes them")
	require.Panics(t, func() { s.AddFlags(fs, "no-such-flag") })
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := settings.ParseTrustedProxies("10.0.0.0/8, 127.0.0.1 ::1\n192.168.1.7/16")
	require.NoError(t, err)
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("192.168.0.0/16"),
	}
	require.Equal(t, want, got)
	for _, bad := range []string{"10.0.0.0/33", "localhost", "1.2.3"} {
		_, err := settings.ParseTrustedProxies(bad)
		require.Error(t, err, bad)
	}
}
