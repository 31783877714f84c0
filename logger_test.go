package balde_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/internal/webhook"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// Nothing reaches slog.Default(): an engine opened with every part (the
// DICT client, the SIFEN sender, the inbound limiter, the webhook, the
// admin pages and the DICT gateway served by Serve with the probes) and
// driven through a lookup, a gateway lookup, a send, refusals and a
// store that stops answering logs only to Config.Logger; and parts built
// alone without a logger (a limiter, a webhook) log nowhere
// (docs/decisions/0128). Before, a limiter and a webhook built alone
// logged their fail-open admission and failed post to slog.Default().
func TestNothingReachesTheDefaultLogger(t *testing.T) {
	defaultLog := recordDefault(t)
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
	dictURL, sifenURL := runSims(t, clock)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError) // every alert post fails
	}))
	t.Cleanup(sink.Close)
	db, err := sql.Open("sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "app.db")))
	require.NoError(t, err)
	defer db.Close()
	var appLog lockedBuffer
	sms := throttle.PerMinute("SMS_PROVIDER", 1, 1)
	sms.FailMode = throttle.FailOpen
	ctx := t.Context()
	eng, err := balde.Open(ctx, balde.Config{
		SQLDB: db, Dialect: sqlstore.SQLite, Migrate: true, Clock: clock.Now,
		Logger:       slog.New(slog.NewTextHandler(&appLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Dict:         &balde.DictConfig{BaseURL: dictURL, Participant: "12345678", LearnCategory: true, Simulator: true},
		Sifen:        &balde.SifenConfig{BaseURL: sifenURL},
		Inbound:      &web.InboundConfig{IPLimit: 3, Window: time.Minute, Block: time.Minute},
		Resolvers:    throttle.Resolvers{throttle.Policies{sms.Name: sms}},
		Observer:     web.NewMetrics(),
		AlertWebhook: sink.URL,
		LogSeverity:  true,
		Jobs:         balde.Jobs{SifenPollEvery: 10 * time.Millisecond, SeverityEvery: 10 * time.Millisecond},
	})
	require.NoError(t, err)
	defer eng.Close(context.WithoutCancel(ctx))

	s := eng.NewServer("12345678")
	s.Admin, s.LogRequests = web.Credentials{User: "ops", Password: "pw"}, true
	pages, err := s.Handler()
	require.NoError(t, err)
	defer s.Close()
	gateway, err := eng.DictGateway(web.DictGatewayConfig{Authenticate: func(*http.Request) (string, bool) { return "app", true }})
	require.NoError(t, err)
	ops, err := eng.OpsHandler("")
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", eng.Inbound().Middleware(pages))
	mux.Handle("/api/v2/", eng.Inbound().Middleware(gateway))
	mux.Handle("/livez", ops)
	serveCtx, stop := context.WithCancel(ctx)
	addrs, served := make(chan string, 1), make(chan error, 1)
	go func() { served <- eng.Serve(serveCtx, "127.0.0.1:0", mux, func(a string) { addrs <- a }) }()
	base := "http://" + waitfor.Recv(t, addrs, 20*time.Second, "Serve listening")
	client := &http.Client{Timeout: 20 * time.Second}
	get := func(path string, header map[string]string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("ops", "pw")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	// A lookup through the client and one through the gateway.
	res, err := eng.Dict().GetEntry(ctx, dict.LookupRequest{Key: "+5561988880000", PayerID: "11144477735"})
	require.True(t, res.Decision.Allowed, "sent: %v", err) // the DICT answers 404: no such key
	require.Equal(t, http.StatusNotFound, get("/api/v2/entries/+5561988880000", map[string]string{
		dict.HeaderPayerID: "11144477735", dict.HeaderEndToEndID: "E12345678202601021300abcdefghij1"}), "the DICT's own 404")
	// A send.
	docs, err := eng.Sifen().Import(ctx, sifentest.Lote(sifentest.Docs("80069563", 1, 1)...), sifen.EnvTest)
	require.NoError(t, err)
	out, err := eng.Sifen().Send(ctx, docs[0].ID)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status, out.Message)
	// Refusals: the application's policy (a severity change, logged and
	// posted to a webhook that fails) and the inbound limiter.
	key := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: "+5561988880000"}
	for range 2 {
		_, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
		require.NoError(t, err)
	}
	require.Equal(t, http.StatusOK, get("/admin/buckets", nil))
	require.Equal(t, http.StatusOK, get("/livez", nil))
	codes := []int{get("/nope", nil), get("/nope", nil), get("/nope", nil)}
	require.Contains(t, codes, http.StatusTooManyRequests, "the inbound limiter refused")

	// Parts built alone, without a logger.
	alone, err := throttle.NewLimiter(eng.Store(), throttle.Policies{sms.Name: sms}, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	hook := webhook.New(sink.URL, webhook.Options{})
	hook.Notify(ctx, throttle.SeverityChange{Key: key, From: throttle.SeverityHealthy, To: throttle.SeverityCritical})
	require.NoError(t, hook.Close())
	require.Equal(t, int64(1), hook.Failed(), "the post failed")

	// The store stops answering: the inbound limiter and the application's
	// policy fail open, the jobs fail.
	require.NoError(t, db.Close())
	require.NotEqual(t, http.StatusServiceUnavailable, get("/stats", map[string]string{"X-Forwarded-For": "198.51.100.9"}))
	other := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: "+5561977770000"} // not refused from memory
	d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: other, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.FailOpen)
	d, err = alone.Take(ctx, "", throttle.Charge{Key: other, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.FailOpen)
	clock.Advance(time.Minute) // the jobs run against the closed store

	stop()
	require.NoError(t, waitfor.Recv(t, served, 20*time.Second, "Serve after its context ended"))
	require.Contains(t, appLog.String(), "fail", "the engine's parts logged to the application's logger")
	require.Empty(t, defaultLog.String(), "nothing logged to slog.Default()")
}
