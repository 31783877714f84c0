package throttle

// Granularity returns how the limiter writes the routine takes of p to the
// ledger: p.Ledger, or the limiter's Config.Ledger when p leaves it at
// LedgerDefault (LedgerEveryTake when both do). A replay of the ledger
// needs LedgerEveryTake.
func (l *Limiter) Granularity(p Policy) LedgerGranularity {
	g := p.Ledger
	if g == ledgerDefault {
		g = l.ledger
	}
	if g == ledgerDefault {
		g = LedgerEveryTake
	}
	return g
}
