package dict_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// A Transport and a Client built without a Logger log nowhere: not to the
// process's default logger, which belongs to the application. A remote
// 429 (which they log as a warning) goes through both.
func TestBuiltWithoutALoggerLogsNowhere(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	remote429 := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}},
			Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})

	client := &http.Client{Transport: &dict.Transport{Base: remote429, Meter: dict.Meter{Limiter: lim, Catalog: catalog}, Participant: ispb}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/api/v2/entries/"+knownEmail, nil)
	require.NoError(t, err)
	req.Header.Set(dict.HeaderPayerID, cpfPF)
	req.Header.Set(dict.HeaderEndToEndID, "E12345678202601020304abcdefghij1")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	clock.Advance(time.Minute) // the first 429's Retry-After
	c, err := dict.NewClient(dict.ClientConfig{BaseURL: "http://127.0.0.1:1", Participant: ispb, Limiter: lim, Catalog: catalog,
		HTTPClient: &http.Client{Transport: remote429}, CategoryRecheck: -1})
	require.NoError(t, err)
	_, err = c.GetEntry(ctx, dict.LookupRequest{Key: knownEmail, PayerID: cnpjPJ})
	var remote *dict.RemoteError
	require.ErrorAs(t, err, &remote)

	require.Empty(t, buf.String(), "logged to slog.Default()")
}
