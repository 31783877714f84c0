package dict_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// flakyStore fails the next `fail` transactions after the first `pass`
// ones, as a database whose connections are killed.
type flakyStore struct {
	throttle.Store
	pass, fail atomic.Int32
}

func (s *flakyStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	if s.pass.Add(-1) >= 0 {
		return s.Store.Update(ctx, keys, credits, apply)
	}
	if s.fail.Add(-1) >= 0 {
		return fmt.Errorf("%w: connection killed", throttle.ErrStoreUnavailable)
	}
	return s.Store.Update(ctx, keys, credits, apply)
}

// TestOutcomeSurvivesAStoreBlip: the outcome of a lookup that reached the
// DICT is never lost to a database blip, and the DICT's answer is returned.
// Before, a failed settle lost the 404's penalty (the mirror stayed 19
// tokens more generous than the DICT) and the caller saw a store error for
// a lookup the DICT had answered. The lookup finds its key (200): the
// settle is a refund of 19 (payer) and 2 (participant) that must land
// through the blip; a 404 would settle nothing (its cost is the hold).
func TestOutcomeSurvivesAStoreBlip(t *testing.T) {
	tests := []struct {
		name string
		fail int32
		// wantPayer and wantParticipant are the balances after the 200
		// (100 and 50 before: category H until learned; 20 and 3 held).
		wantPayer, wantParticipant int64
		// wantLogged: the lost refund is logged with its reference and
		// what stays held.
		wantLogged bool
	}{
		// The settle is retried until it lands: the refund is there.
		{"ShortBlipRefunds", 3, 99, 49, false},
		// The store stays down: the hold (the worst case) stays, the mirror
		// is never more generous than the DICT.
		{"LongOutageKeepsTheHold", 1000, 80, 47, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(&fakeDICT{status: http.StatusOK, body: mustReadFile(t, "testdata/get_entry_response.golden.xml")})
			defer hs.Close()
			clock := throttle.NewManualClock(throttletest.Epoch)
			store := &flakyStore{Store: throttletest.NewMemStore(clock.Now)}
			store.pass.Store(1) // the take
			store.fail.Store(tt.fail)
			catalog := dict.NewCatalog("prod")
			lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
			require.NoError(t, err)
			var logs bytes.Buffer
			client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			require.NoError(t, err)

			res, err := client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
			require.NoError(t, err, "the DICT's answer is returned whatever the store does")
			held := fmt.Sprintf(`ref=%s outcome=200 held="ENTRIES_READ_USER_ANTISCAN/prod/%s=20 ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/%s=3"`,
				res.EndToEndID, cpfPF, ispb)
			require.Equal(t, tt.wantLogged, strings.Contains(logs.String(), held), "%s", logs.String())
			require.True(t, res.Decision.Allowed)
			require.NotNil(t, res.Response)

			store.fail.Store(0)
			st, err := lim.State(context.Background(), catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF))
			require.NoError(t, err)
			require.Equal(t, tt.wantPayer, st.Tokens, "payer")
			st, err = lim.State(context.Background(), catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb))
			require.NoError(t, err)
			require.Equal(t, tt.wantParticipant, st.Tokens, "participant")
		})
	}
}

// hookStore runs after once, right after the transaction number at
// (1-based) has committed, as another process deciding at that moment.
type hookStore struct {
	throttle.Store
	n     atomic.Int32
	at    int32
	after func()
}

func (s *hookStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	err := s.Store.Update(ctx, keys, credits, apply)
	if s.n.Add(1) == s.at {
		s.after()
	}
	return err
}

// TestRemote429LeavesNoGap: on a remote 429 the hold's refund and the sync
// of the empty bucket are one transaction, so a request deciding right
// after the settle sees the bucket empty and blocked. Before, they were two:
// a request between them was admitted on the refunded tokens and sent to a
// DICT that had just said the bucket was empty.
func TestRemote429LeavesNoGap(t *testing.T) {
	hs := httptest.NewServer(&fakeDICT{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "60"},
		body: problemXML(429, "RateLimited", "bucket "+dict.PolicyEntriesReadUserAntiscan+" is empty")})
	defer hs.Close()
	ctx := context.Background()
	clock := throttle.NewManualClock(throttletest.Epoch)
	catalog := dict.NewCatalog("prod")
	payer := catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF)
	store := &hookStore{Store: throttletest.NewMemStore(clock.Now), at: 2} // 1: the hold, 2: the settle
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	var other throttle.Decision
	ran := false
	store.after = func() {
		ran = true
		var err error
		other, err = lim.Take(ctx, "other", throttle.Charge{Key: payer, Cost: 20, Admit: 1})
		require.NoError(t, err)
	}
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog, Logger: quiet})
	require.NoError(t, err)

	_, err = client.GetEntry(ctx, dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
	var re *dict.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusTooManyRequests, re.Status)

	require.True(t, ran, "another request decided right after the settle")
	require.False(t, other.Allowed, "a request right after the settle is refused")
	require.Equal(t, throttle.ReasonBlocked, other.Reason)
	st, err := lim.State(ctx, payer)
	require.NoError(t, err)
	require.Equal(t, int64(0), st.Tokens)
}

func problemXML(status int, typ, detail string) string {
	return fmt.Sprintf(`<problem xmlns="urn:ietf:rfc:7807"><type>https://dict.pi.rsfn.net.br/api/v2/error/%s</type><title>%s</title><status>%d</status><detail>%s</detail></problem>`,
		typ, typ, status, detail)
}

// TestPaymentReachesTheSimulator: the demo's "payment sent" credits the
// simulator too, so the next lookup is not refused remotely. Before, only
// the local mirror was credited.
func TestPaymentReachesTheSimulator(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: e.simURL, Participant: ispb, Limiter: e.limiter, Catalog: e.catalog,
		Records: e.records, Logger: quiet, PaymentNoticeURL: e.simURL + "/sim/payments"})
	require.NoError(t, err)
	res, err := client.GetEntry(e.ctx, dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
	require.NoError(t, err)
	require.Equal(t, int64(99), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
	pc, err := client.CreditPayment(e.ctx, res.EndToEndID)
	require.NoError(t, err)
	require.False(t, pc.Duplicate)
	require.Equal(t, int64(100), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
	require.Equal(t, int64(100), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, cpfPF), "the simulator was credited too")
}

// TestWritesMustBeSigned: a write to a DICT that is not a loopback
// simulator is refused unsigned (nothing taken, nothing sent); a Signer
// signs it.
func TestWritesMustBeSigned(t *testing.T) {
	f := &fakeDICT{status: http.StatusOK, body: `<DeleteEntryResponse><Key>` + knownEmail + `</Key></DeleteEntryResponse>`}
	hs := httptest.NewServer(f)
	defer hs.Close()
	remote := strings.Replace(hs.URL, "127.0.0.1", "dict.example", 1)
	// Route "dict.example" to the test server.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (netConn, error) {
		return (&netDialer{}).DialContext(ctx, network, strings.TrimPrefix(hs.URL, "http://"))
	}}}
	e := newClientEnv(t, remote, hc)
	_, err := e.client.DeleteEntry(context.Background(), knownEmail, "")
	require.ErrorIs(t, err, dict.ErrUnsigned)
	require.Nil(t, f.last, "nothing sent")
	require.Equal(t, int64(36000), e.state(t, dict.PolicyEntriesWrite, ispb).Tokens, "nothing taken")

	signer := signerFunc(func(_ context.Context, op string, body []byte) ([]byte, error) {
		return []byte(strings.Replace(string(body), "<Signature></Signature>", "<Signature>signed "+op+"</Signature>", 1)), nil
	})
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: remote, Participant: ispb, Limiter: e.limiter, Catalog: e.catalog,
		HTTPClient: hc, Logger: quiet, Signer: signer})
	require.NoError(t, err)
	_, err = client.DeleteEntry(context.Background(), knownEmail, "")
	require.NoError(t, err)
	require.NotNil(t, f.last)
}

type signerFunc func(ctx context.Context, op string, body []byte) ([]byte, error)

func (f signerFunc) Sign(ctx context.Context, op string, body []byte) ([]byte, error) {
	return f(ctx, op, body)
}

// TestPoliciesOnTheirOwnHost: GET /policies/ goes to PoliciesURL when set.
func TestPoliciesOnTheirOwnHost(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	api := &fakeDICT{status: http.StatusInternalServerError}
	hs := httptest.NewServer(api)
	defer hs.Close()
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, PoliciesURL: e.simURL + "/api/v1/", Participant: ispb,
		Limiter: e.limiter, Catalog: e.catalog, Logger: quiet})
	require.NoError(t, err)
	_, err = client.ListBucketStates(e.ctx)
	require.Error(t, err, "the simulator serves /api/v2 only: the request went to PoliciesURL")
	require.Nil(t, api.last, "not to the API's host")
	client, err = dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, PoliciesURL: e.simURL, Participant: ispb,
		Limiter: e.limiter, Catalog: e.catalog, Logger: quiet})
	require.NoError(t, err)
	list, err := client.ListBucketStates(e.ctx)
	require.NoError(t, err)
	require.True(t, list.Decision.Allowed)
	require.Equal(t, "A", list.Response.Category)
	require.Nil(t, api.last)
}

// TestRoutesCoverEveryOperation: every operation of the public API
// (OpenAPI 1.8.0) and of seed 001 maps to its policies, and every policy of
// the catalog is reached by some route.
func TestRoutesCoverEveryOperation(t *testing.T) {
	openapi := []struct{ method, path, op string }{
		{"POST", "/entries/", "createEntry"}, {"GET", "/entries/{Key}", "getEntry"}, {"PUT", "/entries/{Key}", "updateEntry"},
		{"GET", "/entries/{Key}/initiator", "getEntryInitiator"}, {"POST", "/entries/{Key}/delete", "deleteEntry"},
		{"POST", "/keys/check", "checkKeys"}, {"POST", "/claims/", "createClaim"}, {"GET", "/claims/", "listClaims"},
		{"GET", "/claims/{ClaimId}", "getClaim"}, {"POST", "/claims/{ClaimId}/acknowledge", "acknowledgeClaim"},
		{"POST", "/claims/{ClaimId}/confirm", "confirmClaim"}, {"POST", "/claims/{ClaimId}/cancel", "cancelClaim"},
		{"POST", "/claims/{ClaimId}/complete", "completeClaim"}, {"POST", "/sync-verifications/", "createSyncVerification"},
		{"POST", "/cids/files/", "createCidSetFile"}, {"GET", "/cids/files/{Id}", "getCidSetFile"},
		{"GET", "/cids/events", "listCidSetEvents"}, {"GET", "/cids/entries/{Cid}", "getEntryByCid"},
		{"POST", "/infraction-reports/", "createInfractionReport"}, {"GET", "/infraction-reports/", "listInfractionReports"},
		{"GET", "/infraction-reports/{InfractionReportId}", "getInfractionReport"},
		{"POST", "/infraction-reports/{InfractionReportId}/acknowledge", "acknowledgeInfractionReport"},
		{"POST", "/infraction-reports/{InfractionReportId}/cancel", "cancelInfractionReport"},
		{"POST", "/infraction-reports/{InfractionReportId}/close", "closeInfractionReport"},
		{"POST", "/refunds/", "createRefund"}, {"GET", "/refunds/", "listRefunds"}, {"GET", "/refunds/{RefundId}", "getRefund"},
		{"POST", "/refunds/{RefundId}/cancel", "cancelRefund"}, {"POST", "/refunds/{RefundId}/close", "closeRefund"},
		{"GET", "/statistics/owner/{TaxIdNumber}", "getPersonStatistics"},
		{"GET", "/policies/", "listBucketStates"}, {"GET", "/policies/{policy}", "getBucketState"},
	}
	for _, o := range openapi {
		path := strings.NewReplacer("{Key}", "x", "{ClaimId}", "c", "{Id}", "1", "{Cid}", "ab", "{InfractionReportId}", "i",
			"{RefundId}", "r", "{TaxIdNumber}", "1", "{policy}", "P").Replace(o.path)
		rt, _, ok := dict.MatchRoute(o.method, "/api/v2"+path)
		require.True(t, ok, "%s %s", o.method, o.path)
		require.Equal(t, o.op, rt.Op, "%s %s", o.method, o.path)
		require.NotEmpty(t, rt.Policies)
	}
	reached := map[string]bool{}
	for _, rt := range dict.Routes() {
		for _, p := range rt.Policies {
			reached[p] = true
		}
	}
	for _, s := range dict.NewCatalog("prod").Specs() {
		require.True(t, reached[s.Name], "no route charges %s", s.Name)
	}
	_, _, ok := dict.MatchRoute("GET", "/api/v2/nothing")
	require.False(t, ok)
}

// TestMatchRouteUnderEveryPrefix: an operation is found under each API
// prefix the DICT serves it from. Before, checkKeys under /api-np/v1 (its
// official home in OpenAPI 1.8.0) was "not a DICT operation".
func TestMatchRouteUnderEveryPrefix(t *testing.T) {
	tests := []struct {
		name, method, path, wantOp string
	}{
		{"SeedV2", "POST", "/api/v2/keys/check", dict.OpCheckKeys},
		{"OfficialNonPublicHost", "POST", "/api-np/v1/keys/check", dict.OpCheckKeys},
		{"NonPublicHostBehindABasePath", "POST", "/dict/api-np/v1/keys/check", dict.OpCheckKeys},
		{"RateLimitHost", "GET", "/api/v1/policies/", dict.OpListBucketStates},
		{"NoPrefix", "GET", "/entries/x", dict.OpGetEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _, ok := dict.MatchRoute(tt.method, tt.path)
			require.True(t, ok, "%s %s", tt.method, tt.path)
			require.Equal(t, tt.wantOp, rt.Op)
		})
	}
	for _, path := range []string{"/api-xx/v1/keys/check", "/api-np/keys/check"} {
		_, _, ok := dict.MatchRoute("POST", path)
		require.False(t, ok, path)
	}
}

// TestCheckKeysAtMost200: CheckKeysRequest has no Signature and at most
// 200 keys.
func TestCheckKeysAtMost200(t *testing.T) {
	f := &fakeDICT{status: http.StatusOK, body: `<CheckKeysResponse><Keys></Keys></CheckKeysResponse>`}
	hs := httptest.NewServer(f)
	defer hs.Close()
	e := newClientEnv(t, hs.URL, nil)
	keys := make([]string, 201)
	for i := range keys {
		keys[i] = knownEmail
	}
	_, err := e.client.CheckKeys(context.Background(), keys)
	require.ErrorIs(t, err, dict.ErrInvalidKey)
	require.Nil(t, f.last, "nothing sent")
	_, err = e.client.CheckKeys(context.Background(), keys[:200])
	require.NoError(t, err)
	body, err := dict.Marshal(&dict.CheckKeysRequest{Keys: keys[:1]})
	require.NoError(t, err)
	require.NotContains(t, string(body), "Signature")
}

// TestDomainPackageHasNoDatabaseDriver: importing dict pulls in no
// database library; the SQL side is dict/dictsql.
func TestDomainPackageHasNoDatabaseDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, driver := range []string{"modernc.org/", "github.com/jackc/pgx", "github.com/golang-migrate", "github.com/jmoiron/sqlx"} {
			require.False(t, strings.HasPrefix(dep, driver), "dict imports %s", dep)
		}
	}
}

type (
	netConn   = net.Conn
	netDialer = net.Dialer
)
