package dict_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// inDoubtStore reports its n-th transaction's COMMIT as in doubt, as
// sqlstore does when the connection dies while committing. With landed the
// change was applied (the answer was lost); without, it was lost too.
type inDoubtStore struct {
	throttle.Store
	n      int32
	landed bool
	calls  atomic.Int32
}

func (s *inDoubtStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	if s.calls.Add(1) != s.n {
		return s.Store.Update(ctx, keys, credits, apply)
	}
	if s.landed {
		if err := s.Store.Update(ctx, keys, credits, apply); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %w: connection lost during COMMIT", throttle.ErrStoreUnavailable, sqlstore.ErrCommitInDoubt)
}

// inDoubtClient is a DICT client of the DICT at srv over an in-memory store
// whose n-th transaction's COMMIT is in doubt (landed or not); it returns
// the client, its limiter and the PF payer's bucket.
func inDoubtClient(t *testing.T, srv http.Handler, n int32, landed bool) (*dict.Client, *throttle.Limiter, throttle.Key) {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := &inDoubtStore{Store: throttletest.NewMemStore(clock.Now), n: n, landed: landed}
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog, Logger: quiet})
	require.NoError(t, err)
	return client, lim, catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF)
}

// TestSettleInDoubtIsNotRepeated: a settle whose COMMIT is in doubt may
// have landed, so it is never run again (decision 0020). Before, the
// transport's retry of store failures ran it again: the refund was applied
// twice and the mirror became more generous than the DICT, which then
// answered 429 (TestStoreFaultsPostgres under the 30 ms kill storm).
func TestSettleInDoubtIsNotRepeated(t *testing.T) {
	// Transactions: 1 drain, 2 hold, 3 settle (landed, answer lost).
	client, lim, payer := inDoubtClient(t, &fakeDICT{status: http.StatusInternalServerError, body: problemXML(500, "InternalServerError", "")}, 3, true)
	d, err := lim.Take(context.Background(), "drain", throttle.Charge{Key: payer, Cost: 50})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	_, err = client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
	require.Error(t, err) // the DICT's 500

	st, err := lim.State(context.Background(), payer)
	require.NoError(t, err)
	require.Equal(t, int64(50), st.Tokens, "the hold (20) refunded once after the 500, not twice")
}

// TestRemote429SyncedWhenTheSettleIsInDoubt: after a remote 429 the refund
// and the sync are one transaction; when its COMMIT is in doubt and it in
// fact did not land, the payer's bucket must still be synced to empty and
// blocked for Retry-After, or the next lookup goes out into another remote
// 429 (review). The sync is run again alone: it never raises a balance.
func TestRemote429SyncedWhenTheSettleIsInDoubt(t *testing.T) {
	// Transactions: 1 hold, 2 settle and sync (lost with its answer).
	client, lim, payer := inDoubtClient(t, &fakeDICT{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "480"},
		body: problemXML(429, "RateLimited", dict.PolicyEntriesReadUserAntiscan+" is empty")}, 2, false)

	_, _ = client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})

	st, err := lim.State(context.Background(), payer)
	require.NoError(t, err)
	require.LessOrEqual(t, st.Tokens, int64(0), "synced to the DICT's empty bucket")
	require.GreaterOrEqual(t, st.BlockLeft, 479*time.Second, "blocked for Retry-After")
}

// TestBatchGoesOnAfterACommitInDoubt: a lookup whose hold's COMMIT is in
// doubt fails alone; the batch goes on with the others (before, dict.Batch
// stopped the whole run, and dict-lookup exited 3 after one key under the
// PostgreSQL kill storm of TestStoreFaultsPostgres).
func TestBatchGoesOnAfterACommitInDoubt(t *testing.T) {
	// Transaction 1 is the first lookup's hold: its answer is lost.
	client, _, _ := inDoubtClient(t, &fakeDICT{status: http.StatusInternalServerError, body: problemXML(500, "InternalServerError", "")}, 1, false)
	reqs := []dict.LookupRequest{{Key: knownEmail, PayerID: cpfPF}, {Key: knownEmail, PayerID: cpfPF}, {Key: knownEmail, PayerID: cpfPF}}
	var got []dict.BatchResult
	err := (&dict.Batch{Client: client}).Run(context.Background(), reqs, func(r dict.BatchResult) error {
		got = append(got, r)
		return nil
	})
	require.NoError(t, err, "the run goes on after one commit in doubt")
	require.Len(t, got, 3)
	require.ErrorIs(t, got[0].Err, throttle.ErrOutcomeUnknown)
	for _, r := range got[1:] {
		require.Error(t, r.Err) // the DICT's 500, not a stop
		require.NotErrorIs(t, r.Err, throttle.ErrOutcomeUnknown)
	}
}
