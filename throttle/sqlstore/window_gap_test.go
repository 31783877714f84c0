package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

// TestLedgerIDAtAcrossGaps: the busy bucket's window start is found when
// ledger ids have gaps (rows 6..9 never committed, as a rolled-back
// transaction leaves on PostgreSQL); the search used to stop moving when
// no row lay in its upper half, and the chart's request ran until the
// client gave up (review).
func TestLedgerIDAtAcrossGaps(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "b.db")
	require.NoError(t, sqlitedriver.Migrate(context.Background(), dsn, func(m *migrations.Migrator) error { return m.Up() }))
	s, err := sqlitedriver.Open(context.Background(), dsn, sqlstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	ids := []int64{1, 2, 3, 4, 5, 10, 11, 20}
	for _, id := range ids {
		_, err := s.DB().Exec(`INSERT INTO balde_token_ledger (id, policy_id, env, identifier, at, reason, delta, balance, n)
			VALUES (?, 1, 'e', 'i', ?, 1, -1, 0, 1)`, id, id*int64(time.Second))
		require.NoError(t, err)
	}
	for _, tc := range []struct{ at, want int64 }{
		{0, 1}, {1, 1}, {3, 3}, {5, 5}, {6, 10}, {10, 10}, {11, 11}, {12, 20}, {20, 20}, {25, 20},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := s.LedgerIDAt(ctx, tc.at*int64(time.Second), 20)
		cancel()
		require.NoError(t, err, "at %d s", tc.at)
		require.Equal(t, tc.want, got, "first id at or after %d s", tc.at)
	}
}
