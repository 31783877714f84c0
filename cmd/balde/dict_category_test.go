package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/internal/settings"
)

// "buckets list" and "show" size the participant's anti-scan bucket by the
// category recorded from the DICT (F: capacity 500), not the strictest
// (H: 50), as the admin page and /policies/ do; its 45 tokens were taken
// while H applied. An operator's shell has no BALDE_DICT_PARTICIPANT: the
// views read the category of the one participant recorded (before, they
// read the example ISPB's, and showed H's numbers).
func TestBucketsListReadsTheLearnedCategory(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now})
	require.NoError(t, err)
	require.NoError(t, dictsql.NewRecords(eng.Store().DB(), eng.Store().ReadDB()).SaveCategory(ctx, "prod", "60701190", "F", clock.Now()))
	require.NoError(t, eng.Close(ctx))
	clock.Advance(time.Second)

	code, stdout, stderr := runIn(ctx, clock, "", map[string]string{"BALDE_DB": db, "BALDE_TIME_ZONE": "UTC"}, "buckets", "list", "-o", "wide")
	require.Equal(t, ExitOK, code, stderr)
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	require.Equal(t, []string{"ENTRIES_READ_PARTICIPANT_ANTISCAN", "PSP", "12345678", "prod", "45", "500", "250/min"}, strings.Fields(lines[1])[:7])

	code, stdout, stderr = runIn(ctx, clock, "", map[string]string{"BALDE_DB": db, "BALDE_TIME_ZONE": "UTC"}, "buckets", "show", "ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/12345678")
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stdout, "45 of 500", "show: F's capacity")
}
