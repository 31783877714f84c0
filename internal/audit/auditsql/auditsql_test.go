package auditsql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/audit/auditsql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func mustStore(t *testing.T, engine sqlstore.Engine) (*auditsql.Store, *throttle.ManualClock) {
	t.Helper()
	clock := throttle.NewManualClock(throttletest.Epoch)
	s := sqlstoretest.MustOpen(t, engine, clock.Now)
	return auditsql.New(s), clock
}

func targets(es []audit.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Target)
	}
	return out
}

func TestAuditTrail(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		s, clock := mustStore(t, engine)
		record := func(e audit.Entry) audit.Entry {
			t.Helper()
			got, err := s.Record(ctx, e)
			require.NoError(t, err)
			clock.Advance(time.Minute)
			return got
		}
		first := record(audit.Entry{User: "ana", Action: audit.ActionReset, Target: "P/prod/a", Reason: "customer called", Outcome: "3 → 10 tokens"})
		require.Equal(t, throttletest.Epoch, first.At)
		record(audit.Entry{User: "cli:root", Action: audit.ActionReset, Target: "P/prod/b", Reason: "drill"})
		record(audit.Entry{User: "ana", Action: audit.ActionSifenSend, Target: "document 7"})
		record(audit.Entry{User: "bruno", Action: audit.ActionDictLookup, Target: "payer 52998224725", Outcome: "404"})

		all, err := s.List(ctx, audit.Query{})
		require.NoError(t, err)
		require.Equal(t, []string{"payer 52998224725", "document 7", "P/prod/b", "P/prod/a"}, targets(all), "newest first")
		require.Equal(t, first, all[3], "every field round-trips")

		byUser, err := s.List(ctx, audit.Query{User: "ana"})
		require.NoError(t, err)
		require.Equal(t, []string{"document 7", "P/prod/a"}, targets(byUser))
		byAction, err := s.List(ctx, audit.Query{Action: audit.ActionReset, Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []string{"P/prod/b"}, targets(byAction))
		next, err := s.List(ctx, audit.Query{Action: audit.ActionReset, Limit: 1, Before: byAction[0].ID})
		require.NoError(t, err)
		require.Equal(t, []string{"P/prod/a"}, targets(next), "the next page")

		// Pruned by its own time: the two oldest are older than 2 minutes ago.
		n, err := s.Prune(ctx, clock.Now().Add(-150*time.Second), 1000)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		all, err = s.List(ctx, audit.Query{})
		require.NoError(t, err)
		require.Equal(t, []string{"payer 52998224725", "document 7"}, targets(all))
	})
}

func TestAuditRecordRefusesBadEntries(t *testing.T) {
	s, _ := mustStore(t, sqlstore.SQLite)
	ctx := context.Background()
	tests := []struct {
		name string
		e    audit.Entry
		want error
	}{
		{"ResetWithoutReason", audit.Entry{User: "ana", Action: audit.ActionReset, Target: "P/prod/a", Reason: "  "}, audit.ErrReasonRequired},
		{"OverrideWithoutReason", audit.Entry{User: "ana", Action: audit.ActionSifenOverride, Target: "12"}, audit.ErrReasonRequired},
		{"NoUser", audit.Entry{Action: audit.ActionSifenSend}, audit.ErrInvalid},
		{"UnknownAction", audit.Entry{User: "ana", Action: "drop-table"}, audit.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Record(ctx, tt.e)
			require.ErrorIs(t, err, tt.want)
		})
	}
	all, err := s.List(ctx, audit.Query{})
	require.NoError(t, err)
	require.Empty(t, all, "nothing half-recorded")

	long, err := s.Record(ctx, audit.Entry{User: "ana", Action: audit.ActionSifenSend, Outcome: strings.Repeat("é", 400)})
	require.NoError(t, err)
	require.LessOrEqual(t, len(long.Outcome), audit.MaxField)
	require.True(t, strings.HasSuffix(long.Outcome, "é…"))
	_, err = s.List(ctx, audit.Query{Limit: audit.MaxLimit + 1})
	require.ErrorIs(t, err, audit.ErrInvalid)
}
