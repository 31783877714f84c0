package sifensql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// Two imports of one new CDC at once (two sifen-send runs over the same
// files): the one that commits second gets the *sifen.CDCError naming the
// document the first committed, as if it had come later, never a store
// failure. On PostgreSQL the second import's SELECT ... FOR UPDATE finds
// no row to lock and its INSERT waits on the unique key until the first
// commits; this test holds the first import open at that point.
func TestImportRacingAnotherImportOfTheCDC(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		store := sqlstoretest.MustOpen(t, engine, nil)
		docs := sifensql.New(store)
		lote, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("80069563", 1, 1)...))
		require.NoError(t, err)
		de := lote.DEs[0]

		// The other import: the CDC inserted, not committed yet.
		tx, err := store.DB().BeginTxx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		now := throttletest.Epoch.UnixNano()
		_, err = tx.ExecContext(ctx, tx.Rebind(`
			INSERT INTO balde_documents (env, ruc, dv, cdc, de_type, xml, status, message, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 'sending', '', ?, ?)`),
			string(sifen.EnvTest), de.RUC.Number, de.RUC.DV, de.CDC, de.Type, "<other/>", now, now)
		require.NoError(t, err)

		type result struct {
			ids []int64
			err error
		}
		done := make(chan result, 1)
		go func() {
			ids, err := docs.Import(ctx, sifen.EnvTest, []sifen.DE{de}, sifen.ImportNew, throttletest.Epoch)
			done <- result{ids, err}
		}()
		if engine == sqlstore.Postgres {
			// Until the import waits on the other's row lock.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				var waiting int
				require.NoError(t, store.ReadDB().GetContext(ctx, &waiting, `SELECT COUNT(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`))
				if waiting > 0 {
					break
				}
				require.False(t, time.Now().After(deadline), "the import never waited on the other's insert")
			}
		} else {
			time.Sleep(100 * time.Millisecond) // the import waits for SQLite's write lock
		}
		require.NoError(t, tx.Commit())

		var res result
		select {
		case res = <-done:
		case <-ctx.Done():
			t.Fatal("the import did not end within a minute")
		}
		var taken *sifen.CDCError
		require.True(t, errors.As(res.err, &taken), "want the CDC taken, got %v", res.err)
		require.False(t, errors.Is(res.err, throttle.ErrStoreUnavailable))
		require.Equal(t, sifen.StatusSending, taken.Document.Status)
		require.Equal(t, de.CDC, taken.CDC)
	})
}
