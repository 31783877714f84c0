package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// Buckets is what "balde buckets" prints to W, in Tr's language or as the
// JSON of /api/buckets; Scope names whom a key's bucket belongs to
// (web.Scopes).
type Buckets struct {
	W          io.Writer
	Tr         *i18n.Printer
	JSON, Wide bool
	Scope      func(throttle.Key) string
}

// List prints one page of stored buckets: a table of 100 columns, or with
// Wide every column, then whether the page is partial and the next page's
// cursor.
func (b Buckets) List(page inspect.Page) error {
	if b.JSON {
		out := view.NewAPIBucketList(page.States, b.Scope)
		out.Next, out.Partial = page.Next, page.Partial
		WriteJSONLine(b.W, out)
		return nil
	}
	w, tr := b.W, b.Tr
	if len(page.States) == 0 {
		fmt.Fprintln(w, tr.Sprintf("no stored bucket matches (a key with no row is a full bucket)"))
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if b.Wide {
		fmt.Fprintln(tw, tr.Sprintf("POLICY\tSCOPE\tIDENTIFIER\tENV\tTOKENS\tCAPACITY\tREFILL\tSEVERITY\tCOOLDOWN/BLOCK\tLAST SEND\tSENDS"))
	} else {
		fmt.Fprintln(tw, tr.Sprintf("POLICY\tIDENTIFIER\tENV\tTOKENS\tSEVERITY\tSTATE\tLAST SEND"))
	}
	for _, st := range page.States {
		v := view.ViewBucket(tr, st, b.Scope)
		policy := st.Key.Policy
		if st.Shadow {
			// docs/decisions/0200: refusals recorded, requests admitted.
			policy += " [" + tr.Sprintf("shadow") + "]"
		}
		if b.Wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\n", policy, v.Scope, st.Key.Identifier, st.Key.Env,
				st.Tokens, v.Capacity, v.Refill, v.Severity, v.Wait, v.LastSend, st.SendCount)
			continue
		}
		last := tr.Sprintf("never")
		if !st.LastSentAt.IsZero() {
			last = tr.Sprintf("%s ago", view.FormatWait(st.At.Sub(st.LastSentAt)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%s\t%s\t%s\t%s\n", policy, Shorten(st.Key.Identifier, 24), st.Key.Env,
			st.Tokens, v.Capacity, v.Severity, v.Wait, last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Partial {
		fmt.Fprintln(w, tr.Sprintf("partial: the filter read %s rows", strconv.Itoa(inspect.MaxScan)))
	}
	if page.Next != "" {
		fmt.Fprintln(w, tr.Sprintf("more: add --after %s", page.Next))
	}
	return nil
}

// Show prints one bucket (Bucket) and its most recent ledger rows, newest
// first, at most limit.
func (b Buckets) Show(st throttle.BucketState, entries []throttle.LedgerEntry, limit int) error {
	if b.JSON {
		WriteJSONLine(b.W, view.NewAPIBucketDetail(st, entries, b.Scope))
		return nil
	}
	b.Bucket(st)
	fmt.Fprintln(b.W, "\n"+b.Tr.Sprintf("ledger (newest first, at most %d):", limit))
	if len(entries) == 0 {
		fmt.Fprintln(b.W, "  "+b.Tr.Sprintf("no rows"))
		return nil
	}
	tw := tabwriter.NewWriter(b.W, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+b.Tr.Sprintf("ID\tAT\tREASON\tDELTA\tBALANCE\tCOUNT\tREF"))
	for _, e := range entries {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%+d\t%d\t%d\t%s\n", e.ID, b.Tr.Time(e.At), b.Tr.Text(e.Reason.String()), e.Delta, e.Balance, max(e.Count, 1), e.Ref)
	}
	return tw.Flush()
}

// Bucket prints a bucket as "field: value" lines (Show, and the reset
// prompt), in Tr's language.
func (b Buckets) Bucket(st throttle.BucketState) {
	tr := b.Tr
	v := view.ViewBucket(tr, st, b.Scope)
	w := tabwriter.NewWriter(b.W, 0, 0, 1, ' ', 0)
	stored := tr.Sprintf("yes")
	if !st.Stored {
		stored = tr.Sprintf("no (a key with no row is a full bucket)")
	}
	// Waits keep their Go form (8s, 4m12s); "now" is translated.
	wait := func(d time.Duration) string {
		if d <= 0 {
			return tr.Sprintf("now")
		}
		return tr.Sprintf("in %s", view.FormatWait(d))
	}
	rows := [][2]string{
		{tr.Sprintf("bucket"), st.Key.String()},
		{tr.Sprintf("scope"), v.Scope},
		{tr.Sprintf("stored"), stored},
		{tr.Sprintf("tokens"), tr.Sprintf("%s of %s", strconv.FormatInt(st.Tokens, 10), v.Capacity)},
		{tr.Sprintf("refill"), v.Refill},
		{tr.Sprintf("policy"), v.Policy},
		{tr.Sprintf("severity"), v.Severity},
		{tr.Sprintf("cooldown/block"), v.Wait},
		{tr.Sprintf("next admitted"), wait(st.RetryAfter)},
		{tr.Sprintf("full"), wait(st.UntilFull)},
		{tr.Sprintf("last send"), view.WhenIn(tr, tr.Time, st.LastSentAt, st.At)},
		{tr.Sprintf("sends"), fmt.Sprint(st.SendCount)},
	}
	if st.Shadow {
		rows = slices.Insert(rows, 1, [2]string{tr.Sprintf("mode"), tr.Sprintf("shadow: refusals are recorded, requests admitted")})
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%s:\t%s\n", row[0], row[1])
	}
	_ = w.Flush()
}

// Reset prints a reset of key done by actor.
func (b Buckets) Reset(key throttle.Key, r balde.BucketReset, actor string) {
	if b.JSON {
		WriteJSONLine(b.W, struct {
			Bucket       view.APIBucket `json:"bucket"`
			TokensBefore int64          `json:"tokens_before"`
			Actor        string         `json:"actor"`
		}{view.NewAPIBucket(r.After, b.Scope), r.Before.Tokens, actor})
		return
	}
	fmt.Fprintln(b.W, b.Tr.Sprintf("reset %s: %s → %s tokens, cooldown and block cleared (by %s)", key, strconv.FormatInt(r.Before.Tokens, 10), strconv.FormatInt(r.After.Tokens, 10), actor))
	if r.RemoteBlockStays {
		fmt.Fprintln(b.W, b.Tr.Sprintf("The RUC's gate was reset: balde's own wait is over. A block SIFEN itself imposed after a 0301 is not lifted by it, and a lot still on the wire holds the RUC until its answer."))
	}
}

// Shadow says that actor put policy in shadow mode (on) or back.
func (b Buckets) Shadow(policy string, on bool, actor string) {
	if on {
		fmt.Fprintln(b.W, b.Tr.Sprintf("%s is in shadow mode (by %s): its buckets decide as usual, record what they would refuse (ledger shadow-*, metric balde_throttle_shadow_refusals_total) and admit it.", policy, actor))
	} else {
		fmt.Fprintln(b.W, b.Tr.Sprintf("%s enforces again (by %s): its buckets refuse.", policy, actor))
	}
	fmt.Fprintln(b.W, b.Tr.Sprintf("A running balde serve on this database follows within its severity period (15 s by default)."))
}
