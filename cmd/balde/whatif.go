package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/whatif"
	"github.com/balde-throttle/balde/sifen"
)

// runWhatif is "balde whatif": a period's recorded decisions of chosen
// policies replayed under another DICT category, capacity, refill or SIFEN
// interval (internal/whatif, docs/decisions/0150).
func runWhatif(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("whatif",
		"whatif --policy P[,P...] [--from T] [--to T] [--category C] [--capacity N] [--refill-tokens N] [--refill-period D] [--interval D] [--lots]",
		"balde whatif --policy ENTRIES_READ_PARTICIPANT_ANTISCAN --from 2026-01-05 --to 2026-01-12 --category C\n"+
			"  balde whatif --policy SIFEN_RECEPCION_LOTE --from 2026-01-08T18:00 --to 2026-01-08T20:00 --interval 5s --lots", storeFlags, dictFlags, policyFlags)
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
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError("whatif: unexpected arguments %q", fs.Args())
	}
	if *policies == "" {
		return UsageError("whatif: --policy is required (for example ENTRIES_READ_PARTICIPANT_ANTISCAN)")
	}
	eng, err := openAdminEngine(ctx, *cfg, m.Clock)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()
	tr := m.printerIn(cfg)
	q := whatif.Query{Policies: strings.Split(*policies, ","), Scenario: sc}
	if q.To, err = whatif.ParseWhen(*to, eng.Limiter().Now(), tr.Location()); err != nil {
		return UsageError("whatif: --to: %v", err)
	}
	if q.From, err = whatif.ParseWhen(*from, q.To.Add(-24*time.Hour), tr.Location()); err != nil {
		return UsageError("whatif: --from: %v", err)
	}
	for _, p := range q.Policies {
		if !slices.Contains(eng.PolicyNames(), p) {
			return UsageError("whatif: unknown policy %q (known: %s)", p, strings.Join(eng.PolicyNames(), ", "))
		}
	}
	rep, err := whatif.Run(ctx, whatif.Config{Source: eng.Store(), Limiter: eng.Limiter(), Dict: eng.DictCatalog(),
		Sifen: sifen.SenderConfig{RemoteBlock: cfg.SifenBlockStep, RemoteBlockMax: cfg.SifenBlockMax}}, q)
	if errors.Is(err, whatif.ErrInvalid) {
		return UsageError("%v", err)
	}
	if err != nil {
		return err
	}
	return report.WriteWhatif(m.Stdout, tr, rep, *lots)
}
