package throttle

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

// admitShadow turns a refusal d whose refusing buckets all belong to
// policies in shadow mode into an admission (Decision.Shadow), and its
// refusal rows, rows (the take's), into shadow rows. The buckets stay as
// the refusal left them (docs/decisions/0200).
func (l *Limiter) admitShadow(d *Decision, rows []LedgerEntry) {
	if d.Allowed {
		return
	}
	for _, bd := range d.Buckets {
		if bd.Reason != ReasonNone && !l.shadow(bd.Policy.Name) {
			return
		}
	}
	for i := range rows {
		switch rows[i].Reason {
		case LedgerRefusedEmpty:
			rows[i].Reason = LedgerShadowEmpty
		case LedgerRefusedCooldown:
			rows[i].Reason = LedgerShadowCooldown
		case LedgerRefusedBlocked:
			rows[i].Reason = LedgerShadowBlocked
		}
	}
	d.Allowed, d.Shadow, d.Reason, d.RetryAfter = true, true, ReasonNone, 0
}
