package throttle

import "cmp"

// Granularity returns how the limiter writes the routine takes of p to the
// ledger: p.Ledger, or the limiter's Config.Ledger when p leaves it at
// LedgerDefault (LedgerEveryTake when both do). A replay of the ledger
// needs LedgerEveryTake.
func (l *Limiter) Granularity(p Policy) LedgerGranularity { return cmp.Or(p.Ledger, l.ledger) }
