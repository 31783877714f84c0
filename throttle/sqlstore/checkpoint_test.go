package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/inspect"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/alldrivers"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestBackgroundCheckpointsKeepTheWALUnderTheLimit: with balde's own
// settings the writer never checkpoints (wal_autocheckpoint 0 on its
// connection) and the store's checkpointer does, in the background. Under
// sustained decisions, with two readers listing buckets without pause
// (their snapshots keep the WAL from restarting after a PASSIVE
// checkpoint, so the TRUNCATE past the limit is what bounds it), the WAL
// stays within 16 × WALLimit (2 MiB here; 3-21 MiB seen under loads of
// 12-22 on 2 cores, where a TRUNCATE that readers slowed past its 100 ms
// waits a second before the next): without the
// checkpointer it grows by every page written (~57 MB for these
// decisions, see TestWALStaysBounded).
func TestBackgroundCheckpointsKeepTheWALUnderTheLimit(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	const limit = 2 << 20
	store, err := alldrivers.Open(ctx, dsn, sqlstore.Options{WALLimit: limit, CheckpointEvery: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	var auto int
	require.NoError(t, store.DB().QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto))
	require.Equal(t, 0, auto, "the writer leaves checkpoints to the checkpointer")

	p := throttle.Policy{Name: "W", Capacity: 1000, RefillTokens: 1000, RefillPeriod: time.Second}
	lim, err := throttle.NewLimiter(store, throttle.Policies{"W": p}, throttle.Config{})
	require.NoError(t, err)
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
			}
		})
	}
	var maxWAL int64
	walPath := strings.TrimPrefix(dsn, "sqlite://") + "-wal"
	const decisions = 8000
	for i := range decisions {
		key := throttle.Key{Policy: "W", Env: "test", Identifier: fmt.Sprint("k", i%500)}
		_, err := lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 1})
		require.NoError(t, err)
		if i%100 == 0 {
			if fi, err := os.Stat(walPath); err == nil {
				maxWAL = max(maxWAL, fi.Size())
			}
		}
	}
	close(done)
	waitfor.Group(t, &readers, time.Minute, "the readers stopping")
	t.Logf("largest WAL seen over %d decisions: %d KiB", decisions, maxWAL/1024)
	// The WAL grows past the limit by what is written between two
	// checkpoints, and during the pause after a TRUNCATE the readers
	// blocked. Without the TRUNCATE it reached 63 MiB.
	require.Less(t, maxWAL, int64(16*limit))
}

// TestAutocheckpointInTheDSNKeepsSQLitesCheckpoints: a DSN that sets
// wal_autocheckpoint keeps it on the writer (no background checkpointer).
func TestAutocheckpointInTheDSNKeepsSQLitesCheckpoints(t *testing.T) {
	store := sqlstoretest.MustOpenDSN(t, sqlstoretest.DSN(t, sqlstore.SQLite)+"?_pragma=wal_autocheckpoint(1000)", nil)
	var auto int
	require.NoError(t, store.DB().QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto))
	require.Equal(t, 1000, auto)
}

// TestALongReaderDoesNotHoldTheWriters: a reader keeps an old snapshot
// open (a long listing, a backup) while the WAL is past its limit. The
// TRUNCATE checkpoint cannot reset the WAL under it; it must give up
// quickly (it holds the process's writer while it waits) and not try again
// at every tick, so decisions go on: none waits anywhere near the writer's
// 5 s busy_timeout.
func TestALongReaderDoesNotHoldTheWriters(t *testing.T) {
	ctx := context.Background()
	store, err := alldrivers.Open(ctx, sqlstoretest.DSN(t, sqlstore.SQLite), sqlstore.Options{WALLimit: 64 << 10, CheckpointEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	p := throttle.Policy{Name: "W", Capacity: 1000, RefillTokens: 1000, RefillPeriod: time.Second}
	lim, err := throttle.NewLimiter(store, throttle.Policies{"W": p}, throttle.Config{})
	require.NoError(t, err)
	take := func(i int) {
		t.Helper()
		_, err := lim.Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: "W", Env: "test", Identifier: fmt.Sprint("k", i%500)}, Cost: 1})
		require.NoError(t, err)
	}
	for i := range 200 { // rows for the reader to see
		take(i)
	}
	reader, err := store.ReadDB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	defer reader.Rollback()
	var n int
	require.NoError(t, reader.QueryRow(`SELECT COUNT(*) FROM balde_buckets`).Scan(&n)) // the snapshot starts here
	var slowest time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < 1500*time.Millisecond; i++ {
		t0 := time.Now()
		take(i)
		slowest = max(slowest, time.Since(t0))
	}
	t.Logf("slowest decision behind a reader holding its snapshot: %s", slowest)
	require.Less(t, slowest, 2500*time.Millisecond)
}
