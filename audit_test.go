package balde_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/throttle"
)

// The engine's audit trail is the admin's (Engine.NewServer) and the
// prune removes its entries past the retention by their own time.
func TestEngineAuditTrailPrunedWithTheRetention(t *testing.T) {
	clock := throttle.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	eng, err := balde.Open(t.Context(), balde.Config{DB: "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), Migrate: true, Clock: clock.Now})
	require.NoError(t, err)
	defer eng.Close(t.Context())
	require.Same(t, eng.Audit(), eng.NewServer("12345678").Audit)

	_, err = eng.Audit().Record(t.Context(), audit.Entry{User: "ana", Action: audit.ActionReset, Target: "P/prod/old", Reason: "drill"})
	require.NoError(t, err)
	clock.Advance(20 * 24 * time.Hour)
	_, err = eng.Audit().Record(t.Context(), audit.Entry{User: "cli:bob", Action: audit.ActionReset, Target: "P/prod/new", Reason: "drill"})
	require.NoError(t, err)
	clock.Advance(11 * 24 * time.Hour)

	res, err := eng.Prune(t.Context(), throttle.PruneOptions{Retention: 30 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.AuditRows)
	left, err := eng.Audit().List(t.Context(), audit.Query{})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "P/prod/new", left[0].Target)
}
