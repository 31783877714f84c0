package report

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/i18n"
)

// PruneRecord is what "balde prune --json" prints.
type PruneRecord struct {
	Before      time.Time `json:"before"`
	LedgerRows  int64     `json:"ledger_rows"`
	Buckets     int64     `json:"buckets"`
	DictLookups int64     `json:"dict_lookups"`
	AuditRows   int64     `json:"audit_rows"`
	SkipBuckets bool      `json:"skip_buckets"`
	DryRun      bool      `json:"dry_run"`
}

// NewPruneRecord is res's record, its cut-off in UTC.
func NewPruneRecord(res balde.PruneResult, skipBuckets, dryRun bool) PruneRecord {
	return PruneRecord{res.Before.UTC(), res.LedgerRows, res.Buckets, res.DictLookups, res.AuditRows, skipBuckets, dryRun}
}

// WritePrune writes r as "balde prune" prints it.
func WritePrune(w io.Writer, tr *i18n.Printer, r PruneRecord, retention time.Duration) {
	verb := tr.Sprintf("removed")
	if r.DryRun {
		verb = tr.Sprintf("dry run: would remove")
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	fmt.Fprintln(w, tr.Sprintf("%s %s ledger rows and %s DICT lookups older than %s (before %s)",
		verb, n(r.LedgerRows), n(r.DictLookups), retention.String(), r.Before.UTC().Format(i18n.TimeLayout)))
	if r.AuditRows > 0 {
		fmt.Fprintln(w, tr.Sprintf("%s %s audit entries older than %s", verb, n(r.AuditRows), retention.String()))
	}
	if r.SkipBuckets {
		fmt.Fprintln(w, tr.Sprintf("idle buckets kept (--skip-buckets)"))
	} else {
		fmt.Fprintln(w, tr.Sprintf("%s %s idle buckets (full, no cooldown or block: the same as no row)", verb, n(r.Buckets)))
	}
}
