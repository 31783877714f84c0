package sifensql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// step is one call of the documents store in a sending sequence; each step
// sees what the earlier ones wrote.
type step struct {
	name string
	run  func(t *testing.T, docs sifen.DocumentStore)
}

// sendingSequence is every method of the store, in the order a send uses
// them: import three DEs of one RUC, claim them as one lot, record SIFEN's
// answer, then its result, with a note, a hold and the interval setting.
func sendingSequence(t *testing.T) []step {
	ctx := context.Background()
	now := throttletest.Epoch
	lote, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("80069563", 1, 3)...))
	require.NoError(t, err)
	packed, err := lote.Pack()
	require.NoError(t, err)
	ruc := lote.DEs[0].RUC
	var ids []int64
	var held []sifen.Document
	return []step{
		{"Import", func(t *testing.T, docs sifen.DocumentStore) {
			ids, err = docs.Import(ctx, sifen.EnvTest, lote.DEs, false, now)
			require.NoError(t, err)
			require.Len(t, ids, 3)
		}},
		{"Documents", func(t *testing.T, docs sifen.DocumentStore) {
			held, err = docs.Documents(ctx, ids, true)
			require.NoError(t, err)
			require.Len(t, held, 3)
			require.NotEmpty(t, held[0].XML)
		}},
		{"List", func(t *testing.T, docs sifen.DocumentStore) {
			got, err := docs.List(ctx, sifen.Filter{Env: sifen.EnvTest, Statuses: []sifen.Status{sifen.StatusDraft}})
			require.NoError(t, err)
			require.Len(t, got, 3)
		}},
		{"Hold", func(t *testing.T, docs sifen.DocumentStore) {
			require.NoError(t, docs.Hold(ctx, ids, "waiting", now.Add(time.Second), now))
			held, err = docs.Documents(ctx, ids, false) // new versions
			require.NoError(t, err)
		}},
		{"Fail", func(t *testing.T, docs sifen.DocumentStore) {
			require.NoError(t, docs.Fail(ctx, ids, "throttle down", now))
			held, err = docs.Documents(ctx, ids, false)
			require.NoError(t, err)
			require.Equal(t, sifen.StatusError, held[0].Status)
		}},
		{"Claim", func(t *testing.T, docs sifen.DocumentStore) {
			require.NoError(t, docs.Claim(ctx, sifen.Claim{Docs: held, Token: "claim-1", Lot: packed, Env: sifen.EnvTest, RUC: ruc, Now: now}))
		}},
		{"Note", func(t *testing.T, docs sifen.DocumentStore) {
			require.NoError(t, docs.Note(ctx, ids, "claim-1", "at SIFEN", now))
		}},
		{"Stale", func(t *testing.T, docs sifen.DocumentStore) {
			got, err := docs.Stale(ctx, now)
			require.NoError(t, err)
			require.Len(t, got, 3)
		}},
		{"Release", func(t *testing.T, docs sifen.DocumentStore) {
			n, err := docs.Release(ctx, sifen.Release{IDs: ids, Token: "claim-1", Env: sifen.EnvTest, Hash: packed.Hash,
				St: sifen.Settle{Status: sifen.StatusSent, LotNumber: "42", Sent: true, NextQueryAt: now.Add(10 * time.Minute)}, Now: now})
			require.NoError(t, err)
			require.Equal(t, int64(3), n, "released exactly once")
		}},
		{"SentLots", func(t *testing.T, docs sifen.DocumentStore) {
			lots, err := docs.SentLots(ctx)
			require.NoError(t, err)
			require.Equal(t, []sifen.LotRef{{Env: sifen.EnvTest, LotNumber: "42", RUC: ruc.Number, Documents: 3,
				SentAt: now, NextQueryAt: now.Add(10 * time.Minute)}}, lots)
		}},
		{"ScheduleLot", func(t *testing.T, docs sifen.DocumentStore) {
			due := now.Add(10 * time.Minute) // the lot's first query
			moved, err := docs.ScheduleLot(ctx, sifen.EnvTest, "42", due, now.Add(20*time.Minute))
			require.NoError(t, err)
			require.True(t, moved, "due: claimed")
			moved, err = docs.ScheduleLot(ctx, sifen.EnvTest, "42", due, now.Add(30*time.Minute))
			require.NoError(t, err)
			require.False(t, moved, "claimed already: another process's turn is gone")
			lots, err := docs.SentLots(ctx)
			require.NoError(t, err)
			require.Equal(t, now.Add(20*time.Minute), lots[0].NextQueryAt)
			moved, err = docs.ScheduleLot(ctx, sifen.EnvTest, "43", due, now.Add(30*time.Minute))
			require.NoError(t, err)
			require.True(t, moved, "a lot without a row has nothing to share")
		}},
		{"LotDocuments", func(t *testing.T, docs sifen.DocumentStore) {
			held, err = docs.LotDocuments(ctx, sifen.EnvTest, "42")
			require.NoError(t, err)
			require.Len(t, held, 3)
		}},
		{"Finish", func(t *testing.T, docs sifen.DocumentStore) {
			ok, err := docs.Finish(ctx, held[0], sifen.Settle{Status: sifen.StatusApproved, Result: "Aprobado"}, now)
			require.NoError(t, err)
			require.True(t, ok)
		}},
		{"CountByStatus", func(t *testing.T, docs sifen.DocumentStore) {
			got, err := docs.CountByStatus(ctx, sifen.EnvTest)
			require.NoError(t, err)
			require.Equal(t, map[sifen.Status]int64{sifen.StatusApproved: 1, sifen.StatusSent: 2}, got)
		}},
		{"ShareInterval", func(t *testing.T, docs sifen.DocumentStore) {
			before, err := docs.ShareInterval(ctx, sifen.EnvTest, 7*time.Second, now)
			require.NoError(t, err)
			require.Zero(t, before)
			before, err = docs.ShareInterval(ctx, sifen.EnvTest, 3*time.Second, now)
			require.NoError(t, err)
			require.Equal(t, 7*time.Second, before, "the stored interval only grows")
			before, err = docs.ShareInterval(ctx, sifen.EnvTest, 9*time.Second, now)
			require.NoError(t, err)
			require.Equal(t, 7*time.Second, before)
			before, err = docs.ShareInterval(ctx, sifen.EnvTest, time.Second, now)
			require.NoError(t, err)
			require.Equal(t, 9*time.Second, before)
		}},
	}
}

// TestEveryStatementSurvivesTerminatedSessions is issue 13 point 4 for
// SIFEN's documents: before every call, every PostgreSQL session of the
// store is terminated by an administrator (SQLSTATE 57P01). Each call still
// succeeds, retried on a fresh connection, and applies once (the release
// reports its three documents, the counts are exact). Before the retries,
// the first call after a termination failed.
func TestEveryStatementSurvivesTerminatedSessions(t *testing.T) {
	dsn := sqlstoretest.DSN(t, sqlstore.Postgres)
	app := "balde_sifensql_" + strings.ReplaceAll(t.Name(), "/", "_")
	store := sqlstoretest.MustOpenDSN(t, sqlstoretest.WithApplicationName(t, dsn, app), nil)
	docs := sifensql.New(store)
	require.NoError(t, store.Ping(context.Background())) // a session to terminate
	for _, st := range sendingSequence(t) {
		require.Positive(t, sqlstoretest.TerminateSessions(t, app), "%s: no session to terminate", st.name)
		t.Run(st.name, func(t *testing.T) { st.run(t, docs) })
	}
}

// TestEveryTransactionWaitsOutABusySQLite: another process holds SQLite's
// write lock for 8 busy timeouts during each writing call; the call waits
// (retried with backoff) instead of failing with SQLITE_BUSY.
func TestEveryTransactionWaitsOutABusySQLite(t *testing.T) {
	dsn := sqlstoretest.DSN(t, sqlstore.SQLite)
	store := sqlstoretest.MustOpenDSN(t, dsn+"?_pragma=busy_timeout(50)", nil)
	docs := sifensql.New(store)
	other, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(dsn, "sqlite://"))
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	writes := map[string]bool{"Import": true, "Hold": true, "Fail": true, "Claim": true, "Note": true, "Release": true, "ScheduleLot": true, "Finish": true, "ShareInterval": true}
	for _, st := range sendingSequence(t) {
		if !writes[st.name] {
			t.Run(st.name, func(t *testing.T) { st.run(t, docs) })
			continue
		}
		ctx := context.Background()
		conn, err := other.Conn(ctx)
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		require.NoError(t, err)
		released := make(chan struct{})
		go func() {
			defer close(released)
			time.Sleep(400 * time.Millisecond) // 8 busy timeouts
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
		}()
		start := time.Now()
		t.Run(st.name, func(t *testing.T) { st.run(t, docs) })
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "%s waited for the lock", st.name)
		select {
		case <-released:
		case <-time.After(10 * time.Second):
			t.Fatal("the other connection did not release its lock within 10 s")
		}
	}
}
