package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// Issue 20: the periodic prune deleted a full idle bucket's row, and the
// bucket page then found none of its ledger rows although they were within
// the retention (seed 003's 30-day audit trail). After a prune the page
// lists every ledger row within the retention; past it, rows and bucket go.
func TestAdminBucketPageListsLedgerAfterPrune(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, withStore(engine))
		k := key("P", "payer-1")
		e.take(k, 4)
		e.clock.Advance(time.Second)
		e.take(k, 2)
		e.clock.Advance(time.Hour) // full again: idle

		ledgerRows := func() []string {
			resp := e.get("/admin/buckets/P/prod/payer-1", asAdmin)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var deltas []string
			document(t, resp).Find("table.ledger tbody tr td:nth-child(3)").Each(func(_ int, s *goquery.Selection) {
				deltas = append(deltas, s.Text())
			})
			return deltas
		}
		require.Equal(t, []string{"-2", "-4"}, ledgerRows())

		res, err := e.limiter.Prune(context.Background(), throttle.PruneOptions{})
		require.NoError(t, err)
		require.Equal(t, throttle.PruneResult{}, res, "the idle row stays while its ledger is within the retention")
		require.Equal(t, []string{"-2", "-4"}, ledgerRows())

		e.clock.Advance(throttle.DefaultRetention)
		res, err = e.limiter.Prune(context.Background(), throttle.PruneOptions{})
		require.NoError(t, err)
		require.Equal(t, throttle.PruneResult{LedgerRows: 2, Buckets: 1}, res)
		require.Empty(t, ledgerRows())
	})
}

// Issue 20: the list's "Cooldown / block" cell was empty for an empty or
// negative bucket; only the bucket page knew when it admits again. The
// list says it, from the same BucketState.RetryAfter as the page.
func TestAdminBucketsListSaysWhenAnEmptyBucketAdmitsAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.take(key("P", "neg"), 10)
	_, err := e.limiter.Adjust(ctx, throttle.Adjustment{Key: key("P", "neg"), Delta: -5, Reason: throttle.LedgerPenalty})
	require.NoError(t, err)
	e.take(key("P", "empty"), 10)
	e.take(key("P", "half"), 5)
	e.clock.Advance(3 * time.Second)

	for _, tt := range []struct{ id, want string }{
		{"neg", "refills in 33s"},  // 6 tokens at one per 6 s, 3 s of it gone
		{"empty", "refills in 3s"}, // one token: 6 s, 3 s gone
		{"half", ""},               // admits now
	} {
		t.Run(tt.id, func(t *testing.T) {
			st, err := e.limiter.State(ctx, key("P", tt.id))
			require.NoError(t, err)
			if tt.want != "" {
				require.Equal(t, tt.want, "refills in "+view.FormatWait(st.RetryAfter), "the state the bucket page shows")
			}
			doc := document(t, e.get("/admin/buckets", asAdmin))
			require.Equal(t, tt.want, row(t, doc, tt.id)["Cooldown / block"].Text())
		})
	}
}
