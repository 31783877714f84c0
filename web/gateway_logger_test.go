package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// Gateways built without a Logger log nowhere: a server error they answer
// (the DICT unreachable, a SIFEN service not served) reaches the client,
// not the process's default logger, which belongs to the application.
func TestGatewaysBuiltWithoutALoggerLogNowhere(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	clock := throttle.NewManualClock(throttletest.Epoch)
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	dg, err := web.NewDictGateway(web.DictGatewayConfig{Target: "http://127.0.0.1:1", Participant: gatewayISPB,
		Meter: dict.Meter{Limiter: lim, Catalog: catalog}, Authenticate: anyClient})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/api/v2/policies/", nil)
	rec := httptest.NewRecorder()
	dg.ServeHTTP(rec, req)
	require.Equal(t, http.StatusBadGateway, rec.Code, "%s", rec.Body)

	w := newSifenGatewayWorld(t, sqlstore.SQLite, -1)
	sg, err := web.NewSifenGateway(web.SifenGatewayConfig{Sender: w.sender, Env: sifen.EnvTest, Authenticate: anyClient})
	require.NoError(t, err)
	rec = httptest.NewRecorder()
	sg.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, sifen.ConsultaRUCPath, bytes.NewReader(consultaRUC("80069563"))))
	require.Equal(t, http.StatusNotImplemented, rec.Code, "%s", rec.Body)

	require.Empty(t, buf.String(), "logged to slog.Default()")
}
