package dict_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// lockedStore is a store whose transactions wait for a lock that is never
// released (its holder stopped): each Update reports on entered and
// returns only when its ctx ends.
type lockedStore struct {
	throttle.Store
	entered chan struct{}
}

func (s *lockedStore) Update(ctx context.Context, _ []throttle.Key, _ []throttle.CreditRef, _ func(*throttle.Tx) error) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("the transaction's ctx did not end within 30 s")
	}
}

// TestBatchStopsAReservationWaitingOnALock: a run stopped while a lookup's
// reservation waits for a database lock ends promptly, with nothing sent
// (decision 0124); before, the lookup, detached from the run's context,
// waited out the lock.
func TestBatchStopsAReservationWaitingOnALock(t *testing.T) {
	var hits atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(hs.Close)
	clock := throttle.NewManualClock(throttletest.Epoch)
	store := &lockedStore{Store: throttletest.NewMemStore(clock.Now), entered: make(chan struct{}, 1)}
	catalog := dict.NewCatalog("prod")
	lim, err := throttle.NewLimiter(store, catalog, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	client, err := dict.NewClient(dict.ClientConfig{BaseURL: hs.URL, Participant: ispb, Limiter: lim, Catalog: catalog, Logger: quiet})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	b := &dict.Batch{Client: client}
	go func() {
		done <- b.Run(ctx, []dict.LookupRequest{{Key: knownEmail, PayerID: cpfPF}}, func(dict.BatchResult) error { return nil })
	}()
	waitfor.Recv(t, store.entered, 10*time.Second, "the reservation waiting in the store")
	cancel()
	start := time.Now()
	waitfor.Recv(t, done, 10*time.Second, "the stopped run")
	require.Less(t, time.Since(start), time.Second, "the run ends once stopped, not when the lock is released")
	require.Zero(t, hits.Load(), "nothing sent")
}
