package dict

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// A lookup the mirror refuses reaches the Client's caller as the limiter's
// Decision: the base transport is never called and no response is made up
// on the way (docs/decisions/0130).
func TestClientRefusalIsTheLimitersDecision(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	catalog := NewCatalog("prod")
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("the base transport was called: %s %s", r.Method, r.URL)
		return nil, http.ErrHandlerTimeout
	})
	c, err := NewClient(ClientConfig{BaseURL: "http://127.0.0.1:1", Participant: "12345678", Limiter: lim, Catalog: catalog,
		HTTPClient: &http.Client{Transport: base}})
	require.NoError(t, err)
	const payer = "11144477735"
	payerKey := catalog.Key(PolicyEntriesReadUserAntiscan, payer)
	took, err := lim.Take(ctx, "", throttle.Charge{Key: payerKey, Cost: 100})
	require.NoError(t, err)
	require.True(t, took.Allowed)
	clock.Advance(10 * time.Second)

	// The Client's exchange itself: a refusal is a Decision with no response.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.api+"/entries/a@example.com", nil)
	require.NoError(t, err)
	req.Header.Set(HeaderPayerID, payer)
	req.Header.Set(HeaderEndToEndID, "E12345678202601020304abcdefghij1")
	resp, d, _, err := c.transport.exchange(req)
	require.NoError(t, err)
	require.Nil(t, resp, "no response is built for a request that was not sent")
	want := throttle.Decision{Reason: throttle.ReasonEmpty, Key: payerKey, RetryAfter: 50 * time.Second}
	require.Equal(t, want.Key, d.Key)
	require.Equal(t, want.Reason, d.Reason)
	require.Equal(t, want.RetryAfter, d.RetryAfter, "a PF payer refills 2 tokens at each minute (stepwise); 10 s have passed")

	// And the result of GetEntry carries the same Decision.
	res, err := c.GetEntry(ctx, LookupRequest{Key: "a@example.com", PayerID: payer})
	require.NoError(t, err)
	require.Nil(t, res.Response)
	require.False(t, res.Decision.Allowed)
	require.Equal(t, d.Key, res.Decision.Key)
	require.Equal(t, d.RetryAfter, res.Decision.RetryAfter)
	require.NotEmpty(t, res.EndToEndID)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
