package web

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
)

// DictCategoryPanel is the admin summary's box about the DICT participant:
// its ISPB, its category (the DICT's, once reconciliation learned it, or
// the configured one) and the anti-scan bucket that category gives it.
func DictCategoryPanel(catalog *dict.Catalog, participant string) PanelFunc {
	return func(context.Context) (Panel, error) {
		p := Panel{Title: "DICT participant"}
		p.Rows = append(p.Rows,
			PanelRow{Label: "ISPB", Value: participant},
			PanelRow{Label: "Category", Value: cmp.Or(catalog.Category(), "none known (the strictest, H, applies)")})
		key := catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, participant)
		if pol, err := catalog.Resolve(key); err == nil {
			p.Rows = append(p.Rows, PanelRow{Label: "Anti-scan bucket",
				Value: "%d%s, capacity %d", ValueArgs: []any{pol.RefillTokens, view.RatePeriod(pol), pol.Capacity}})
		}
		return p, nil
	}
}

const (
	antiScanWindow = 24 * time.Hour // of the DICT manual's anti-scan monitors
	maxPanelPayers = 5              // the payers the anti-scan panel lists, worst first
)

// AntiScanPanel is the admin summary's box of the DICT manual's anti-scan
// monitors over the last 24 hours (dictsql.Records.Monitors): lookups per
// payment order, the 404 share per participant and of the payers with at
// least 100 lookups; suspicious values are coloured critical.
func AntiScanPanel(monitors func(ctx context.Context, since time.Time) (dict.AntiScan, error), now func() time.Time) PanelFunc {
	return func(ctx context.Context) (Panel, error) {
		a, err := monitors(ctx, now().Add(-antiScanWindow))
		if err != nil {
			return Panel{}, err
		}
		p := Panel{
			Title:    "DICT anti-scan monitors (24 h)",
			Note:     "Suspicious: a participant with more than %s of its lookups ending in 404; a payer with at least %d lookups and more than %s.",
			NoteArgs: []any{i18n.Share(dict.ParticipantNotFoundLimit), dict.PayerMinLookups, i18n.Share(dict.PayerNotFoundLimit)},
		}
		perPayment := PanelRow{Label: "Lookups per payment order", Value: "no payment order yet"}
		if a.Payments > 0 {
			perPayment.Value, perPayment.ValueArgs = "%.1f", []any{a.LookupsPerPayment()}
		}
		p.Rows = append(p.Rows,
			PanelRow{Label: "Lookups", Value: "%d", ValueArgs: []any{a.Lookups}},
			PanelRow{Label: "Payment orders", Value: "%d", ValueArgs: []any{a.Payments}},
			perPayment)
		if len(a.Participants) == 0 {
			p.Rows = append(p.Rows, PanelRow{Label: "404 share per participant", Value: "no lookup"})
		}
		for _, c := range a.Participants {
			p.Rows = append(p.Rows, scanRow("404 share, participant %s", c))
		}
		var suspicious int64
		for _, c := range a.Payers {
			if c.Suspicious {
				suspicious++
			}
		}
		watched := strconv.Itoa(len(a.Payers))
		if len(a.Payers) == dict.MaxMonitoredPayers {
			watched += "+"
		}
		p.Rows = append(p.Rows, PanelRow{Label: "Payers with ≥ %d lookups", LabelArgs: []any{dict.PayerMinLookups},
			Value: "%s (%d suspicious)", ValueArgs: []any{watched, suspicious}, Class: cmp.Or(countClass(suspicious, "sev-critical"), "sev-healthy")})
		for _, c := range a.Payers[:min(len(a.Payers), maxPanelPayers)] {
			p.Rows = append(p.Rows, scanRow("404 share, payer %s", c))
		}
		return p, nil
	}
}

// scanRow renders one monitored participant or payer: "2.5 % (5 of 200)";
// label is a format of its id.
func scanRow(label string, c dict.ScanCount) PanelRow {
	r := PanelRow{Label: label, LabelArgs: []any{c.ID}, Value: "%s (%d of %d)",
		ValueArgs: []any{i18n.Share(c.NotFoundPerMille()), c.NotFound, c.Lookups}, Class: "sev-healthy"}
	if c.Suspicious {
		r.Class = "sev-critical"
		r.Value = "%s (%d of %d) suspicious"
	}
	return r
}

// SifenDocumentsPanel is the admin summary's box of SIFEN documents by
// status, those SIFEN did not queue (0301) apart from the other errors.
func SifenDocumentsPanel(sender sifenSender) PanelFunc {
	return func(ctx context.Context) (Panel, error) {
		counts, err := sender.CountByStatus(ctx, "")
		if err != nil {
			return Panel{}, err
		}
		notQueued, err := countNotQueued(ctx, sender, counts[sifen.StatusError])
		if err != nil {
			return Panel{}, err
		}
		p := Panel{Title: "SIFEN documents"}
		row := func(label string, n int64, class string) {
			p.Rows = append(p.Rows, PanelRow{Label: label, Value: "%d", ValueArgs: []any{n}, Class: countClass(n, class)})
		}
		for _, st := range documentStatuses {
			switch st {
			case sifen.StatusDraft:
				row(string(st), counts[st], "")
			case sifen.StatusError:
				row(notQueuedLabel, notQueued, statusClass(st))
				row(string(st), counts[st]-notQueued, statusClass(st))
			default:
				row(string(st), counts[st], statusClass(st))
			}
		}
		return p, nil
	}
}
