package dict

import (
	"context"
	"fmt"
	"time"
)

// Thresholds of the anti-scan monitors of the DICT manual.
const (
	// ParticipantNotFoundLimit: a participant whose lookups end in 404 more
	// often than this is suspicious (7 %), in per mille.
	ParticipantNotFoundLimit = 70
	// PayerNotFoundLimit: a payer with at least PayerMinLookups lookups
	// whose lookups end in 404 more often than this is suspicious (20 %),
	// in per mille.
	PayerNotFoundLimit = 200
	// PayerMinLookups is the number of lookups in the window from which a
	// payer is watched (100 in 24 h).
	PayerMinLookups = 100
	// MaxMonitoredPayers bounds the payers a monitor returns (the worst first).
	MaxMonitoredPayers = 100
)

// AntiScan is what the anti-scan monitors saw in a window. Only lookups the
// DICT answered with 200 or 404 count.
type AntiScan struct {
	Since time.Time
	// Lookups is the number of lookups in the window; Payments the number
	// of them credited by a payment order.
	Lookups  int64
	Payments int64
	// Participants has one row per requesting participant.
	Participants []ScanCount
	// Payers has the payers with at least PayerMinLookups lookups, the
	// highest share of 404s first, at most MaxMonitoredPayers.
	Payers []ScanCount
}

// LookupsPerPayment is Lookups / Payments (the manual's "consultas por
// ordem de pagamento"); 0 when there was no payment.
func (a AntiScan) LookupsPerPayment() float64 {
	if a.Payments == 0 {
		return 0
	}
	return float64(a.Lookups) / float64(a.Payments)
}

// ScanCount counts the lookups of one participant or payer.
type ScanCount struct {
	// ID is the participant's ISPB or the payer's CPF or CNPJ.
	ID       string `db:"id"`
	Lookups  int64  `db:"lookups"`
	NotFound int64  `db:"not_found"`
	// Suspicious is set when the share of 404s is above the limit.
	Suspicious bool `db:"-"`
}

// NotFoundPerMille is the share of lookups that ended in 404, in per mille
// (rounded down).
func (s ScanCount) NotFoundPerMille() int64 {
	if s.Lookups == 0 {
		return 0
	}
	return s.NotFound * 1000 / s.Lookups
}

// Monitors computes the anti-scan monitors over the lookups made at or
// after since (the manual's window is 24 h: pass now minus 24 h). Each query
// reads the window through the index on looked_up_at.
func (r *Records) Monitors(ctx context.Context, since time.Time) (AntiScan, error) {
	a := AntiScan{Since: since}
	from := since.UnixNano()
	err := r.read.GetContext(ctx, &a.Lookups, r.read.Rebind(`
		SELECT COUNT(*)
		FROM balde_dict_lookups
		WHERE looked_up_at >= ? AND status IN (200, 404)`), from)
	if err != nil {
		return a, fmt.Errorf("dict: monitors: %w", storeError(err))
	}
	err = r.read.GetContext(ctx, &a.Payments, r.read.Rebind(`
		SELECT COUNT(*)
		FROM balde_dict_lookups
		WHERE paid_at >= ?`), from)
	if err != nil {
		return a, fmt.Errorf("dict: monitors: %w", storeError(err))
	}
	if err := r.read.SelectContext(ctx, &a.Participants, r.read.Rebind(`
		SELECT
			participant AS id,
			COUNT(*) AS lookups,
			SUM(CASE WHEN status = 404 THEN 1 ELSE 0 END) AS not_found
		FROM balde_dict_lookups
		WHERE looked_up_at >= ? AND status IN (200, 404)
		GROUP BY participant
		ORDER BY participant`), from); err != nil {
		return a, fmt.Errorf("dict: monitors: %w", storeError(err))
	}
	if err := r.read.SelectContext(ctx, &a.Payers, r.read.Rebind(`
		SELECT
			payer_id AS id,
			COUNT(*) AS lookups,
			SUM(CASE WHEN status = 404 THEN 1 ELSE 0 END) AS not_found
		FROM balde_dict_lookups
		WHERE looked_up_at >= ? AND status IN (200, 404)
		GROUP BY payer_id
		HAVING COUNT(*) >= ?
		ORDER BY SUM(CASE WHEN status = 404 THEN 1 ELSE 0 END) * 1000000 / COUNT(*) DESC, payer_id
		LIMIT ?`), from, PayerMinLookups, MaxMonitoredPayers); err != nil {
		return a, fmt.Errorf("dict: monitors: %w", storeError(err))
	}
	for i := range a.Participants {
		a.Participants[i].Suspicious = a.Participants[i].NotFound*1000 > ParticipantNotFoundLimit*a.Participants[i].Lookups
	}
	for i := range a.Payers {
		a.Payers[i].Suspicious = a.Payers[i].NotFound*1000 > PayerNotFoundLimit*a.Payers[i].Lookups
	}
	return a, nil
}
