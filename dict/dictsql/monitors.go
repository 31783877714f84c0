package dictsql

import (
	"context"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/sqlkit"
)

// Monitors computes the anti-scan monitors over the lookups made at or after
// since (the manual's window is 24 h), through the index on looked_up_at.
func (r *Records) Monitors(ctx context.Context, since time.Time) (dict.AntiScan, error) {
	a := dict.AntiScan{Since: since}
	from := since.UnixNano()
	const counts = `COUNT(*) AS lookups, SUM(CASE WHEN status = 404 THEN 1 ELSE 0 END) AS not_found
		FROM balde_dict_lookups
		WHERE looked_up_at >= ? AND status IN (200, 404)`
	err := r.get(ctx, &a.Payments, r.read.Rebind(`SELECT COUNT(*) FROM balde_dict_lookups WHERE paid_at >= ?`), from)
	if err == nil {
		err = r.selectAll(ctx, &a.Participants, r.read.Rebind(`SELECT participant AS id, `+counts+`
		GROUP BY participant
		ORDER BY participant`), from)
	}
	if err == nil {
		err = r.selectAll(ctx, &a.Payers, r.read.Rebind(`SELECT payer_id AS id, `+counts+`
		GROUP BY payer_id
		HAVING COUNT(*) >= ?
		ORDER BY SUM(CASE WHEN status = 404 THEN 1 ELSE 0 END) * 1000000 / COUNT(*) DESC, payer_id
		LIMIT ?`), from, dict.PayerMinLookups, dict.MaxMonitoredPayers)
	}
	if err != nil {
		return a, sqlkit.StoreError("dict", "monitors", err)
	}
	for i, p := range a.Participants {
		a.Lookups += p.Lookups // every lookup in the window is one participant's
		a.Participants[i].Suspicious = p.NotFound*1000 > dict.ParticipantNotFoundLimit*p.Lookups
	}
	for i, p := range a.Payers {
		a.Payers[i].Suspicious = p.NotFound*1000 > dict.PayerNotFoundLimit*p.Lookups
	}
	return a, nil
}
