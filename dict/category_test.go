package dict_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// The DICT moves the participant from A to H. Within one refill period
// every process applies H: the first to look up after the period asks the
// DICT (one GET /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN, POLICIES_READ)
// and records the answer's <Category>; the other reads the recorded one;
// /policies/ reports H. Before, a process kept a learned category for 24 h
// and ignored <Category> in the answers it fetched.
func TestCategoryChangeIsFollowedByEveryProcess(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, engine, envConfig{SimCategory: "A"})
		// A second process on the same database: its own catalog.
		catalog2 := dict.NewCatalog("prod")
		require.NoError(t, catalog2.SetCategory("A"))
		lim2, err := throttle.NewLimiter(e.store, catalog2, throttle.Config{Clock: e.clock.Now})
		require.NoError(t, err)
		client2, err := dict.NewClient(dict.ClientConfig{BaseURL: e.simURL, Participant: ispb, Limiter: lim2, Catalog: catalog2,
			Records: e.records, Logger: quiet})
		require.NoError(t, err)
		learned, err := e.client.LearnCategory(e.ctx, dict.CategoryFresh)
		require.NoError(t, err)
		require.Equal(t, "A", learned.Category)

		require.NoError(t, e.sim.SetCategory("H"))
		require.NoError(t, e.lookup(knownPhone, makeCPF(1)), "within the period nothing is asked")
		require.Equal(t, "A", e.catalog.Category())
		require.Equal(t, int64(0), e.sent(dict.OpGetBucketState))

		e.advance(dict.DefaultCategoryRecheck)
		require.NoError(t, e.lookup(knownPhone, makeCPF(2)))
		require.Equal(t, "H", e.catalog.Category(), "learned from the answer's <Category>")
		require.Equal(t, int64(1), e.stats().Count(dict.OpGetBucketState, http.StatusOK))
		cat, _, ok, err := e.records.LearnedCategory(e.ctx, "prod", ispb)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "H", cat, "recorded for the other processes and the CLI")
		require.Equal(t, e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb),
			e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb), "the participant's bucket synced to the DICT's")

		res, err := client2.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(3)})
		require.NoError(t, err)
		require.True(t, res.Decision.Allowed)
		require.Equal(t, "H", catalog2.Category(), "read from the records: no second GET /policies/")
		require.Equal(t, int64(1), e.sent(dict.OpGetBucketState))

		for _, c := range []*dict.Client{e.client, client2} {
			list, err := c.LocalPolicies(e.ctx)
			require.NoError(t, err)
			require.Equal(t, "H", list.Category)
			one, err := c.LocalPolicy(e.ctx, dict.PolicyEntriesReadParticipantAntiscan)
			require.NoError(t, err)
			require.Equal(t, "H", one.Category)
			require.Equal(t, int64(50), one.Policy.Capacity)
		}
	})
}

// Before the category is learned the mirror applies the strictest (H), and
// /policies/ says so: never an empty <Category>.
func TestPoliciesReportTheCategoryInEffect(t *testing.T) {
	catalog := dict.NewCatalog("prod")
	require.Equal(t, "", catalog.Category())
	require.Equal(t, "H", catalog.CategoryInEffect())
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(time.Now), catalog, throttle.Config{})
	require.NoError(t, err)
	list, err := dict.ListPolicies(t.Context(), lim, catalog, ispb)
	require.NoError(t, err)
	require.Equal(t, "H", list.Category)
	one, err := dict.GetPolicy(t.Context(), lim, catalog, ispb, dict.PolicyEntriesReadParticipantAntiscan)
	require.NoError(t, err)
	require.Equal(t, "H", one.Category)
	require.Equal(t, int64(50), one.Policy.Capacity)
	require.NoError(t, catalog.SetCategory("F"))
	one, err = dict.GetPolicy(t.Context(), lim, catalog, ispb, dict.PolicyEntriesReadParticipantAntiscan)
	require.NoError(t, err)
	require.Equal(t, "F", one.Category)
	require.Equal(t, int64(500), one.Policy.Capacity)
}
