package report_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/throttle"
)

func TestPruneRecordAndLines(t *testing.T) {
	before := time.Date(2026, 3, 2, 12, 0, 0, 0, time.FixedZone("BRT", -3*3600))
	res := balde.PruneResult{PruneResult: throttle.PruneResult{LedgerRows: 3, Buckets: 2}, Before: before, DictLookups: 1}
	tr := i18n.New(i18n.English, time.UTC)
	tests := []struct {
		name      string
		skip, dry bool
		audit     int64
		want      string
	}{
		{"removed", false, false, 0, "removed 3 ledger rows and 1 DICT lookups older than 24h0m0s (before 2026-03-02 15:00:00 UTC)\n" +
			"removed 2 idle buckets (full, no cooldown or block: the same as no row)\n"},
		{"dry run, audit, buckets kept", true, true, 4, "dry run: would remove 3 ledger rows and 1 DICT lookups older than 24h0m0s (before 2026-03-02 15:00:00 UTC)\n" +
			"dry run: would remove 4 audit entries older than 24h0m0s\nidle buckets kept (--skip-buckets)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := res
			r.AuditRows = tt.audit
			rec := report.NewPruneRecord(r, tt.skip, tt.dry)
			require.Equal(t, report.PruneRecord{Before: before.UTC(), LedgerRows: 3, Buckets: 2, DictLookups: 1, AuditRows: tt.audit, SkipBuckets: tt.skip, DryRun: tt.dry}, rec)
			var b bytes.Buffer
			report.WritePrune(&b, tr, rec, 24*time.Hour)
			require.Equal(t, tt.want, b.String())
		})
	}
}
