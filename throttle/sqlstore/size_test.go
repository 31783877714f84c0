package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// rowsForSize is how many rows the size measurements insert: enough for the
// B-trees to reach their steady fill (BALDE_SIZE_ROWS overrides it, e.g.
// 1000000 for the figure in the README).
var rowsForSize = func() int {
	if n, err := strconv.Atoi(os.Getenv("BALDE_SIZE_ROWS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}()

// TestBucketRowSize checks the disk cost of a bucket row on SQLite: at most
// 100 bytes, for realistic rows (a USER bucket keyed by a CPF, every
// timestamp set, a ledger pointer), measured with dbstat on the table's
// pages after rows were inserted in random key order, as payers arrive.
func TestBucketRowSize(t *testing.T) {
	s := sqlstoretest.MustOpen(t, sqlstore.SQLite, nil)
	now := time.Now().UnixNano()
	_, err := s.DB().Exec(fmt.Sprintf(`
		INSERT INTO balde_policies (id, name) VALUES (7, 'ENTRIES_READ_USER_ANTISCAN_V2');
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		INSERT INTO balde_buckets (policy_id, env, identifier, tokens, carry, refilled_at, send_count, severity, last_sent_at, last_entry)
		SELECT 7, 'prod', printf('%%011d', abs(random()) %% 100000000000), 80 + i %% 20, 0, %d + i, 1 + i %% 50, 1, %d + i, 1000000000 + i
		FROM n
		WHERE true ON CONFLICT DO NOTHING`, rowsForSize-1, now, now))
	require.NoError(t, err)
	perRow := bytesPerRow(t, s, "balde_buckets")
	t.Logf("bucket row: %.1f bytes on disk (SQLite, %d rows, random key order)", perRow, rowsForSize)
	require.LessOrEqual(t, perRow, 100.0)
}

// TestLedgerRowSize measures the disk cost of a ledger row on SQLite (table
// plus its partial indexes) for routine takes, and checks it stays below 64
// bytes: the README's disk cost per million decisions is derived from it.
func TestLedgerRowSize(t *testing.T) {
	s := sqlstoretest.MustOpen(t, sqlstore.SQLite, nil)
	now := time.Now().UnixNano()
	_, err := s.DB().Exec(fmt.Sprintf(`
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		INSERT INTO balde_token_ledger (id, policy_id, env, identifier, at, reason, delta, balance, n, prev, ref)
		SELECT i, 7, 'prod', printf('%%011d', abs(random()) %% 100000000000), %d + i * 1000, 1, -1, 50 + i %% 50, 1, i - 1 - i %% 3, NULL
		FROM n`, rowsForSize, now))
	require.NoError(t, err)
	perRow := bytesPerRow(t, s, "balde_token_ledger")
	var indexes float64
	require.NoError(t, s.DB().QueryRow(`SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'balde_token_ledger_%'`).Scan(&indexes))
	perRow += indexes / float64(rowsForSize)
	t.Logf("ledger row (take): %.1f bytes on disk with its indexes (SQLite, %d rows)", perRow, rowsForSize)
	require.LessOrEqual(t, perRow, 64.0)
}

func bytesPerRow(t *testing.T, s *sqlstore.Store, table string) float64 {
	t.Helper()
	ctx := context.Background()
	var bytes, rows float64
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT SUM(pgsize) FROM dbstat WHERE name = ?`, table).Scan(&bytes))
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&rows))
	return bytes / rows
}
