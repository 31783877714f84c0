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

// anyone authenticates every request as one client.
func anyone(*http.Request) (string, bool) { return "app", true }

// The gateways' handlers need the engine's client of their remote side and
// refuse a configuration their web gateway refuses (a *ConfigError). A
// mounted gateway serves its API and no route the application did not
// mount: /metrics and the probes are OpsHandler's, a handler of their own
// that serves nothing else.
func TestGatewayHandlers(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, cfg balde.Config) *balde.Engine {
		cfg.DB, cfg.Migrate = "sqlite://"+filepath.Join(t.TempDir(), "balde.db"), true
		eng, err := balde.Open(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
		return eng
	}
	var ce *balde.ConfigError

	bare := open(t, balde.Config{})
	_, err := bare.DictGateway(web.DictGatewayConfig{Authenticate: anyone})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Dict", ce.Setting)
	_, err = bare.SifenGateway(web.SifenGatewayConfig{Env: sifen.EnvTest, Authenticate: anyone})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Sifen", ce.Setting)

	eng := open(t, balde.Config{Dict: &balde.DictConfig{BaseURL: "http://127.0.0.1:1", Participant: "12345678"},
		Sifen: &balde.SifenConfig{BaseURL: "http://127.0.0.1:1/{env}"}, Observer: web.NewMetrics()})
	_, err = eng.SifenGateway(web.SifenGatewayConfig{Env: sifen.EnvProd, AllowUnsigned: true, Authenticate: anyone})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Sifen", ce.Setting)
	_, err = eng.SifenGateway(web.SifenGatewayConfig{Env: sifen.EnvTest})
	require.ErrorAs(t, err, &ce, "a gateway without Authenticate is not built")
	require.Equal(t, "Sifen", ce.Setting)
	_, err = eng.DictGateway(web.DictGatewayConfig{})
	require.ErrorAs(t, err, &ce, "a gateway without Authenticate is not built")
	require.Equal(t, "Dict", ce.Setting)

	get := func(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		return rec
	}
	for name, h := range map[string]func() (http.Handler, error){
		"dict": func() (http.Handler, error) { return eng.DictGateway(web.DictGatewayConfig{Authenticate: anyone}) },
		"sifen": func() (http.Handler, error) {
			return eng.SifenGateway(web.SifenGatewayConfig{Env: sifen.EnvTest, Authenticate: anyone})
		},
	} {
		t.Run(name, func(t *testing.T) {
			gateway, err := h()
			require.NoError(t, err)
			for _, path := range []string{"/metrics", "/healthz", "/readyz", "/livez"} {
				rec := get(t, gateway, path)
				require.NotEqual(t, http.StatusOK, rec.Code, "%s on the gateway: %s", path, rec.Body.String())
				require.NotContains(t, rec.Body.String(), "balde_throttle", "%s on the gateway", path)
			}
		})
	}

	ops, err := eng.OpsHandler("")
	require.NoError(t, err)
	for _, path := range []string{"/healthz", "/readyz", "/livez"} {
		require.Equal(t, http.StatusOK, get(t, ops, path).Code, path)
	}
	require.Contains(t, get(t, ops, "/metrics").Body.String(), "go_goroutines", "a process of its own: the runtime collectors")
	for _, path := range []string{"/api/v2/entries/x", "/admin/buckets", "/"} {
		require.Equal(t, http.StatusNotFound, get(t, ops, path).Code, path)
	}
	guarded, err := eng.OpsHandler("s3cret")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, get(t, guarded, "/metrics").Code, "the token protects /metrics")
	require.Equal(t, http.StatusOK, get(t, guarded, "/livez").Code, "not the probes")
}
