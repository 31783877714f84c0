package dict

import "time"

// Thresholds of the anti-scan monitors of the DICT manual: a participant, or
// a payer with at least PayerMinLookups lookups in the window, whose share
// of 404s (in per mille) is above its limit is suspicious.
const (
	ParticipantNotFoundLimit = 70  // 7 %
	PayerNotFoundLimit       = 200 // 20 %
	PayerMinLookups          = 100
	MaxMonitoredPayers       = 100 // the worst payers a monitor returns
)

// AntiScan is what the anti-scan monitors saw in a window. Only lookups the
// DICT answered with 200 or 404 count.
type AntiScan struct {
	Since    time.Time
	Lookups  int64 // in the window
	Payments int64 // lookups credited by a payment order
	// Participants has one row per participant; Payers the payers with at
	// least PayerMinLookups lookups, the highest share of 404s first.
	Participants, Payers []ScanCount
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
	ID         string `db:"id"` // the participant's ISPB or the payer's CPF or CNPJ
	Lookups    int64  `db:"lookups"`
	NotFound   int64  `db:"not_found"`
	Suspicious bool   `db:"-"` // the share of 404s is above the limit
}

// NotFoundPerMille is the share of lookups that ended in 404, in per mille,
// rounded to the nearest (10 of 18 is 556, shown "55.6 %").
func (s ScanCount) NotFoundPerMille() int64 {
	if s.Lookups == 0 {
		return 0
	}
	return (s.NotFound*2000 + s.Lookups) / (2 * s.Lookups)
}
