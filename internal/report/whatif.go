package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/internal/whatif"
)

// ParseWhen reads a time of whatif's --from or --to in zone; "" is def.
func ParseWhen(s string, def time.Time, zone *time.Location) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, zone); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2026-01-05, 2026-01-05T14:00 or RFC 3339)", s)
}

// WriteWhatif prints a replay: per policy a table of the period and its
// hours, then the findings (whatif.Report.Notes).
func WriteWhatif(w io.Writer, tr *i18n.Printer, rep *whatif.Report, lots bool) error {
	q := rep.Query
	fmt.Fprintln(w, tr.Sprintf("What if, from %s to %s: %s ledger rows, %s requests replayed.",
		tr.Zoned(q.From), tr.Zoned(q.To), tr.Int(rep.Rows), tr.Int(rep.Requests)))
	for _, p := range rep.Policies {
		if p.Total.Requests == 0 {
			fmt.Fprintln(w, "\n"+tr.Sprintf("%s: no decision recorded in the period.", p.Policy))
			continue
		}
		fmt.Fprintln(w, "\n"+view.FormatPolicyIn(tr, p.Replayed))
		if p.Recorded != p.Replayed {
			fmt.Fprintln(w, "  "+tr.Sprintf("recorded under %s", view.FormatPolicyIn(tr, p.Recorded)))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, tr.Sprintf("HOUR\tREQUESTS\tREFUSED THEN\tREFUSED NOW\tWORSE\tBETTER\tLONGEST WAIT\tFIRST BITE"))
		row := func(label string, h whatif.Hour) {
			bite := ""
			if !h.FirstBite.IsZero() {
				bite = tr.Zoned(h.FirstBite)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", label, tr.Int(h.Requests), tr.Int(h.RefusedThen), tr.Int(h.RefusedNow),
				tr.Int(h.Worse), tr.Int(h.Better), view.FormatWait(h.LongestWait), bite)
		}
		row(tr.Sprintf("period"), p.Total)
		for _, h := range p.Hours {
			row(h.Start.In(tr.Location()).Format("2006-01-02 15:04"), h)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\n"+tr.Sprintf("Worse: refused now, admitted then (a SIFEN lot: sent later). Better: the other way round."))
	for _, n := range rep.Notes(tr) {
		fmt.Fprintln(w, n)
	}
	if !lots || len(rep.Lots) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, tr.Sprintf("LOT\tRUC\tFIRST TRY\tSENT\tWOULD HAVE GONE\tANSWERED\tWOULD HAVE ENDED"))
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(tr.Location()).Format("15:04:05.0")
	}
	for _, l := range rep.Lots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Ref, l.Key.Identifier, at(l.Arrived), at(l.Sent), at(l.ReplaySent), at(l.Answered), at(l.ReplayAnswered))
	}
	return tw.Flush()
}
