package settings_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

func TestSettingsBadEnv(t *testing.T) {
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
			cfg := settings.Default()
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

func TestSettingsEnvValues(t *testing.T) {
	env := map[string]string{
		"BALDE_GROUP_COMMIT":    "off",
		"BALDE_INBOUND_BLOCK":   "0",
		"BALDE_INBOUND_PATHS":   " /api , /admin/,",
		"BALDE_INBOUND_FAIL":    "closed",
		"BALDE_PRUNE_EVERY":     "off",
		"BALDE_TRUSTED_PROXIES": "10.0.0.0/8",
	}
	cfg := settings.Default()
	require.NoError(t, cfg.ParseEnv(func(k string) string { return env[k] }))
	require.True(t, cfg.DisableGroupCommit)
	require.Equal(t, time.Duration(0), cfg.InboundBlock)
	require.Equal(t, []string{"/api", "/admin/"}, cfg.InboundPaths)
	require.True(t, cfg.InboundFailClosed)
	require.Equal(t, time.Duration(0), cfg.PruneEvery)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, cfg.TrustedProxies)
	require.Equal(t, settings.Default().InboundWindow, cfg.InboundWindow, "unset: the default stays")
}

// TestGuidesListEveryVariable: every variable ParseEnv reads is
// documented in the README or a guide of docs/guides.
func TestGuidesListEveryVariable(t *testing.T) {
	docs, err := filepath.Glob("../../docs/guides/*.md")
	require.NoError(t, err)
	var text strings.Builder
	for _, doc := range append(docs, "../../README.md") {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text.Write(b)
	}
	names := settings.EnvVariables()
	require.Contains(t, names, "BALDE_DB")
	for _, name := range names {
		require.Contains(t, text.String(), name)
	}
}

// TestEnvSettings: one call gives the settings of the variables, and their
// engine Config; a bad variable is an error naming it.
func TestEnvSettings(t *testing.T) {
	env := map[string]string{
		"BALDE_DB":                    "sqlite://app.db",
		"SIFEN_THROTTLE_SECONDS":      "12",
		"SIFEN_THROTTLE_SECONDS_PROD": "20",
		"BALDE_SIFEN_PER_MINUTE":      "3",
		"BALDE_LEDGER":                "minute",
		"BALDE_DICT_CATEGORY":         "C",
	}
	s := settings.Default()
	require.NoError(t, s.ParseEnv(func(k string) string { return env[k] }))
	require.Equal(t, "sqlite://app.db", s.DB)
	require.Equal(t, settings.ReconcileAuto, s.DictReconcileEvery, "unset: the default stays")
	cfg := s.Config()
	require.Equal(t, "sqlite://app.db", cfg.DB)
	require.False(t, cfg.DisableGroupCommit, "group commit on: balde.Config's default")
	require.Equal(t, throttle.LedgerAggregateTakes, cfg.Ledger)
	require.Equal(t, "C", cfg.DictCategory)
	require.Equal(t, sifen.PolicyConfig{Interval: 12 * time.Second, PerMinute: 3,
		EnvInterval: map[sifen.Env]time.Duration{sifen.EnvProd: 20 * time.Second}}, cfg.SifenPolicy)
	def := balde.DefaultJobs()
	require.Equal(t, balde.Jobs{SifenPollEvery: 30 * time.Second, SifenResolveEvery: def.PruneEvery,
		SeverityEvery: def.SeverityEvery, DictReconcileEvery: 0, PruneEvery: def.PruneEvery,
		Retention: throttle.DefaultRetention}, cfg.Jobs, "reconciliation automatic")

	off := settings.Default()
	require.NoError(t, off.ParseEnv(func(k string) string {
		return map[string]string{"BALDE_PRUNE_EVERY": "off", "BALDE_DICT_RECONCILE_EVERY": "off", "BALDE_SEVERITY_EVERY": "0"}[k]
	}))
	jobs := off.Jobs()
	require.Equal(t, []time.Duration{balde.Off, balde.Off, balde.Off, balde.Off},
		[]time.Duration{jobs.PruneEvery, jobs.SifenResolveEvery, jobs.DictReconcileEvery, jobs.SeverityEvery})

	bad := settings.Default()
	err := bad.ParseEnv(func(k string) string {
		if k == "BALDE_INBOUND_WINDOW" {
			return "soon"
		}
		return ""
	})
	require.ErrorContains(t, err, `BALDE_INBOUND_WINDOW: "soon" is not a positive duration`)
}

// Users come from BALDE_USERS and BALDE_USERS_FILE; a name given twice, or
// the admin's name again, is refused.
func TestSettingsUsers(t *testing.T) {
	file := t.TempDir() + "/users"
	require.NoError(t, os.WriteFile(file, []byte("# on call\noncall:viewer:$2a$10$abcdefghijklmnopqrstuu\n"), 0o600))
	tests := []struct {
		name    string
		env     map[string]string
		want    []web.Credentials
		wantErr string
	}{
		{name: "None", env: map[string]string{}},
		{name: "EnvAndFile", env: map[string]string{"BALDE_USERS": "lead:admin:s3cret, ops:viewer:pw", "BALDE_USERS_FILE": file},
			want: []web.Credentials{
				{User: "lead", Password: "s3cret", Role: web.RoleAdmin},
				{User: "ops", Password: "pw", Role: web.RoleViewer},
				{User: "oncall", PasswordBcrypt: "$2a$10$abcdefghijklmnopqrstuu", Role: web.RoleViewer},
			}},
		{name: "ErrAdminAgain", env: map[string]string{"BALDE_USERS": "admin:viewer:pw"}, wantErr: `user "admin" is configured twice`},
		{name: "ErrTwiceAcross", env: map[string]string{"BALDE_USERS": "oncall:admin:pw", "BALDE_USERS_FILE": file}, wantErr: `user "oncall" is configured twice`},
		{name: "ErrNoFile", env: map[string]string{"BALDE_USERS_FILE": file + ".missing"}, wantErr: "BALDE_USERS_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings.Default()
			err := s.ParseEnv(func(k string) string { return tt.env[k] })
			require.NoError(t, err)
			got, err := s.AllUsers()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	s := settings.Default()
	err := s.ParseEnv(func(k string) string { return map[string]string{"BALDE_USERS": "x:root:pw"}[k] })
	require.ErrorContains(t, err, `BALDE_USERS: web: users: line 1: user "x": web: role "root" (want viewer or admin)`)
}
