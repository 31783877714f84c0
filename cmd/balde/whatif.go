package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/web"
)

// runWhatif is "balde whatif": a period's recorded decisions of chosen
// policies replayed under another DICT category, capacity, refill or SIFEN
// interval (internal/whatif, docs/decisions/0150).
func runWhatif(ctx context.Context, m *Main, args []string) (err error) {
	cfg, err := m.envConfig()
	if err != nil {
		return err
	}
	fs := m.newFlagSet("whatif",
		"whatif --policy P[,P...] [--from T] [--to T] [--category C] [--capacity N] [--refill-tokens N] [--refill-period D] [--interval D] [--lots]",
		"balde whatif --policy ENTRIES_READ_PARTICIPANT_ANTISCAN --from 2026-01-05 --to 2026-01-12 --category C\n"+
			"  balde whatif --policy SIFEN_RECEPCION_LOTE --from 2026-01-08T18:00 --to 2026-01-08T20:00 --interval 5s --lots")
	cfg.addStoreFlags(fs)
	cfg.addDictFlags(fs)
	cfg.addPolicyFlags(fs)
	cfg.AddFlags(fs, "sifen-throttle", "sifen-throttle-prod", "sifen-block-step", "sifen-block-max")
	policies := fs.String("policy", "", "the policies to replay, comma-separated (required)")
	from := fs.String("from", "", "start of the period: 2026-01-05, 2026-01-05T14:00 (in BALDE_TIME_ZONE) or RFC 3339 (default: 24 hours before --to)")
	to := fs.String("to", "", "end of the period, excluded (default: now)")
	var sc whatif.Scenario
	fs.StringVar(&sc.Category, "category", "", "replay the DICT's categorised policies as this participant category, A..H")
	fs.Int64Var(&sc.Capacity, "capacity", 0, "replay the chosen policies with this capacity, in tokens")
	fs.Int64Var(&sc.RefillTokens, "refill-tokens", 0, "replay the chosen policies refilling this many tokens per refill period")
	fs.DurationVar(&sc.RefillPeriod, "refill-period", 0, "replay the chosen policies with this refill period (e.g. 1m)")
	fs.DurationVar(&sc.Interval, "interval", 0, "replay SIFEN lots with this interval between a lot's answer and the RUC's next lot (e.g. 5s)")
	lots := fs.Bool("lots", false, "list every SIFEN lot: when it went, and when it would have gone")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError("whatif: unexpected arguments %q", fs.Args())
	}
	if *policies == "" {
		return UsageError("whatif: --policy is required (for example ENTRIES_READ_PARTICIPANT_ANTISCAN)")
	}
	if err := requireDatabase(cfg.DB); err != nil {
		return err
	}
	eng, err := openAdminEngine(ctx, cfg, m.Clock)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.close(ctx)) }()
	tr := m.printer()
	if cfg.TimeZone != nil {
		tr.Zone = cfg.TimeZone
	}
	q := whatif.Query{Policies: strings.Split(*policies, ","), Scenario: sc}
	if q.To, err = parseWhen(*to, eng.limiter.Now(), tr.Location()); err != nil {
		return UsageError("whatif: --to: %v", err)
	}
	if q.From, err = parseWhen(*from, q.To.Add(-24*time.Hour), tr.Location()); err != nil {
		return UsageError("whatif: --from: %v", err)
	}
	for _, p := range q.Policies {
		if !slices.Contains(eng.PolicyNames(), p) {
			return UsageError("whatif: unknown policy %q (known: %s)", p, strings.Join(eng.PolicyNames(), ", "))
		}
	}
	rep, err := whatif.Run(ctx, whatif.Config{Source: eng.Store(), Limiter: eng.limiter, Dict: eng.DictCatalog(),
		Sifen: sifen.SenderConfig{RemoteBlock: cfg.SifenBlockStep, RemoteBlockMax: cfg.SifenBlockMax}}, q)
	if errors.Is(err, whatif.ErrInvalid) {
		return UsageError("%v", err)
	}
	if err != nil {
		return err
	}
	return writeWhatif(m.Stdout, tr, rep, *lots)
}

// parseWhen reads a time of --from or --to in zone; "" is def.
func parseWhen(s string, def time.Time, zone *time.Location) (time.Time, error) {
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

// writeWhatif prints a replay: per policy the scenario and a table of its
// period and of the hours in which something was refused or went at
// another time, then the findings in words (whatif.Report.Notes).
func writeWhatif(w io.Writer, tr *i18n.Printer, rep *whatif.Report, lots bool) error {
	q := rep.Query
	fmt.Fprintln(w, tr.Sprintf("What if, from %s to %s: %s ledger rows, %s requests replayed.",
		tr.Zoned(q.From), tr.Zoned(q.To), tr.Int(rep.Rows), tr.Int(rep.Requests)))
	for _, p := range rep.Policies {
		if p.Total.Requests == 0 {
			fmt.Fprintln(w, "\n"+tr.Sprintf("%s: no decision recorded in the period.", p.Policy))
			continue
		}
		fmt.Fprintln(w, "\n"+web.FormatPolicyIn(tr, p.Replayed))
		if p.Recorded != p.Replayed {
			fmt.Fprintln(w, "  "+tr.Sprintf("recorded under %s", web.FormatPolicyIn(tr, p.Recorded)))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, tr.Sprintf("HOUR\tREQUESTS\tREFUSED THEN\tREFUSED NOW\tWORSE\tBETTER\tLONGEST WAIT\tFIRST BITE"))
		row := func(label string, h whatif.Hour) {
			bite := ""
			if !h.FirstBite.IsZero() {
				bite = tr.Zoned(h.FirstBite)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", label, tr.Int(h.Requests), tr.Int(h.RefusedThen), tr.Int(h.RefusedNow),
				tr.Int(h.Worse), tr.Int(h.Better), web.FormatWait(h.LongestWait), bite)
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
