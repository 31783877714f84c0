package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// TestBackgroundCheckpointsCutTheWALOnceReadersLetGo: with balde's own
// settings the writer never checkpoints (wal_autocheckpoint 0 on its
// connection); the store's checkpointer does, in the background. A reader
// holding an old snapshot keeps every checkpoint from resetting the WAL,
// so under sustained decisions the WAL grows past WALLimit: SQLite cannot
// do otherwise. Once the readers let go, the checkpointer's TRUNCATE cuts
// it back under the limit, with no write to prompt it; without the
// TRUNCATE the file stays at its largest. The test asserts that promise
// and not a size reached while readers overlap: that size depends on the
// machine's speed (3-52 MiB were seen for a 2 MiB limit under loads of
// 12-22 on 2 cores, with two readers listing without pause), and an
// assertion on it failed under load.
func TestBackgroundCheckpointsCutTheWALOnceReadersLetGo(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	const limit = 1 << 20
	store, err := alldrivers.Open(ctx, dsn, sqlstore.Options{WALLimit: limit, CheckpointEvery: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	var auto int
	require.NoError(t, store.DB().QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto))
	require.Equal(t, 0, auto, "the writer leaves checkpoints to the checkpointer")

	p := throttle.Policy{Name: "W", Capacity: 1000, RefillTokens: 1000, RefillPeriod: time.Second}
	lim, err := throttle.NewLimiter(store, throttle.Policies{"W": p}, throttle.Config{})
	require.NoError(t, err)
	walPath := strings.TrimPrefix(dsn, "sqlite://") + "-wal"
	walSize := func() int64 {
		fi, err := os.Stat(walPath)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	take := func(i int) {
		t.Helper()
		_, err := lim.Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: "W", Env: "test", Identifier: fmt.Sprint("k", i%500)}, Cost: 1})
		require.NoError(t, err)
	}
	for i := range 200 { // rows for the readers to see
		take(i)
	}

	waitfor.Until(t, 15*time.Second, func() bool { return walSize() < limit }, "the WAL under %d bytes before the reader starts", limit)

	t.Run("a reader holding its snapshot", func(t *testing.T) {
		reader, err := store.ReadDB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		require.NoError(t, err)
		defer reader.Rollback()
		var n int
		require.NoError(t, reader.QueryRow(`SELECT COUNT(*) FROM balde_buckets`).Scan(&n)) // the snapshot starts here
		decisions := 0
		for ; walSize() <= 2*limit && decisions < 200_000; decisions++ {
			take(decisions)
		}
		require.Greater(t, walSize(), int64(2*limit), "the WAL grows behind a reader's snapshot (%d decisions)", decisions)
		t.Logf("WAL %d KiB after %d decisions behind the reader", walSize()/1024, decisions)
		require.NoError(t, reader.Rollback())
		waitfor.Until(t, 15*time.Second, func() bool { return walSize() < limit }, "the checkpointer cutting the WAL under %d bytes once the reader let go", limit)
	})

	t.Run("readers listing without pause", func(t *testing.T) {
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
		var largest int64
		for i := range 8000 {
			take(i)
			if i%100 == 0 {
				largest = max(largest, walSize())
			}
		}
		close(done)
		waitfor.Group(t, &readers, time.Minute, "the readers stopping")
		t.Logf("largest WAL seen over 8000 decisions beside two readers: %d KiB (limit %d KiB)", largest/1024, limit/1024)
		waitfor.Until(t, 15*time.Second, func() bool { return walSize() < limit }, "the checkpointer cutting the WAL under %d bytes once the readers stopped", limit)
	})
}

// TestAutocheckpointInTheDSNKeepsSQLitesCheckpoints: a DSN that sets
// wal_autocheckpoint keeps it on the writer (no background checkpointer),
// even when it sets balde's own 16,000 (BenchmarkCheckpoint's
// autocheckpoint row measured the background checkpointer while the two
// looked alike).
func TestAutocheckpointInTheDSNKeepsSQLitesCheckpoints(t *testing.T) {
	for _, pages := range []int{1000, 16000} {
		t.Run(fmt.Sprint(pages), func(t *testing.T) {
			store := sqlstoretest.MustOpenDSN(t, sqlstoretest.DSN(t, sqlstore.SQLite)+fmt.Sprintf("?_pragma=wal_autocheckpoint(%d)", pages), nil)
			var auto int
			require.NoError(t, store.DB().QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto))
			require.Equal(t, pages, auto)
		})
	}
}

// TestTheWALStartsAgainInPlaceUnderSustainedWrites: with no reader, 32
// callers deciding without pause through group commit get their WAL
// started again from its beginning and overwritten in place (the
// checkpoint sequence number in the WAL header, which counts the WAL's
// restarts, moves on while the file keeps its size), not cut by the
// TRUNCATE that holds the writers for its copy, its sync and the
// truncation of the file (issue 24: ~55 ms for a 64 MiB WAL, the p99.9
// with 32 callers on 1M keys). On a table this small the background
// checkpoints alone sometimes catch up between two batches too, so the
// test guards the outcome; TestACatchUpStartsTheWALAgainInPlace shows the
// catch-up doing it.
func TestTheWALStartsAgainInPlaceUnderSustainedWrites(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	const limit = 8 << 20
	store, err := alldrivers.Open(ctx, dsn, sqlstore.Options{WALLimit: limit, CheckpointEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	p := throttle.Policy{Name: "W", Capacity: 1000, RefillTokens: 1000, RefillPeriod: time.Second}
	g := throttle.NewGroupCommit(store, throttle.GroupCommitOptions{})
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	lim, err := throttle.NewLimiter(g, throttle.Policies{"W": p}, throttle.Config{})
	require.NoError(t, err)
	walPath := strings.TrimPrefix(dsn, "sqlite://") + "-wal"
	// wal returns the WAL header's checkpoint sequence number and the
	// file's size.
	wal := func() (seq uint32, size int64) {
		f, err := os.Open(walPath)
		if err != nil {
			return 0, 0
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return 0, 0
		}
		var hdr [16]byte
		if _, err := f.ReadAt(hdr[:], 0); err != nil {
			return 0, fi.Size()
		}
		return binary.BigEndian.Uint32(hdr[12:16]), fi.Size()
	}

	// 32 callers through group commit, on 100,000 keys (each batch
	// dirties pages across the table), until the WAL has started again
	// six times.
	var stop atomic.Bool
	var writers sync.WaitGroup
	for w := range 32 {
		writers.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := throttle.Key{Policy: "W", Env: "test", Identifier: fmt.Sprint("k", (i*32+w)%100_000)}
				if _, err := lim.Take(ctx, "", throttle.Charge{Key: key, Cost: 1}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	t.Cleanup(func() { // before the store closes, even when the wait fails
		stop.Store(true)
		writers.Wait()
	})
	first, _ := wal()
	last, lastSize := first, int64(0)
	var inPlace, cut int
	var largest int64
	waitfor.Until(t, time.Minute, func() bool {
		seq, size := wal()
		if seq > last {
			if size >= lastSize {
				inPlace++
			} else {
				cut++
			}
		}
		last, lastSize, largest = seq, size, max(largest, size)
		return seq >= first+6
	}, "the WAL starting again 6 times under sustained writes")
	stop.Store(true)
	waitfor.Group(t, &writers, time.Minute, "the writers stopping")
	t.Logf("WAL restarts in place %d, cut %d; largest WAL %d KiB (limit %d KiB)", inPlace, cut, largest/1024, limit/1024)
	// Under a heavy load the writer may outrun the catch-up past the limit
	// once, and the TRUNCATE cuts it: one restart in place is the promise.
	require.Positive(t, inPlace, "the WAL started again in place, not cut")
	require.Less(t, largest, int64(2*limit))
}

// TestACatchUpStartsTheWALAgainInPlace: the writer's catch-up copies what
// the WAL holds, so that the writer's next transaction starts the WAL again
// from its beginning (the WAL header's checkpoint sequence number moves
// on) and overwrites it in place: the file keeps its size, nothing is
// truncated. Without a checkpoint the WAL only grows.
func TestACatchUpStartsTheWALAgainInPlace(t *testing.T) {
	ctx := context.Background()
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	// The background checkpointer passes once at the start, then sleeps.
	store, err := alldrivers.Open(ctx, dsn, sqlstore.Options{CheckpointEvery: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	p := throttle.Policy{Name: "W", Capacity: 1000, RefillTokens: 1000, RefillPeriod: time.Second}
	lim, err := throttle.NewLimiter(store, throttle.Policies{"W": p}, throttle.Config{})
	require.NoError(t, err)
	take := func(n int) {
		t.Helper()
		for i := range n {
			_, err := lim.Take(ctx, "", throttle.Charge{Key: throttle.Key{Policy: "W", Env: "test", Identifier: fmt.Sprint("k", i%500)}, Cost: 1})
			require.NoError(t, err)
		}
	}
	walPath := strings.TrimPrefix(dsn, "sqlite://") + "-wal"

	take(200)
	seq, size := walHeader(t, walPath)
	take(200)
	seq2, size2 := walHeader(t, walPath)
	require.Equal(t, seq, seq2, "no checkpoint: the WAL goes on")
	require.Greater(t, size2, size)

	if runtime.GOOS == "linux" {
		// The pages a catch-up would sync are flushed before it, through
		// SQLite's own descriptor of the file.
		require.True(t, sqlstore.FlushFile(strings.TrimPrefix(dsn, "sqlite://")), "a descriptor of the open database file found")
	}
	ran, busy, err := store.CatchUpWAL(ctx)
	require.NoError(t, err)
	require.True(t, ran, "balde's DSN: the store checkpoints")
	require.False(t, busy)
	take(1)
	seq3, size3 := walHeader(t, walPath)
	require.Equal(t, seq2+1, seq3, "the WAL started again")
	require.Equal(t, size2, size3, "in place: the file keeps its size")
}

// walHeader returns the checkpoint sequence number in the header of the
// WAL at path (SQLite counts the WAL's restarts there) and the file's size.
func walHeader(t *testing.T, path string) (seq uint32, size int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 32, "a WAL header")
	return binary.BigEndian.Uint32(b[12:16]), int64(len(b))
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
