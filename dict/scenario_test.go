package dict_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// A PF payer scanning unknown EMAIL keys spends 20 tokens per 404 from a
// bucket of 100: the mirror stops the sixth lookup, and the DICT never has
// to answer 429.
func TestPFScanIsStoppedLocallyAfterFive(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{})
		for i := range 5 {
			requireNotFound(t, e.lookup(unknownEmail(i), cpfPF))
		}
		refused := requireRefused(t, e.lookup(unknownEmail(5), cpfPF))
		require.Equal(t, e.catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF), refused.Decision.Key)
		require.Equal(t, throttle.ReasonEmpty, refused.Decision.Reason)
		require.Equal(t, time.Minute, refused.Decision.RetryAfter, "2 tokens per minute, stepwise")

		st := e.stats()
		require.Equal(t, int64(5), st.Count(dict.OpGetEntry, http.StatusNotFound))
		require.Equal(t, int64(5), e.sent(dict.OpGetEntry), "the sixth lookup was never sent")
		require.Equal(t, int64(0), st.Total(http.StatusTooManyRequests))

		// Both sides agree: payer at 0, participant at 50000 - 5*3.
		require.Equal(t, int64(0), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		require.Equal(t, int64(0), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		remote, err := e.client.GetBucketState(e.ctx, dict.PolicyEntriesReadParticipantAntiscan)
		require.NoError(t, err)
		require.Equal(t, int64(50000-15), remote.Response.Policy.AvailableTokens)
		require.Equal(t, int64(50000-15), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

		// The V2 bucket (CPF, CNPJ, EVP keys) is another bucket.
		r, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownEVP, PayerID: cpfPF})
		require.NoError(t, err)
		require.Equal(t, knownEVP, r.Response.Entry.Key)
	})
}

// A PJ payer's bucket holds 1000 tokens: 50 lookups of unknown keys.
func TestPJScanIsStoppedLocallyAfterFifty(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{})
		for i := range 50 {
			requireNotFound(t, e.lookup(unknownEVP(i), cnpjPJ))
		}
		refused := requireRefused(t, e.lookup(unknownEVP(50), cnpjPJ))
		require.Equal(t, e.catalog.Key(dict.PolicyEntriesReadUserAntiscanV2, cnpjPJ), refused.Decision.Key)
		require.Equal(t, int64(1000), refused.Decision.Limit)
		require.Equal(t, time.Minute, refused.Decision.RetryAfter, "20 tokens per minute, stepwise")
		require.Equal(t, int64(50), e.sent(dict.OpGetEntry))
		require.Equal(t, int64(0), e.stats().Total(http.StatusTooManyRequests))

		// A minute later 20 tokens are back: exactly one more 404.
		e.advance(time.Minute)
		requireNotFound(t, e.lookup(unknownEVP(51), cnpjPJ))
		requireRefused(t, e.lookup(unknownEVP(52), cnpjPJ))
		require.Equal(t, int64(0), e.stats().Total(http.StatusTooManyRequests))
	})
}

// A category H participant (capacity 50, 2/min) shared by many payers:
// exactly 50 lookups, then the participant's bucket refuses, whoever asks.
func TestCategoryHParticipantIsExhaustedExactly(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{SimCategory: "H"})
		for i := range 50 {
			_, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(i)})
			require.NoError(t, err, "payer %d", i)
		}
		refused := requireRefused(t, e.lookup(knownPhone, makeCPF(50)))
		require.Equal(t, e.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb), refused.Decision.Key)
		require.Equal(t, int64(50), refused.Decision.Limit)
		require.Equal(t, time.Minute, refused.Decision.RetryAfter)
		// A payer with tokens of its own is refused all the same.
		requireRefused(t, e.lookup(knownEmail, cnpjPJ))

		// Stepwise: nothing after 59 s, 2 lookups after a minute.
		e.advance(59 * time.Second)
		requireRefused(t, e.lookup(knownPhone, makeCPF(51)))
		e.advance(time.Second)
		require.NoError(t, e.lookup(knownPhone, makeCPF(51)))
		require.NoError(t, e.lookup(knownPhone, makeCPF(52)))
		requireRefused(t, e.lookup(knownPhone, makeCPF(53)))

		st := e.stats()
		require.Equal(t, int64(52), st.Count(dict.OpGetEntry, http.StatusOK))
		require.Equal(t, int64(52), e.sent(dict.OpGetEntry))
		require.Equal(t, int64(0), st.Total(http.StatusTooManyRequests))
		require.Equal(t, int64(0), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))
	})
}

// A payment order with the EndToEndId of a lookup gives the payer 1 token
// (PF) and the participant 1, once.
func TestPaymentCreditRestoresLookupsOnce(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{})
		// 4 × 404 (80 tokens) and 19 × 200 leave the payer 1 token.
		for i := range 4 {
			requireNotFound(t, e.lookup(unknownEmail(i), cpfPF))
		}
		notFound, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: unknownEVP(0), PayerID: otherCPF})
		requireNotFound(t, err)
		for range 19 {
			require.NoError(t, e.lookup(knownPhone, cpfPF))
		}
		paid, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
		require.NoError(t, err)
		require.Equal(t, int64(0), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		requireRefused(t, e.lookup(knownPhone, cpfPF))
		participant := e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb)

		// The payment is sent: the SPI tells the DICT, the app its mirror.
		credit, err := e.client.CreditPayment(e.ctx, paid.EndToEndID)
		require.NoError(t, err)
		require.False(t, credit.Duplicate)
		require.Equal(t, []int64{1, 1}, []int64{credit.Adjusted[0].Applied, credit.Adjusted[1].Applied})
		remote := e.pay(paid.EndToEndID)
		require.False(t, remote.Duplicate)
		require.Equal(t, int64(1), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		require.Equal(t, participant+1, e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

		require.NoError(t, e.lookup(knownPhone, cpfPF), "the credit buys one more lookup")
		requireRefused(t, e.lookup(knownPhone, cpfPF))

		// The same payment again changes nothing, on either side.
		credit, err = e.client.CreditPayment(e.ctx, paid.EndToEndID)
		require.NoError(t, err)
		require.True(t, credit.Duplicate)
		require.True(t, e.pay(paid.EndToEndID).Duplicate)
		requireRefused(t, e.lookup(knownPhone, cpfPF))
		require.Equal(t, int64(0), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))

		l, err := e.records.FindLookup(e.ctx, paid.EndToEndID)
		require.NoError(t, err)
		require.Equal(t, e.clock.Now(), l.PaidAt)

		_, err = e.client.CreditPayment(e.ctx, notFound.EndToEndID)
		require.ErrorIs(t, err, dict.ErrNotPayable)
		_, err = e.client.CreditPayment(e.ctx, "E12345678202601020304ab3Cd5Ef7Gh")
		require.ErrorIs(t, err, dict.ErrUnknownEndToEndID)
		_, err = e.client.CreditPayment(e.ctx, "E123")
		require.ErrorIs(t, err, dict.ErrInvalidEndToEndID)
		require.Equal(t, int64(0), e.stats().Total(http.StatusTooManyRequests))
	})
}

// A PJ payment credits 2 to the payer, capped at the capacity.
func TestPaymentCreditPJIsCapped(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	r, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: cnpjPJ})
	require.NoError(t, err)
	require.Equal(t, int64(999), e.tokens(dict.PolicyEntriesReadUserAntiscan, cnpjPJ))
	credit, err := e.client.CreditPayment(e.ctx, r.EndToEndID)
	require.NoError(t, err)
	require.Equal(t, int64(1), credit.Adjusted[0].Applied, "+2 capped at 1000")
	require.Equal(t, int64(1000), e.tokens(dict.PolicyEntriesReadUserAntiscan, cnpjPJ))
}

// The manual's example: a PF payer with 5 tokens whose lookup returns 404
// is at -15, and can look up again only after 8 minutes (16 tokens at 2
// per minute).
func TestManualExampleMinus15For8Minutes(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{})
		for i := range 4 {
			requireNotFound(t, e.lookup(unknownEmail(i), cpfPF))
		}
		for range 15 {
			require.NoError(t, e.lookup(knownPhone, cpfPF))
		}
		require.Equal(t, int64(5), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		requireNotFound(t, e.lookup(unknownEmail(4), cpfPF))
		require.Equal(t, int64(-15), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		require.Equal(t, int64(-15), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))

		refused := requireRefused(t, e.lookup(knownPhone, cpfPF))
		require.Equal(t, 8*time.Minute, refused.Decision.RetryAfter)

		e.advance(8*time.Minute - time.Second)
		refused = requireRefused(t, e.lookup(knownPhone, cpfPF))
		require.Equal(t, time.Second, refused.Decision.RetryAfter)
		// The DICT agrees: a request that bypasses the mirror gets a 429
		// with Retry-After 1.
		status, retryAfter := e.rawLookup(knownPhone, cpfPF)
		require.Equal(t, http.StatusTooManyRequests, status)
		require.Equal(t, "1", retryAfter)

		e.advance(time.Second)
		require.NoError(t, e.lookup(knownPhone, cpfPF))
		require.Equal(t, int64(0), e.tokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		require.Equal(t, int64(0), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, cpfPF))
		require.Equal(t, int64(1), e.stats().Total(http.StatusTooManyRequests), "only the request that bypassed the mirror")
	})
}

// rawLookup sends a getEntry straight to the simulator, bypassing the
// mirror, and returns the status and Retry-After.
func (e *env) rawLookup(key, payer string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.simURL+dict.APIPrefix+"/entries/"+key, nil)
	require.NoError(e.t, err)
	e2e, err := dict.NewEndToEndID(ispb, e.clock.Now())
	require.NoError(e.t, err)
	req.Header.Set(dict.HeaderRequestingParticipant, ispb)
	req.Header.Set(dict.HeaderPayerID, payer)
	req.Header.Set(dict.HeaderEndToEndID, e2e)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// A mirror that believes the participant is category A while the DICT has
// it in H is more generous than the DICT: the 51st lookup gets a remote
// 429. Its problem names no bucket: the client asks the DICT for the
// participant's (GET /policies/{policy}), finds it empty, syncs and blocks
// it, leaves the payer as the DICT has it, learns category H from the
// answer, and sends nothing more until it refills.
func TestDesynchronisedMirrorCorrectsItselfOn429(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{SimCategory: "H", LocalCategory: "A"})
		for i := range 50 {
			require.NoError(t, e.lookup(knownPhone, makeCPF(i)))
		}
		require.Equal(t, int64(49950), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

		_, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(50)})
		var remote *dict.RemoteError
		require.ErrorAs(t, err, &remote)
		require.Equal(t, http.StatusTooManyRequests, remote.Status)
		require.Equal(t, 30*time.Second, remote.RetryAfter, "the DICT refills continuously: a token every 30 s")
		require.Equal(t, dict.ProblemRateLimited, remote.Problem.TypeName())

		// The participant's bucket was the empty one: it is synced to the
		// DICT's 0 and blocked for Retry-After; the payer keeps what the
		// DICT says it has (before, it was zeroed and blocked).
		require.Equal(t, int64(1), e.stats().Count(dict.OpGetBucketState, http.StatusOK))
		payer, err := e.limiter.State(e.ctx, e.catalog.Key(dict.PolicyEntriesReadUserAntiscan, makeCPF(50)))
		require.NoError(t, err)
		require.Equal(t, e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, makeCPF(50)), payer.Tokens)
		require.Equal(t, int64(100), payer.Tokens)
		require.Equal(t, time.Duration(0), payer.BlockLeft)
		participant, err := e.limiter.State(e.ctx, e.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb))
		require.NoError(t, err)
		require.Equal(t, int64(0), participant.Tokens, "synced from GET /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN")
		require.Equal(t, 30*time.Second, participant.BlockLeft)
		require.Equal(t, "H", e.catalog.Category(), "learned from the answer's <Category>")

		// Nothing is sent while the participant's bucket is empty.
		refused := requireRefused(t, e.lookup(knownPhone, makeCPF(51)))
		require.Equal(t, throttle.ReasonEmpty, refused.Decision.Reason)
		require.Equal(t, dict.PolicyEntriesReadParticipantAntiscan, refused.Decision.Key.Policy)
		require.Equal(t, int64(51), e.sent(dict.OpGetEntry))

		e.advance(time.Minute)
		require.NoError(t, e.lookup(knownPhone, makeCPF(51)), "the DICT refilled 2 tokens")
		require.Equal(t, int64(1), e.stats().Total(http.StatusTooManyRequests))

		// The remote 429 cost the payer nothing at the DICT.
		require.Equal(t, int64(100), e.remoteTokens(dict.PolicyEntriesReadUserAntiscan, makeCPF(50)))
	})
}

// Reconcile reads GET /policies/, records the category the DICT reports,
// and lowers every local bucket the DICT says is emptier.
func TestReconcileLowersLocalBucketsAndRecordsCategory(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{SimCategory: "H", LocalCategory: "A"})
		// Another instance of the app with a mirror of its own spends from
		// the participant's buckets at the DICT.
		otherStore := sqlstoretest.MustOpen(t, engine, e.clock.Now)
		otherLimiter, err := throttle.NewLimiter(otherStore, e.catalog, throttle.Config{Clock: e.clock.Now})
		require.NoError(t, err)
		other := e.newClient(otherLimiter, nil)
		for range 10 {
			_, err := other.CheckKeys(e.ctx, []string{knownPhone, unknownEmail(0)})
			require.NoError(t, err)
		}
		for i := range 3 {
			_, err := other.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(i)})
			require.NoError(t, err)
		}
		require.Equal(t, int64(70), e.tokens(dict.PolicyKeysCheck, ispb))

		res, err := e.client.Reconcile(e.ctx)
		require.NoError(t, err)
		require.Equal(t, "H", res.Category)
		require.True(t, res.CategoryChanged)
		require.Len(t, res.Remote, 28)
		require.Empty(t, res.Unknown)
		require.Empty(t, res.Mismatched, "the catalog of H matches the DICT's")
		lowered := map[string]int64{}
		for _, a := range res.Lowered {
			lowered[a.Key.Policy] = a.Balance
		}
		require.Equal(t, map[string]int64{
			dict.PolicyKeysCheck:                      60,
			dict.PolicyEntriesReadParticipantAntiscan: 47,
		}, lowered)
		require.Equal(t, int64(60), e.tokens(dict.PolicyKeysCheck, ispb))
		require.Equal(t, int64(47), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))
		require.Equal(t, int64(19), e.tokens(dict.PolicyPoliciesList, ispb), "the list itself was charged on both sides")
		require.Equal(t, int64(19), e.remoteTokens(dict.PolicyPoliciesList, ispb))
		require.Equal(t, "H", e.catalog.Category())

		// The category survives a restart (Records), and wins over the
		// configured default.
		fresh := dict.NewCatalog("prod")
		require.NoError(t, fresh.SetCategory("A"))
		lim, err := throttle.NewLimiter(e.store, fresh, throttle.Config{Clock: e.clock.Now})
		require.NoError(t, err)
		restarted, err := dict.NewClient(dict.ClientConfig{BaseURL: e.simURL, Participant: ispb, Limiter: lim, Catalog: fresh, Records: e.records})
		require.NoError(t, err)
		ok, err := restarted.RestoreCategory(e.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "H", fresh.Category())

		// A second reconcile right away lowers nothing.
		res, err = e.client.Reconcile(e.ctx)
		require.NoError(t, err)
		require.False(t, res.CategoryChanged)
		require.Empty(t, res.Lowered)
	})
}

// Reconcile goes through the throttle: POLICIES_LIST holds 20.
func TestReconcileIsLimitedByPoliciesList(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	for i := range 20 {
		_, err := e.client.Reconcile(e.ctx)
		require.NoError(t, err, "reconcile %d", i)
	}
	res, err := e.client.Reconcile(e.ctx)
	require.NoError(t, err, "a refusal is a value")
	require.False(t, res.Decision.Allowed)
	require.Equal(t, dict.PolicyPoliciesList, res.Decision.Key.Policy)
	require.Equal(t, time.Minute, res.Decision.RetryAfter, "6 per minute, stepwise")
	require.Empty(t, res.Remote)
	require.Equal(t, int64(20), e.sent(dict.OpListBucketStates))
	require.Equal(t, int64(0), e.stats().Total(http.StatusTooManyRequests))
	// LearnCategory, whose failure to learn is an error, says why.
	_, err = e.client.LearnCategory(e.ctx, 0)
	requireRefused(t, err)
}

// TestOperationsRefuseWithAValue: every operation of Client returns a
// refusal of the mirror as its result's Decision with a nil error, as
// GetEntry does (decision 0010), and sends nothing. Before, all but GetEntry
// returned it as a *throttle.RefusedError.
func TestOperationsRefuseWithAValue(t *testing.T) {
	entry := dict.Entry{Key: "nova.chave@example.com", KeyType: dict.KeyEmail,
		Account: dict.Account{Participant: ispb, Branch: "0001", AccountNumber: "0001112223", AccountType: "CACC", OpeningDate: dict.Timestamp{Time: time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)}},
		Owner:   dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: cpfPF, Name: "Fulana"}}
	var e *env // each case has its own
	tests := []struct {
		name, policy, op string
		// call returns the result's Decision, whether it has a Response,
		// and the error.
		call func() (throttle.Decision, bool, error)
	}{
		{"CheckKeys", dict.PolicyKeysCheck, dict.OpCheckKeys, func() (throttle.Decision, bool, error) {
			r, err := e.client.CheckKeys(e.ctx, []string{knownPhone})
			return r.Decision, r.Response != nil, err
		}},
		{"CreateEntry", dict.PolicyEntriesWrite, dict.OpCreateEntry, func() (throttle.Decision, bool, error) {
			r, err := e.client.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: entry})
			return r.Decision, r.Response != nil, err
		}},
		{"DeleteEntry", dict.PolicyEntriesWrite, dict.OpDeleteEntry, func() (throttle.Decision, bool, error) {
			r, err := e.client.DeleteEntry(e.ctx, knownEmail, "")
			return r.Decision, r.Response != nil, err
		}},
		{"ListClaims", dict.PolicyClaimsListWithoutRole, dict.OpListClaims, func() (throttle.Decision, bool, error) {
			r, err := e.client.ListClaims(e.ctx, dict.ClaimsFilter{})
			return r.Decision, r.Response != nil, err
		}},
		{"GetBucketState", dict.PolicyPoliciesRead, dict.OpGetBucketState, func() (throttle.Decision, bool, error) {
			r, err := e.client.GetBucketState(e.ctx, dict.PolicyKeysCheck)
			return r.Decision, r.Response != nil, err
		}},
		{"ListBucketStates", dict.PolicyPoliciesList, dict.OpListBucketStates, func() (throttle.Decision, bool, error) {
			r, err := e.client.ListBucketStates(e.ctx)
			return r.Decision, r.Response != nil, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e = newEnv(t, sqlstore.SQLite, envConfig{})
			// Allowed: the answer is there.
			d, answered, err := tt.call()
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.True(t, answered)

			// Empty the bucket: refused, a value, nothing sent.
			key := e.catalog.Key(tt.policy, ispb)
			st, err := e.limiter.State(e.ctx, key)
			require.NoError(t, err)
			_, err = e.limiter.Take(e.ctx, "", throttle.Charge{Key: key, Cost: st.Tokens})
			require.NoError(t, err)
			sent := e.sent(tt.op)
			d, answered, err = tt.call()
			require.NoError(t, err, "a refusal is not an error")
			require.False(t, d.Allowed)
			require.Equal(t, key, d.Key)
			require.Equal(t, throttle.ReasonEmpty, d.Reason)
			require.Positive(t, d.RetryAfter)
			require.False(t, answered)
			require.Equal(t, sent, e.sent(tt.op), "nothing sent")
		})
	}
}

// Bad input is an error before anything is taken or sent.
func TestBadInputTakesAndSendsNothing(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"InvalidPayerCPF", func() error { return e.lookup(knownPhone, "52998224726") }, dict.ErrInvalidCPF},
		{"InvalidPayerCNPJ", func() error { return e.lookup(knownPhone, "11222333000180") }, dict.ErrInvalidCNPJ},
		{"PayerIsAnISPB", func() error { return e.lookup(knownPhone, ispb) }, dict.ErrInvalidPayerID},
		{"InvalidKey", func() error { return e.lookup("Maria@Example.com", cpfPF) }, dict.ErrInvalidEmail},
		{"InvalidCPFKey", func() error { return e.lookup("11111111111", cpfPF) }, dict.ErrInvalidCPF},
		{"InvalidEndToEndID", func() error {
			_, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: cpfPF, EndToEndID: "E1"})
			return err
		}, dict.ErrInvalidEndToEndID},
		{"CheckKeysOneBadKey", func() error {
			_, err := e.client.CheckKeys(e.ctx, []string{knownPhone, "not a key"})
			return err
		}, dict.ErrInvalidKey},
		{"CheckKeysNone", func() error { _, err := e.client.CheckKeys(e.ctx, nil); return err }, dict.ErrInvalidKey},
		{"CreateEntryBadOwner", func() error {
			_, err := e.client.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: dict.Entry{Key: "new@example.com", KeyType: dict.KeyEmail,
				Account: dict.Account{Participant: ispb, AccountNumber: "1", AccountType: "CACC"},
				Owner:   dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: "123", Name: "X"}}})
			return err
		}, dict.ErrInvalidPayerID},
		{"CreateEntryBadISPB", func() error {
			_, err := e.client.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: dict.Entry{Key: "new@example.com", KeyType: dict.KeyEmail,
				Account: dict.Account{Participant: "1234"}, Owner: dict.Owner{TaxIDNumber: cpfPF}}})
			return err
		}, dict.ErrInvalidISPB},
		{"DeleteEntryBadKey", func() error { _, err := e.client.DeleteEntry(e.ctx, "+0", ""); return err }, dict.ErrInvalidPhone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.call(), tt.want)
		})
	}
	n, err := inspect.New(e.limiter, e.store).CountLedger(e.ctx, inspect.LedgerQuery{})
	require.NoError(t, err)
	require.Equal(t, int64(0), n, "no token moved")
	require.Empty(t, e.stats(), "nothing was sent")

	_, err = dict.NewClient(dict.ClientConfig{BaseURL: e.simURL, Participant: "1234567", Limiter: e.limiter, Catalog: e.catalog})
	require.ErrorIs(t, err, dict.ErrInvalidISPB)
	_, err = dict.NewClient(dict.ClientConfig{BaseURL: "ftp://x", Participant: ispb, Limiter: e.limiter, Catalog: e.catalog})
	require.Error(t, err)
}

// The other operations, each charged to its policy on both sides.
func TestOtherOperations(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{})
		checks, err := e.client.CheckKeys(e.ctx, []string{knownPhone, unknownEmail(1)})
		require.NoError(t, err)
		require.True(t, checks.Decision.Allowed)
		require.Equal(t, []dict.KeyCheck{{Key: knownPhone, HasEntry: true}, {Key: unknownEmail(1), HasEntry: false}}, checks.Response.Keys)
		require.Equal(t, int64(69), e.tokens(dict.PolicyKeysCheck, ispb))

		newKey := "nova.chave@example.com"
		created, err := e.client.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: dict.Entry{
			Key: newKey, KeyType: dict.KeyEmail,
			Account: dict.Account{Participant: ispb, Branch: "0001", AccountNumber: "0001112223", AccountType: "CACC", OpeningDate: dict.Timestamp{Time: e.clock.Now()}},
			Owner:   dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: cpfPF, Name: "Fulana"},
		}})
		require.NoError(t, err)
		require.Equal(t, newKey, created.Response.Entry.Key)
		_, err = e.client.CreateEntry(e.ctx, dict.CreateEntryRequest{Entry: created.Response.Entry})
		var remote *dict.RemoteError
		require.ErrorAs(t, err, &remote)
		require.Equal(t, http.StatusConflict, remote.Status)

		r, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: newKey, PayerID: cnpjPJ})
		require.NoError(t, err)
		require.Equal(t, "Fulana", r.Response.Entry.Owner.Name)
		deleted, err := e.client.DeleteEntry(e.ctx, newKey, "")
		require.NoError(t, err)
		require.Equal(t, newKey, deleted.Response.Key)
		requireNotFound(t, e.lookup(newKey, cnpjPJ))
		require.Equal(t, int64(36000-3), e.tokens(dict.PolicyEntriesWrite, ispb), "create, failed create, delete")
		require.Equal(t, int64(36000-3), e.remoteTokens(dict.PolicyEntriesWrite, ispb))

		_, err = e.client.ListClaims(e.ctx, dict.ClaimsFilter{IsDonor: true})
		require.NoError(t, err)
		_, err = e.client.ListClaims(e.ctx, dict.ClaimsFilter{})
		require.NoError(t, err)
		require.Equal(t, int64(199), e.tokens(dict.PolicyClaimsListWithRole, ispb))
		require.Equal(t, int64(49), e.tokens(dict.PolicyClaimsListWithoutRole, ispb))
		require.Equal(t, int64(199), e.remoteTokens(dict.PolicyClaimsListWithRole, ispb))
		require.Equal(t, int64(49), e.remoteTokens(dict.PolicyClaimsListWithoutRole, ispb))

		got, err := e.client.GetBucketState(e.ctx, dict.PolicyClaimsListWithRole)
		require.NoError(t, err)
		require.Equal(t, dict.Policy{AvailableTokens: 199, Capacity: 200, RefillTokens: 40, RefillPeriodSec: 60, Name: dict.PolicyClaimsListWithRole}, got.Response.Policy)
		require.Equal(t, "A", got.Response.Category)
		_, err = e.client.GetBucketState(e.ctx, "NO_SUCH_POLICY")
		require.ErrorAs(t, err, &remote)
		require.Equal(t, http.StatusNotFound, remote.Status)
		require.Equal(t, dict.ProblemNotFound, remote.Problem.TypeName())
		require.Equal(t, int64(198), e.tokens(dict.PolicyPoliciesRead, ispb), "a 404 costs 1 too")
		require.Equal(t, int64(198), e.remoteTokens(dict.PolicyPoliciesRead, ispb))

		// The local mirror in the DICT's format, as the app's /policies/ serves it.
		remoteList, err := e.client.ListBucketStates(e.ctx)
		require.NoError(t, err)
		local, err := e.client.LocalPolicies(e.ctx)
		require.NoError(t, err)
		require.Equal(t, remoteList.Response.Policies, local.Policies, "the mirror is exact")
		one, err := e.client.LocalPolicy(e.ctx, dict.PolicyKeysCheck)
		require.NoError(t, err)
		require.Equal(t, int64(69), one.Policy.AvailableTokens)
		_, err = e.client.LocalPolicy(e.ctx, dict.PolicyEntriesReadUserAntiscan)
		require.ErrorIs(t, err, throttle.ErrUnknownPolicy, "USER policies are not the participant's")
	})
}

// The simulator rejects malformed headers without charging anything.
func TestSimulatorRejectsMalformedRequests(t *testing.T) {
	e := newEnv(t, sqlstore.SQLite, envConfig{})
	e2e, err := dict.NewEndToEndID(ispb, e.clock.Now())
	require.NoError(t, err)
	tests := []struct {
		name, path, participant, payer, e2e string
		want                                int
		wantType                            string
	}{
		{"BadParticipant", "/entries/" + knownPhone, "1234", cpfPF, e2e, 400, dict.ProblemBadRequest},
		{"BadPayer", "/entries/" + knownPhone, ispb, "123", e2e, 400, dict.ProblemBadRequest},
		{"BadEndToEndID", "/entries/" + knownPhone, ispb, cpfPF, "x", 400, dict.ProblemBadRequest},
		{"BadKey", "/entries/not-a-key", ispb, cpfPF, e2e, 400, dict.ProblemBadRequest},
		{"PoliciesBadParticipant", "/policies/", "abc", "", "", 403, dict.ProblemForbidden},
		{"PolicyBadParticipant", "/policies/KEYS_CHECK", "", "", "", 403, dict.ProblemForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, e.simURL+dict.APIPrefix+tt.path, nil)
			require.NoError(t, err)
			req.Header.Set(dict.HeaderRequestingParticipant, tt.participant)
			req.Header.Set(dict.HeaderPayerID, tt.payer)
			req.Header.Set(dict.HeaderEndToEndID, tt.e2e)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tt.want, resp.StatusCode)
			require.Equal(t, dict.ContentTypeProblemXML, resp.Header.Get("Content-Type"))
			var p dict.Problem
			require.NoError(t, dict.Decode(resp.Body, &p))
			require.Equal(t, tt.wantType, p.TypeName())
			require.Equal(t, strconv.Itoa(tt.want), strconv.Itoa(p.Status))
		})
	}
	// Nothing was charged: every bucket of the participant is still full.
	require.Equal(t, int64(50000), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

	// The clock endpoint needs a fake clock and a duration.
	resp, err := http.Post(e.simURL+"/sim/clock?advance=soon", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, err = http.Post(e.simURL+"/sim/payments?endToEndId="+e2e, "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// 80 payers looking up at once in category H (50 tokens, a 404 costs 3)
// against a DICT whose answers take 0.25 s to arrive: the DICT never
// answers 429. (With the old 1-token reservation it drew 9-33.)
func TestCategoryHParticipantConcurrentPayers(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{SimCategory: "H", Latency: 250 * time.Millisecond})
		errs := make(chan error, 80)
		for i := range 80 {
			go func() {
				// Half the payers look up a key with no entry.
				key := knownPhone
				if i%2 == 1 {
					key = unknownEmail(i)
				}
				err := e.lookup(key, makeCPF(i))
				if re := (*dict.RemoteError)(nil); errors.As(err, &re) && re.NotFound() {
					err = nil
				}
				errs <- err
			}()
		}
		var ok, refused int
		for range 80 {
			var err error
			select {
			case err = <-errs:
			case <-time.After(30 * time.Second):
				t.Fatal("a lookup did not end within 30 s")
			}
			var re *throttle.RefusedError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &re):
				require.Equal(t, dict.PolicyEntriesReadParticipantAntiscan, re.Decision.Key.Policy)
				refused++
			default:
				t.Fatalf("lookup: %v", err)
			}
		}
		// Every lookup in flight holds 3 (the worst case) until answered: 17
		// are admitted at once (50 -> 2 -> -1), and the DICT never answers 429.
		require.Equal(t, 80, ok+refused)
		require.GreaterOrEqual(t, ok, 17)
		st := e.stats()
		refunds, err := inspect.New(e.limiter, e.store).CountLedger(e.ctx, inspect.LedgerQuery{Reasons: []throttle.LedgerReason{throttle.LedgerRefund}})
		require.NoError(t, err)
		t.Logf("80 payers: %d answered, %d refused locally, remote 429s: %d, refunds: %d", ok, refused, st.Total(http.StatusTooManyRequests), refunds)
		require.Equal(t, int64(ok), st.Count(dict.OpGetEntry, http.StatusOK)+st.Count(dict.OpGetEntry, http.StatusNotFound))
		require.Equal(t, int64(0), st.Total(http.StatusTooManyRequests))
	})
}
