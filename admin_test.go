package balde_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// A tool that does not ask the DICT grades the categorised buckets with
// the category recorded for its participant, and leaves the configured
// one when none is.
func TestRestoreDictCategory(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		eng, err := balde.Open(ctx, balde.Config{DB: sqlstoretest.DSN(t, engine), Migrate: true})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
		before := eng.DictCatalog().Category()
		require.NoError(t, eng.RestoreDictCategory(ctx, "12345678"))
		require.Equal(t, before, eng.DictCatalog().Category(), "nothing recorded: unchanged")

		require.NoError(t, eng.DictRecords().SaveCategory(ctx, eng.DictCatalog().Env(), "12345678", "C", time.Now()))
		require.NoError(t, eng.RestoreDictCategory(ctx, "87654321"))
		require.Equal(t, before, eng.DictCatalog().Category(), "another participant's category is not ours")
		require.NoError(t, eng.RestoreDictCategory(ctx, "12345678"))
		require.Equal(t, "C", eng.DictCatalog().Category())
	})
}

// PolicyNames lists every policy whose buckets an operator may see, once
// each and sorted: the DICT's, SIFEN's and the inbound limiter's even
// without an inbound limiter in this engine.
func TestPolicyNames(t *testing.T) {
	eng, err := balde.Open(context.Background(), balde.Config{DB: "sqlite://" + filepath.Join(t.TempDir(), "b.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
	names := eng.PolicyNames()
	require.True(t, slices.IsSorted(names))
	require.Len(t, slices.Compact(slices.Clone(names)), len(names), "each name once")
	for _, n := range append([]string{dict.PolicyEntriesReadUserAntiscan, sifen.PolicyRecepcionLote}, web.InboundPolicyNames()...) {
		require.Contains(t, names, n)
	}
}
