package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/internal/whatif"
)

// WriteWhatif prints a replay: per policy a table of the period and its
// hours, then the findings and the policies without a decision.
func WriteWhatif(w io.Writer, tr *i18n.Printer, rep *whatif.Report, lots bool) error {
	v := view.NewWhatif(tr, rep)
	fmt.Fprintln(w, v.Summary)
	for _, p := range v.Policies {
		fmt.Fprintln(w, "\n"+p.Policy)
		if p.Recorded != "" {
			fmt.Fprintln(w, "  "+p.Recorded)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, tr.Sprintf("HOUR\tREQUESTS\tREFUSED THEN\tREFUSED NOW\tWORSE\tBETTER\tLONGEST WAIT\tFIRST BITE"))
		for _, r := range p.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Label, r.Requests, r.RefusedThen, r.RefusedNow, r.Worse, r.Better, r.LongestWait, r.FirstBite)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\n"+tr.Sprintf("Worse: refused now, admitted then (a SIFEN lot: sent later). Better: the other way round."))
	for _, n := range v.Notes {
		fmt.Fprintln(w, n)
	}
	if !lots || len(v.Lots) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, tr.Sprintf("LOT\tRUC\tFIRST TRY\tSENT\tWOULD HAVE GONE\tANSWERED\tWOULD HAVE ENDED"))
	for _, l := range v.Lots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Ref, l.RUC, l.Arrived, l.Sent, l.ReplaySent, l.Answered, l.ReplayAnswered)
	}
	return tw.Flush()
}
