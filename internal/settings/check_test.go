package settings_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/settings"
)

func TestSettingsChecks(t *testing.T) {
	tests := []struct {
		name  string
		s     settings.Settings
		check func(settings.Settings) error
		want  string // "" when the settings are fine
	}{
		{"BlockMaxOneStep", settings.Settings{SifenBlockStep: 10 * time.Minute, SifenBlockMax: 10 * time.Minute}, settings.Settings.CheckSifenBlock, ""},
		{"BlockMaxBelowStep", settings.Settings{SifenBlockStep: 20 * time.Minute, SifenBlockMax: 10 * time.Minute}, settings.Settings.CheckSifenBlock,
			"BALDE_SIFEN_BLOCK_MAX (--sifen-block-max) 10m0s is shorter than BALDE_SIFEN_BLOCK_STEP (--sifen-block-step) 20m0s"},
		{"DictURLsUnset", settings.Settings{}, settings.Settings.CheckDictURLs, ""},
		{"DictURLHTTPS", settings.Settings{DictURL: "https://dict.pi.rsfn.net.br:16522"}, settings.Settings.CheckDictURLs, ""},
		{"DictURLNoScheme", settings.Settings{DictURL: "dict.example:8080"}, settings.Settings.CheckDictURLs,
			`BALDE_DICT_URL (--dict-url) "dict.example:8080" is not an http(s) URL with a host`},
		{"PoliciesURLNoHost", settings.Settings{DictPoliciesURL: "http://"}, settings.Settings.CheckDictURLs,
			`BALDE_DICT_POLICIES_URL (--dict-policies-url) "http://" is not an http(s) URL with a host`},
		{"SigningHalfPair", settings.Settings{DictSignCert: "cert.pem"}, func(s settings.Settings) error { _, _, err := s.DictSigning(); return err },
			"DICT signing (BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY): give both the certificate and the key"},
		{"SigningNone", settings.Settings{}, func(s settings.Settings) error { _, _, err := s.DictSigning(); return err }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check(tt.s)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var se *settings.Error
			require.ErrorAs(t, err, &se)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// The engine's DICT and SIFEN configurations read the settings the binary
// reads: a client built from them is the one balde serve builds.
func TestSettingsClientConfigs(t *testing.T) {
	s := settings.Settings{DictPoliciesURL: "https://policies.example", DictParticipant: "12345678", DictCert: "c.pem", DictKey: "k.pem",
		DictCA: "ca.pem", SifenBlockStep: 20 * time.Minute, SifenBlockMax: time.Hour}
	dc := s.DictConfig("https://dict.example")
	require.Equal(t, balde.DictConfig{BaseURL: "https://dict.example", PoliciesURL: "https://policies.example", Participant: "12345678",
		CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", LearnCategory: true}, dc, "a pair that cannot be loaded signs nothing")
	sc := s.SifenConfig(nil)
	require.Equal(t, 20*time.Minute, sc.RemoteBlock)
	require.Equal(t, time.Hour, sc.RemoteBlockMax)
}
