package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A lookup refused locally reaches the dict-lookup report as the
// limiter's Decision: the plain line and the JSON record name its bucket,
// reason and exact wait (300 ms), and nothing was sent.
func TestDictLookupReportsTheLimitersRefusal(t *testing.T) {
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("sent: %s %s", r.Method, r.URL)
		return nil, http.ErrHandlerTimeout
	})
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: "http://127.0.0.1:1", Participant: "12345678", Limiter: lim, Catalog: catalog,
		HTTPClient: &http.Client{Transport: base}, CategoryRecheck: -1})
	require.NoError(t, err)
	const payer = "11144477735"
	bucket := catalog.Key(dict.PolicyEntriesReadUserAntiscan, payer)
	_, err = lim.Take(ctx, "", throttle.Charge{Key: bucket, Cost: 100})
	require.NoError(t, err)
	clock.Advance(time.Minute - 300*time.Millisecond)

	reqs := []dict.LookupRequest{{Key: "a@example.com", PayerID: payer}}
	run := func(mode report.Mode) string {
		var out bytes.Buffer
		rep := report.New(&out, mode, len(reqs), "dict-lookup", report.NewClock(clock.Now, nil), nil)
		lookup := &report.DictLookup{Reporter: rep}
		batch := dict.Batch{Client: client, Progress: lookup.Progress}
		sum, err := lookup.Finish(ctx, len(reqs), batch.Run(ctx, reqs, lookup.Print))
		require.NoError(t, err)
		require.Equal(t, 1, sum.Blocked)
		return out.String()
	}

	line := strings.SplitN(run(report.Plain), "\n", 2)[0]
	require.Equal(t, `blocked a@example.com payer=`+payer+` status=0 reason=empty retry_after=300ms "refused locally by `+bucket.String()+`, not sent"`, line)

	var rec dictlookup.LookupRecord
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(run(report.JSON), "\n", 2)[0]), &rec))
	require.Equal(t, dictlookup.LookupBlocked, rec.Result)
	require.Equal(t, "empty", rec.Reason)
	require.Equal(t, 0.3, rec.RetryAfterS)
	require.Equal(t, "refused locally by "+bucket.String()+", not sent", rec.Message)
}

// Ctrl-C 12 s into a lookup's 30 s wait: the summary says it waited 12 s,
// not 0 s (a wait cut short was not counted).
func TestDictLookupCountsAnInterruptedWait(t *testing.T) {
	clock := throttle.NewManualClock(throttletest.Epoch)
	var out bytes.Buffer
	rep := report.New(&out, report.Plain, 1, "dict-lookup", report.NewClock(clock.Now, nil), nil)
	lookup := &report.DictLookup{Reporter: rep, Wait: true}
	req := dict.LookupRequest{Key: "a@example.com", PayerID: "11144477735"}
	refused := throttle.Decision{Key: dict.NewCatalog("prod").Key(dict.PolicyEntriesReadUserAntiscan, req.PayerID), RetryAfter: 30 * time.Second}
	lookup.Progress(dict.BatchEvent{Kind: dict.BatchWaiting, Index: 0, Request: req, Decision: refused, Wait: 30 * time.Second})
	clock.Advance(12 * time.Second)
	res := dict.BatchResult{Index: 0, Request: req, Interrupted: true}
	res.Decision = refused
	require.NoError(t, lookup.Print(res))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum, err := lookup.Finish(ctx, 1, nil)
	require.NoError(t, err)
	require.Equal(t, 12.0, sum.WaitS, "%s", out.String())
	require.Contains(t, out.String(), "; waited 12s")
}
