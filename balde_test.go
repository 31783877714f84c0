package balde_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// Bad settings are a *ConfigError naming the setting, and nothing is
// created on disk.
func TestOpenRefusesBadSettingsBeforeTouchingTheDatabase(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "balde.db")
	appDB, err := sql.Open("sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "app.db")))
	require.NoError(t, err)
	defer appDB.Close()
	tests := []struct {
		name    string
		cfg     balde.Config
		setting string
	}{
		{"NoDatabase", balde.Config{}, "DB"},
		{"BadDSN", balde.Config{DB: "mysql://x"}, "DB"},
		{"PoolWithoutDialect", balde.Config{SQLDB: appDB}, "Dialect"},
		{"BadCategory", balde.Config{DB: db, DictCategory: "not a category"}, "DictCategory"},
		{"MissingPolicyFile", balde.Config{DB: db, PolicyFile: filepath.Join(dir, "nope.json")}, "PolicyFile"},
		{"BadInbound", balde.Config{DB: db, Inbound: &web.InboundConfig{IPLimit: -1}}, "Inbound"},
		{"BadThresholds", balde.Config{DB: db, Thresholds: throttle.Thresholds{Medium: 10, High: 50, Critical: 5}}, "Thresholds"},
		{"BadDictParticipant", balde.Config{DB: db, Dict: &balde.DictConfig{BaseURL: "https://dict.example", Participant: "1234"}}, "Dict"},
		{"BadDictURL", balde.Config{DB: db, Dict: &balde.DictConfig{BaseURL: "dict.example", Participant: "12345678"}}, "Dict"},
		{"UnverifiedDict", balde.Config{DB: db, Dict: &balde.DictConfig{BaseURL: "https://dict.pi.rsfn.net.br:16422", Participant: "12345678"}}, "Dict"},
		{"MissingDictCert", balde.Config{DB: db, Dict: &balde.DictConfig{BaseURL: "https://dict.example", Participant: "12345678",
			CertFile: filepath.Join(dir, "nope.crt"), KeyFile: filepath.Join(dir, "nope.key")}}, "Dict"},
		{"BadSifenURL", balde.Config{DB: db, Sifen: &balde.SifenConfig{BaseURL: "ftp://sifen/{env}"}}, "Sifen"},
		{"BadSifenPolicy", balde.Config{DB: db, SifenPolicy: sifen.PolicyConfig{Interval: -time.Second}}, "SifenPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := balde.Open(t.Context(), tt.cfg)
			var ce *balde.ConfigError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, tt.setting, ce.Setting)
		})
	}
	require.NoFileExists(t, filepath.Join(dir, "balde.db"))
}
