package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestWALStaysBounded writes decisions without pause while readers list
// buckets and read the ledger, and checks that the WAL file does not grow
// without bound: a statement left unfinished (an unread RETURNING, an open
// cursor) stops checkpoints and lets the WAL grow by gigabytes.
func TestWALStaysBounded(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	// Checkpoints every 1000 pages (SQLite's default; balde's is 16,000),
	// so that this many decisions cross the threshold many times.
	store := sqlstoretest.MustOpenDSN(t, dsn+"?_pragma=wal_autocheckpoint(1000)", nil)
	p := throttle.Policy{Name: "W", Capacity: 1000, RefillTokens: 1000, RefillPeriod: time.Second}
	lim, err := throttle.NewLimiter(store, throttle.Policies{"W": p}, throttle.Config{})
	require.NoError(t, err)

	const decisions = 8000
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				_, err := inspect.New(lim, store).List(ctx, inspect.Filter{Limit: 20})
				require.NoError(t, err)
				_, err = inspect.New(lim, store).Ledger(ctx, inspect.LedgerQuery{Limit: 20})
				require.NoError(t, err)
			}
		})
	}
	var maxWAL int64
	walPath := strings.TrimPrefix(dsn, "sqlite://") + "-wal"
	for i := range decisions {
		key := throttle.Key{Policy: "W", Env: "test", Identifier: fmt.Sprint("k", i%500)}
		_, err := lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
		require.NoError(t, err)
		if i%1000 == 0 {
			if fi, err := os.Stat(walPath); err == nil {
				maxWAL = max(maxWAL, fi.Size())
			}
		}
	}
	close(done)
	waitfor.Group(t, &readers, time.Minute, "the readers stopping")
	t.Logf("largest WAL seen over %d decisions: %d KiB", decisions, maxWAL/1024)
	// 8,000 decisions rewrite thousands of pages: unbounded (checkpoints
	// stopped), the WAL reached ~57 MB. Checkpoints keep it near the
	// autocheckpoint size (1000 pages, 4 MiB: 4.0-5.0 MiB in 5 quiet runs);
	// readers that hold a snapshot while the machine is loaded can delay a
	// restart of the WAL, once to 16.5 MB during a parallel `go test ./...`.
	require.Less(t, maxWAL, int64(32<<20))
}
