package dict

import "time"

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

// NotFoundPerMille is the share of lookups that ended in 404, in per mille,
// rounded to the nearest (10 of 18 is 556, shown "55.6 %").
func (s ScanCount) NotFoundPerMille() int64 {
	if s.Lookups == 0 {
		return 0
	}
	return (s.NotFound*2000 + s.Lookups) / (2 * s.Lookups)
}
