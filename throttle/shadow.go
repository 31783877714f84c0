package throttle

import "slices"

// anyShadow reports whether a policy of ps is in shadow mode: such a take
// is decided by the store, never from the refusal cache, so that its
// would-be refusal is recorded as one.
func (l *Limiter) anyShadow(ps []priced) bool {
	for _, p := range ps {
		if l.shadow(p.policy.Name) {
			return true
		}
	}
	return false
}

// take is tx.take with shadow mode (Config.Shadow): a refusal whose
// refusing buckets all belong to policies in shadow mode becomes an
// admission (Decision.Shadow), its refusal rows shadow rows. The buckets
// of the policies in shadow mode stay as the refusal left them; those of
// enforcing policies in the same take are charged, the request being
// sent (docs/decisions/0200).
func (l *Limiter) take(tx *Tx, ref string, ps []priced) Decision {
	rows := len(tx.ledger)
	d := tx.take(ref, ps, l.rules)
	if d.Allowed {
		return d
	}
	for _, bd := range d.Buckets {
		if bd.Reason != ReasonNone && !l.shadow(bd.Policy.Name) {
			return d
		}
	}
	for i := rows; i < len(tx.ledger); i++ {
		if j := slices.Index(RefusalReasons, tx.ledger[i].Reason); j >= 0 {
			tx.ledger[i].Reason = ShadowReasons[j]
		}
	}
	var enforcing []priced
	for _, p := range ps {
		if !l.shadow(p.policy.Name) {
			enforcing = append(enforcing, p)
		}
	}
	if len(enforcing) > 0 {
		// They admitted a moment ago in this transaction, and the refusal
		// changed none of their buckets: this take admits them.
		e := tx.take(ref, enforcing, l.rules)
		if !e.Allowed {
			return e
		}
		for _, bd := range e.Buckets {
			for i := range d.Buckets {
				if d.Buckets[i].Key == bd.Key {
					d.Buckets[i] = bd
				}
			}
		}
	}
	d.Allowed, d.Shadow = true, true
	d = d.decided()
	d.Reason, d.RetryAfter = ReasonNone, 0
	return d
}
