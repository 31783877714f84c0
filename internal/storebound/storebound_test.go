package storebound_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/storebound"
)

// Two writes one after another share one bound; time outside them is not
// counted. The test runs in a synctest bubble: its clock is exact.
func TestWritesShareOneBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, release := storebound.With(context.Background(), 300*time.Millisecond)
		defer release()

		exit := storebound.Enter(ctx)
		time.Sleep(200 * time.Millisecond) // a write waiting on a lock
		exit()
		time.Sleep(300 * time.Millisecond) // the remote call: not counted
		require.NoError(t, ctx.Err())

		exit = storebound.Enter(ctx)
		defer exit()
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the bound was not enforced")
		}
		require.Equal(t, 100*time.Millisecond, time.Since(start), "the second write gets what the first left")
		require.True(t, storebound.Spent(ctx))

		// A bound ctx is not bounded again, and a ctx without one is untouched.
		again, rel := storebound.With(ctx, time.Hour)
		rel()
		require.Equal(t, ctx, again)
		storebound.Enter(context.Background())()
		require.False(t, storebound.Spent(context.Background()))
	})
}
