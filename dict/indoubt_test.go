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

// lostCommitStore applies its n-th transaction and then reports that
// transaction's COMMIT as in doubt, as sqlstore does when the connection
// dies while committing: the change landed, the answer was lost.
type lostCommitStore struct {
	throttle.Store
	n     int32
	calls atomic.Int32
}

func (s *lostCommitStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	err := s.Store.Update(ctx, keys, credits, apply)
	if s.calls.Add(1) == s.n && err == nil {
		return fmt.Errorf("%w: %w: connection lost during COMMIT", throttle.ErrStoreUnavailable, sqlstore.ErrCommitInDoubt)
	}
	return err
}

// TestSettleInDoubtIsNotRepeated: a settle whose COMMIT is in doubt may
// have landed, so it is never run again (decision 0020). Before, the
// transport's retry of store failures ran it again: the refund was applied
// twice and the mirror became more generous than the DICT, which then
// answered 429 (TestStoreFaultsPostgres under the 30 ms kill storm).
func TestSettleInDoubtIsNotRepeated(t *testing.T) {
	hs := httptest.NewServer(&fakeDICT{status: http.StatusInternalServerError, body: problemXML(500, "InternalServerError", "")})
	defer hs.Close()
	clock := throttletest.NewFakeClock(throttletest.Epoch)
	store := &lostCommitStore{Store: throttletest.NewMemStore(clock.Now), n: 3} // 1 drain, 2 hold, 3 settle
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog, Logger: quiet})
	require.NoError(t, err)
	payer := catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF)
	d, err := lim.Take(context.Background(), "drain", throttle.Charge{Key: payer, Cost: 50})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	_, err = client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
	require.Error(t, err) // the DICT's 500

	st, err := lim.State(context.Background(), payer)
	require.NoError(t, err)
	require.Equal(t, int64(50), st.Tokens, "the hold (20) refunded once after the 500, not twice")
}

// droppedCommitStore reports its n-th transaction's COMMIT as in doubt
// without applying it: the change was lost with the connection.
type droppedCommitStore struct {
	throttle.Store
	n     int32
	calls atomic.Int32
}

func (s *droppedCommitStore) Update(ctx context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	if s.calls.Add(1) == s.n {
		return fmt.Errorf("%w: %w: connection lost during COMMIT", throttle.ErrStoreUnavailable, sqlstore.ErrCommitInDoubt)
	}
	return s.Store.Update(ctx, keys, credits, apply)
}

// TestRemote429SyncedWhenTheSettleIsInDoubt: after a remote 429 the refund
// and the sync are one transaction; when its COMMIT is in doubt and it in
// fact did not land, the payer's bucket must still be synced to empty and
// blocked for Retry-After, or the next lookup goes out into another remote
// 429 (review). The sync is run again alone: it never raises a balance.
func TestRemote429SyncedWhenTheSettleIsInDoubt(t *testing.T) {
	hs := httptest.NewServer(&fakeDICT{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "480"},
		body: problemXML(429, "RateLimited", "")})
	defer hs.Close()
	clock := throttletest.NewFakeClock(throttletest.Epoch)
	store := &droppedCommitStore{Store: throttletest.NewMemStore(clock.Now), n: 2} // 1 hold, 2 settle and sync
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog, Logger: quiet})
	require.NoError(t, err)
	payer := catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF)

	_, _ = client.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})

	st, err := lim.State(context.Background(), payer)
	require.NoError(t, err)
	require.LessOrEqual(t, st.Tokens, int64(0), "synced to the DICT's empty bucket")
	require.GreaterOrEqual(t, st.BlockLeft, 479*time.Second, "blocked for Retry-After")
}
