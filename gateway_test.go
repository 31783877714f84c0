package balde_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/web"
)

// The gateways' handlers need the engine's client of their remote side,
// refuse a configuration their web gateway refuses (a *SettingError),
// and otherwise serve the API with the probes beside it.
func TestGatewayHandlers(t *testing.T) {
	ctx := context.Background()
	s := balde.DefaultSettings()
	s.DictURL, s.DictParticipant = "http://127.0.0.1:1", "12345678"
	open := func(t *testing.T, cfg balde.Config) *balde.Engine {
		cfg.DB, cfg.Migrate = "sqlite://"+filepath.Join(t.TempDir(), "balde.db"), true
		eng, err := balde.Open(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
		return eng
	}
	var ce *balde.ConfigError

	bare := open(t, balde.Config{})
	_, err := bare.DictGatewayHandler(s, nil, nil)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Dict", ce.Setting)
	_, err = bare.SifenGatewayHandler(s, web.SifenGatewayConfig{Env: sifen.EnvTest})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Sifen", ce.Setting)

	eng := open(t, balde.Config{Dict: &balde.DictConfig{BaseURL: s.DictURL, Participant: s.DictParticipant},
		Sifen: &balde.SifenConfig{BaseURL: "http://127.0.0.1:1/{env}"}})
	var se *balde.SettingError
	_, err = eng.SifenGatewayHandler(s, web.SifenGatewayConfig{Env: sifen.EnvProd, AllowUnsigned: true})
	require.ErrorAs(t, err, &se)
	require.Equal(t, "gateway sifen: %v", se.Format)
	bad := s
	bad.DictURL = "::not a url"
	_, err = eng.DictGatewayHandler(bad, nil, nil)
	require.ErrorAs(t, err, &se)
	require.Equal(t, "gateway dict: %v", se.Format)

	for name, h := range map[string]func() (http.Handler, error){
		"dict": func() (http.Handler, error) { return eng.DictGatewayHandler(s, nil, nil) },
		"sifen": func() (http.Handler, error) {
			return eng.SifenGatewayHandler(s, web.SifenGatewayConfig{Env: sifen.EnvTest})
		},
	} {
		t.Run(name, func(t *testing.T) {
			handler, err := h()
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/livez", nil))
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		})
	}
}
