package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// subSecondRefusal empties the payer's bucket (PF: 2 tokens at each minute)
// and moves the clock to 300 ms before its refill: the limiter's Decision
// on the next lookup is "empty" with a wait of 300 ms.
func subSecondRefusal(t *testing.T, lim *throttle.Limiter, clock *throttle.ManualClock, key throttle.Key) throttle.BucketState {
	t.Helper()
	d, err := lim.Take(context.Background(), "", throttle.Charge{Key: key, Cost: 100})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	clock.Advance(time.Minute - 300*time.Millisecond)
	st, err := lim.State(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, 300*time.Millisecond, st.RetryAfter)
	return st
}

// A lookup refused locally reaches the DICT page as the limiter's
// Decision: its reason, bucket and exact wait (decision 0130), a 429 with
// Retry-After of at least 1 s, and nothing sent.
func TestDictPageShowsTheLimitersRefusal(t *testing.T) {
	e := newEnv(t, withDict())
	key := e.catalog.Key(dict.PolicyEntriesReadUserAntiscanV2, payerPF)
	subSecondRefusal(t, e.limiter, e.clock, key)

	resp := e.lookup(keyFound, payerPF)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"), "a wait of 300 ms is announced as 1 s, never 0")
	require.Equal(t, "local", resp.Header.Get(web.HeaderLocalRefusal))
	text := document(t, resp).Find(".banner-text").Text()
	require.Contains(t, text, "the payer's bucket ENTRIES_READ_USER_ANTISCAN_V2 / "+payerPF+" is empty")
	require.Contains(t, text, "retry in 300ms")
	require.Zero(t, e.dictStats(t).Count(dict.OpGetEntry, http.StatusOK), "nothing was sent")
}

// A lookup refused locally reaches a plain HTTP client of the DICT gateway
// as the DICT's 429, written from the limiter's Decision: the bucket, the
// reason and the exact wait in the problem, Retry-After of at least 1 s
// for a sub-second wait, the policy in a violation, and nothing sent.
func TestDictGatewayAnswersTheLimitersRefusal(t *testing.T) {
	w := newGatewayWorld(t, sqlstore.SQLite)
	g := w.newGateway(t)
	const payer = "11144477735"
	key := w.catalog.Key(dict.PolicyEntriesReadUserAntiscan, payer)
	subSecondRefusal(t, g.limiter, w.clock, key)

	resp, body := plainLookup(t, g.URL, "maria.souza@example.com", payer, e2eID(1))
	requireDictRateLimited(t, resp, body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"), "a wait of 300 ms is announced as 1 s, never 0")
	p, err := dict.DecodeProblem(body)
	require.NoError(t, err)
	require.Contains(t, p.Detail, "bucket "+key.String()+" is empty, retry in 300ms")
	require.True(t, p.Names(key.Policy), "the problem names the empty policy")
	require.NotEmpty(t, p.CorrelationID)
	require.Empty(t, w.stats(t), "nothing was sent")
}
