package web

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
)

// DictCategoryPanel is the admin summary's box about the DICT participant:
// its ISPB, its category (the DICT's, once reconciliation learned it, or
// the configured one) and the anti-scan bucket that category gives it.
func DictCategoryPanel(catalog *dict.Catalog, participant string) PanelFunc {
	return func(context.Context) (Panel, error) {
		p := Panel{Title: "DICT participant"}
		category := catalog.Category()
		if category == "" {
			category = "none known (the strictest, H, applies)"
		}
		p.Rows = append(p.Rows,
			PanelRow{Label: "ISPB", Value: participant},
			PanelRow{Label: "Category", Value: category})
		key := catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, participant)
		if pol, err := catalog.Resolve(key); err == nil {
			p.Rows = append(p.Rows, PanelRow{Label: "Anti-scan bucket",
				Value: fmt.Sprintf("%s, capacity %d", pol.Rate(), pol.Capacity)})
		}
		return p, nil
	}
}

// AntiScanWindow is the window of the DICT manual's anti-scan monitors.
const AntiScanWindow = 24 * time.Hour

// maxPanelPayers bounds the payers the anti-scan panel lists (the worst
// first).
const maxPanelPayers = 5

// AntiScanPanel is the admin summary's box of the DICT manual's anti-scan
// monitors over the last 24 hours, from monitors (dictsql.Records.Monitors):
// lookups per payment order sent; the share of lookups that ended in 404
// per participant, suspicious above 7 %; and the payers with at least 100
// lookups, with their share of 404s, suspicious above 20 %. Suspicious
// values are coloured critical.
func AntiScanPanel(monitors func(ctx context.Context, since time.Time) (dict.AntiScan, error), now func() time.Time) PanelFunc {
	return func(ctx context.Context) (Panel, error) {
		a, err := monitors(ctx, now().Add(-AntiScanWindow))
		if err != nil {
			return Panel{}, err
		}
		p := Panel{
			Title: "DICT anti-scan monitors (24 h)",
			Note: fmt.Sprintf("Suspicious: a participant with more than %s of its lookups ending in 404; a payer with at least %d lookups and more than %s.",
				perMille(dict.ParticipantNotFoundLimit), dict.PayerMinLookups, perMille(dict.PayerNotFoundLimit)),
		}
		perPayment := "no payment order yet"
		if a.Payments > 0 {
			perPayment = strconv.FormatFloat(a.LookupsPerPayment(), 'f', 1, 64)
		}
		p.Rows = append(p.Rows,
			PanelRow{Label: "Lookups", Value: strconv.FormatInt(a.Lookups, 10)},
			PanelRow{Label: "Payment orders", Value: strconv.FormatInt(a.Payments, 10)},
			PanelRow{Label: "Lookups per payment order", Value: perPayment})
		if len(a.Participants) == 0 {
			p.Rows = append(p.Rows, PanelRow{Label: "404 share per participant", Value: "no lookup"})
		}
		for _, c := range a.Participants {
			p.Rows = append(p.Rows, scanRow("404 share, participant "+c.ID, c))
		}
		suspicious := 0
		for _, c := range a.Payers {
			if c.Suspicious {
				suspicious++
			}
		}
		watched := strconv.Itoa(len(a.Payers))
		if len(a.Payers) == dict.MaxMonitoredPayers {
			watched += "+"
		}
		class := "sev-healthy"
		if suspicious > 0 {
			class = "sev-critical"
		}
		p.Rows = append(p.Rows, PanelRow{Label: fmt.Sprintf("Payers with ≥ %d lookups", dict.PayerMinLookups),
			Value: fmt.Sprintf("%s (%d suspicious)", watched, suspicious), Class: class})
		for i, c := range a.Payers {
			if i == maxPanelPayers {
				break
			}
			p.Rows = append(p.Rows, scanRow("404 share, payer "+c.ID, c))
		}
		return p, nil
	}
}

// scanRow renders one monitored participant or payer: "2.5 % (5 of 200)".
func scanRow(label string, c dict.ScanCount) PanelRow {
	r := PanelRow{Label: label, Value: fmt.Sprintf("%s (%d of %d)", perMille(c.NotFoundPerMille()), c.NotFound, c.Lookups), Class: "sev-healthy"}
	if c.Suspicious {
		r.Class = "sev-critical"
		r.Value += " suspicious"
	}
	return r
}

// perMille renders a share in per mille as a percentage: 70 → "7.0 %".
func perMille(pm int64) string {
	return fmt.Sprintf("%d.%d %%", pm/10, pm%10)
}

// SifenDocumentsPanel is the admin summary's box of SIFEN documents by
// status (one counting query).
func SifenDocumentsPanel(sender SifenSender) PanelFunc {
	return func(ctx context.Context) (Panel, error) {
		counts, err := sender.CountByStatus(ctx, "")
		if err != nil {
			return Panel{}, err
		}
		p := Panel{Title: "SIFEN documents"}
		for _, st := range documentStatuses {
			n := counts[st]
			row := PanelRow{Label: string(st), Value: strconv.FormatInt(n, 10)}
			if n > 0 && st != sifen.StatusDraft {
				row.Class = statusClass(st)
			}
			p.Rows = append(p.Rows, row)
		}
		return p, nil
	}
}
