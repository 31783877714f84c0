package settings_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde/internal/settings"
)

func TestSettingsCheckServe(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	require.NoError(t, err)
	tests := []struct {
		name    string
		change  func(s *settings.Settings)
		wantErr string
	}{
		{"defaults", func(*settings.Settings) {}, ""},
		{"short retention", func(s *settings.Settings) { s.LedgerRetention = time.Hour },
			"serve: BALDE_LEDGER_RETENTION 1h0m0s would erase the audit trail of the last day; use at least 24h0m0s, or set BALDE_LEDGER_RETENTION_FORCE=on"},
		{"short retention, forced", func(s *settings.Settings) { s.LedgerRetention, s.LedgerRetentionForce = time.Hour, true }, ""},
		{"short retention, no prune", func(s *settings.Settings) { s.LedgerRetention, s.PruneEvery = time.Hour, 0 }, ""},
		{"bcrypt", func(s *settings.Settings) { s.AdminPasswordBcrypt = string(hash) }, ""},
		{"not bcrypt", func(s *settings.Settings) { s.AdminPasswordBcrypt = "secret" }, "BALDE_ADMIN_PASSWORD_BCRYPT: not a bcrypt hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings.Default()
			tt.change(&s)
			err := s.CheckServe()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var se *settings.Error
			require.ErrorAs(t, err, &se)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestCheckCreate(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "present.db")
	require.NoError(t, os.WriteFile(present, nil, 0o600))
	missing := filepath.Join(dir, "missing.db")
	tests := []struct {
		name         string
		dsn          string
		create       bool
		wantCreating bool
		wantErr      error
	}{
		{"present", "sqlite://" + present, false, false, nil},
		{"missing", "sqlite://" + missing, false, false, settings.ErrNoDatabase},
		{"missing, --create", "sqlite://" + missing, true, true, nil},
		{"PostgreSQL", "postgres://balde@db.invalid/balde", false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creating, err := settings.CheckCreate(tt.dsn, tt.create)
			require.ErrorIs(t, err, tt.wantErr)
			require.Equal(t, tt.wantCreating, creating)
			if tt.wantErr != nil {
				require.ErrorContains(t, err, missing)
			}
		})
	}
	_, statErr := os.Stat(missing)
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing created")
	require.NotEmpty(t, settings.Default().DB)
}

func TestCheckListenAddr(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "127.0.0.1:8080": true, ":65535": true,
		"127.0.0.1": false, "127.0.0.1:65536": false, "127.0.0.1:http": false} {
		require.Equal(t, ok, settings.CheckListenAddr(addr) == nil, addr)
	}
}

func TestSettingsSifenClient(t *testing.T) {
	s := settings.Default()
	_, err := s.SifenClient(settings.SifenOfficial)
	require.NoError(t, err)
	_, err = s.SifenClient("http://127.0.0.1:1/{env}")
	require.NoError(t, err)
	_, err = s.SifenClient("ftp://sifen/{env}")
	require.Error(t, err)
}

// live sets what a DICT that is not a simulator needs: its URL, the
// participant and the certificate of its answers.
func live(s *settings.Settings) {
	s.DictURL, s.DictParticipant, s.DictVerifyCert, s.DictUnverified = "https://dict.pi.rsfn.net.br:16422", "60701190", "", true
}

func TestSettingsCheckDictClient(t *testing.T) {
	tests := []struct {
		name    string
		change  func(s *settings.Settings)
		wantErr string
	}{
		{"defaults", func(*settings.Settings) {}, ""},
		{"bad ISPB", func(s *settings.Settings) { s.DictParticipant = "123" }, "BALDE_DICT_PARTICIPANT (--dict-participant): "},
		{"simulator on loopback, no ISPB", func(s *settings.Settings) { s.DictURL = "http://127.0.0.1:8080/dict" }, ""},
		// Against a DICT that is not a simulator nothing is assumed.
		{"live, no ISPB", func(s *settings.Settings) { live(s); s.DictParticipant = "" },
			"BALDE_DICT_PARTICIPANT (--dict-participant) is not set"},
		{"live, policies host not derivable", func(s *settings.Settings) { live(s); s.DictURL = "https://dict-proxy.psp.example:8443" },
			"BALDE_DICT_POLICIES_URL (--dict-policies-url) is not set"},
		{"live, policies host given", func(s *settings.Settings) {
			live(s)
			s.DictURL, s.DictPoliciesURL = "https://dict-proxy.psp.example:8443", "https://ratelimit-proxy.psp.example:8443"
		}, ""},
		{"live, unverified", func(s *settings.Settings) { live(s); s.DictUnverified = false }, "BALDE_DICT_VERIFY_CERT is not set"},
		{"live, unverified acknowledged", func(s *settings.Settings) { live(s); s.DictVerifyCert, s.DictUnverified = "", true }, ""},
		{"live", live, ""},
		{"signing with the TLS pair, no pair", func(s *settings.Settings) { s.DictSignWithTLSKey = true }, "--dict-sign-with-tls-key"},
		{"missing certificate", func(s *settings.Settings) { s.DictCert, s.DictKey = "/nonexistent/cert.pem", "/nonexistent/key.pem" }, "DICT TLS: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings.Default()
			tt.change(&s)
			err := s.CheckDictClient()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var se *settings.Error
			require.ErrorAs(t, err, &se)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestCheckDatabase(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	err := settings.CheckDatabase("sqlite://" + missing)
	require.ErrorIs(t, err, settings.ErrNoDatabase)
	require.ErrorContains(t, err, missing)
	_, statErr := os.Stat(missing)
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing created")

	present := filepath.Join(dir, "balde.db")
	require.NoError(t, os.WriteFile(present, nil, 0o600))
	require.NoError(t, settings.CheckDatabase("sqlite://"+present))
	require.NoError(t, settings.CheckDatabase("postgres://balde@db.invalid/balde"), "PostgreSQL is not checked")
	require.NoError(t, settings.CheckDatabase("sqlite://:memory:"))
	require.Error(t, settings.CheckDatabase("mysql://nope"))
}

// GET /policies/ has its own host in the DICT's spec: dict… →
// dict-ratelimit…, same scheme and port; a simulator keeps its own URL,
// and a host that is not the DICT's derives nothing.
func TestSettingsDictPolicies(t *testing.T) {
	for _, tt := range []struct{ dict, given, want string }{
		{"https://dict.pi.rsfn.net.br:16422", "", "https://dict-ratelimit.pi.rsfn.net.br:16422"},
		{"https://dict-h.pi.rsfn.net.br:16522", "", "https://dict-ratelimit-h.pi.rsfn.net.br:16522"},
		{"https://dict.pi.rsfn.net.br:16422", "https://limits.example:1", "https://limits.example:1"},
		{"https://dictionary.example", "", ""},
		{"http://127.0.0.1:8080/dict", "", ""},
		{"", "", ""},
	} {
		s := settings.Default()
		s.DictURL, s.DictPoliciesURL = tt.dict, tt.given
		require.Equal(t, tt.want, s.DictPolicies(), "DICT %q, policies %q", tt.dict, tt.given)
	}
	s := settings.Default()
	require.Empty(t, s.DictParticipant, "no example ISPB by default")
	require.Equal(t, settings.SimulatorParticipant, s.Participant(), "the simulator's client")
	s.DictURL = "https://dict.pi.rsfn.net.br:16422"
	require.Empty(t, s.Participant(), "nothing assumed against the DICT")
}

// The mutual-TLS pair signs only when asked to (--dict-sign-with-tls-key):
// before, it signed silently whenever the signing pair was unset.
func TestSettingsSigningFallbackIsExplicit(t *testing.T) {
	s := settings.Default()
	s.DictCert, s.DictKey = "/nonexistent/cert.pem", "/nonexistent/key.pem"
	signer, _, err := s.DictSigning()
	require.NoError(t, err, "the TLS pair is not read for signing")
	require.Nil(t, signer)
	s.DictSignWithTLSKey = true
	_, _, err = s.DictSigning()
	require.ErrorContains(t, err, "BALDE_DICT_CERT/BALDE_DICT_KEY (--dict-sign-with-tls-key)")
}
