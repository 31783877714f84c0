package dict_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// TestTransportThrottlesAPSPsClient: a PSP's own client through
// dict.Transport is charged, refused without sending, and recorded for
// payment credits, exactly as dict.Client.
func TestTransportThrottlesAPSPsClient(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{SimCategory: "H"})
	var sent int
	counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return http.DefaultTransport.RoundTrip(r)
	})
	client := &http.Client{Transport: &dict.Transport{Base: counting, Meter: dict.Meter{Limiter: e.limiter, Catalog: e.catalog},
		Participant: ispb, Records: e.records, Logger: quiet}}
	get := func(path string, hdr map[string]string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, e.simURL+path, nil)
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return client.Do(req)
	}
	e2e := "E12345678202601020304abcdefghij1"
	resp, err := get("/api/v2/entries/"+url.PathEscape(knownEmail), map[string]string{dict.HeaderPayerID: cpfPF, dict.HeaderEndToEndID: e2e})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(99), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
	l, err := e.records.FindLookup(e.ctx, e2e)
	require.NoError(t, err, "recorded for the payment credit")
	require.Equal(t, http.StatusOK, l.Status)

	// A listing with a role is charged to the role's policy.
	resp, err = get("/api/v2/claims/?Participant="+ispb+"&IsDonor=true", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, int64(199), e.tokens(dict.PolicyClaimsListWithRole, ispb))
	require.Equal(t, int64(50), e.tokens(dict.PolicyClaimsListWithoutRole, ispb))

	// Bad input and unknown operations are not sent.
	before := sent
	_, err = get("/api/v2/entries/"+url.PathEscape(knownEmail), map[string]string{dict.HeaderPayerID: "123", dict.HeaderEndToEndID: e2e})
	require.ErrorIs(t, err, dict.ErrInvalidPayerID)
	_, err = get("/api/v2/nothing", nil)
	require.ErrorContains(t, err, "not a DICT operation")

	// An empty bucket: nothing is sent and no response is made up; the
	// refusal is a *throttle.RefusedError carrying the limiter's Decision,
	// through http.Client's own wrapping (docs/decisions/0130).
	_, err = e.limiter.Take(e.ctx, "", throttle.Charge{Key: e.catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF), Cost: 99})
	require.NoError(t, err)
	resp, err = get("/api/v2/entries/"+url.PathEscape(knownEmail), map[string]string{dict.HeaderPayerID: cpfPF, dict.HeaderEndToEndID: e2e})
	require.Nil(t, resp, "no response: a refusal is not an answer of the DICT")
	var refused *throttle.RefusedError
	require.ErrorAs(t, err, &refused)
	d := refused.Decision
	require.False(t, d.Allowed)
	require.Equal(t, e.catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF), d.Key)
	require.Equal(t, throttle.ReasonEmpty, d.Reason)
	require.Equal(t, time.Minute, d.RetryAfter, "a PF payer refills 2 a minute")
	require.ErrorContains(t, err, "dict getEntry refused locally: ENTRIES_READ_USER_ANTISCAN/prod/"+cpfPF+" empty, retry after 1m0s")
	require.Equal(t, before, sent, "nothing sent")
}

// TestListClaimsFilters: the query carries what the spec's polling needs.
func TestListClaimsFilters(t *testing.T) {
	f := &fakeDICT{status: http.StatusOK, body: `<ListClaimsResponse><HasMoreElements>false</HasMoreElements><Claims></Claims></ListClaimsResponse>`}
	hs := httptest.NewServer(f)
	defer hs.Close()
	e := newClientEnv(t, hs.URL, nil)
	_, err := e.client.ListClaims(context.Background(), dict.ClaimsFilter{IsClaimer: true, Status: []string{"OPEN", "WAITING_RESOLUTION"},
		Type: "PORTABILITY", ModifiedAfter: e.clock.Now(), Limit: 100})
	require.NoError(t, err)
	q := f.last.URL.Query()
	require.Equal(t, []string{"OPEN", "WAITING_RESOLUTION"}, q["Status"])
	require.Equal(t, "PORTABILITY", q.Get("Type"))
	require.Equal(t, "true", q.Get("IsClaimer"))
	require.True(t, strings.HasSuffix(q.Get("ModifiedAfter"), "Z"))
	require.Equal(t, int64(199), e.state(t, dict.PolicyClaimsListWithRole, ispb).Tokens)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
