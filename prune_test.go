package balde_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// CountPrune announces what Prune then removes, row for row: ledger rows
// (an aggregated row is one), DICT lookups and idle buckets past the
// retention; a bucket whose ledger is within the retention is kept by
// both, and counting removes nothing.
func TestCountPruneIsWhatPruneRemoves(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		clock := throttle.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
		eng, err := balde.Open(ctx, balde.Config{DB: sqlstoretest.DSN(t, engine), Migrate: true, Clock: clock.Now,
			Ledger: throttle.LedgerAggregateTakes})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
		old := throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "11144477735"}
		recent := throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "52998224725"}
		take := func(k throttle.Key) {
			d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: k, Cost: 1})
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		for range 3 { // one aggregated row for three takes
			take(old)
		}
		require.NoError(t, eng.DictRecords().RecordLookup(ctx, dict.Lookup{EndToEndID: "E1", Env: "prod", PayerID: "11144477735",
			KeyType: "PHONE", Policy: old.Policy, Participant: "12345678", Status: 200, LookedUpAt: clock.Now()}))
		clock.Advance(47 * time.Hour)
		take(recent)
		clock.Advance(time.Hour) // both full again; only old's ledger is past 24 h

		opts := throttle.PruneOptions{Retention: 24 * time.Hour}
		counted, err := eng.CountPrune(ctx, opts)
		require.NoError(t, err)
		again, err := eng.CountPrune(ctx, opts)
		require.NoError(t, err)
		require.Equal(t, counted, again, "counting removes nothing")
		require.Equal(t, clock.Now().Add(-24*time.Hour), counted.Before)
		require.Equal(t, int64(1), counted.LedgerRows)
		require.Equal(t, int64(1), counted.DictLookups)
		require.Equal(t, int64(1), counted.Buckets, "the bucket whose ledger is in view stays")

		skip := opts
		skip.SkipBuckets = true
		skipped, err := eng.CountPrune(ctx, skip)
		require.NoError(t, err)
		require.Zero(t, skipped.Buckets)

		removed, err := eng.Prune(ctx, opts)
		require.NoError(t, err)
		require.Equal(t, counted, removed)
	})
}
