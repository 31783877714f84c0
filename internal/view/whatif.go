package view

import (
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/whatif"
)

// Whatif is a what-if replay rendered in a language, for the page and the
// command alike.
type Whatif struct {
	Summary string
	// Policies are the policies with some decision in the period; Notes are
	// the findings (whatif.Report.Notes), then the policies without one.
	Policies []WhatifPolicy
	Notes    []string
	Lots     []WhatifLot
}

// WhatifPolicy is one policy's table: the period, then its hours.
type WhatifPolicy struct {
	Policy, Recorded string // Recorded is empty when the numbers are the same
	Rows             []WhatifRow
}

// WhatifRow is one line of a WhatifPolicy.
type WhatifRow struct {
	Label, Requests, RefusedThen, RefusedNow, Worse, Better, LongestWait, FirstBite string
}

// WhatifLot is one SIFEN lot; a time it did not happen is "-".
type WhatifLot struct {
	Ref, RUC, Arrived, Sent, ReplaySent, Answered, ReplayAnswered string
}

// NewWhatif renders rep in tr's language.
func NewWhatif(tr *i18n.Printer, rep *whatif.Report) *Whatif {
	out := &Whatif{Summary: tr.Sprintf("What if, from %s to %s: %s ledger rows, %s requests replayed.",
		tr.Zoned(rep.Query.From), tr.Zoned(rep.Query.To), tr.Int(rep.Rows), tr.Int(rep.Requests)), Notes: rep.Notes(tr)}
	row := func(label string, h whatif.Hour) WhatifRow {
		v := WhatifRow{Label: label, Requests: tr.Int(h.Requests), RefusedThen: tr.Int(h.RefusedThen), RefusedNow: tr.Int(h.RefusedNow),
			Worse: tr.Int(h.Worse), Better: tr.Int(h.Better), LongestWait: FormatWait(h.LongestWait)}
		if !h.FirstBite.IsZero() {
			v.FirstBite = tr.Zoned(h.FirstBite)
		}
		return v
	}
	for _, p := range rep.Policies {
		if p.Total.Requests == 0 {
			out.Notes = append(out.Notes, tr.Sprintf("%s: no decision recorded in the period.", p.Policy))
			continue
		}
		v := WhatifPolicy{Policy: FormatPolicyIn(tr, p.Replayed), Rows: []WhatifRow{row(tr.Sprintf("period"), p.Total)}}
		if p.Recorded != p.Replayed {
			v.Recorded = tr.Sprintf("recorded under %s", FormatPolicyIn(tr, p.Recorded))
		}
		for _, h := range p.Hours {
			v.Rows = append(v.Rows, row(h.Start.In(tr.Location()).Format("2006-01-02 15:04"), h))
		}
		out.Policies = append(out.Policies, v)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(tr.Location()).Format("15:04:05.0")
	}
	for _, l := range rep.Lots {
		out.Lots = append(out.Lots, WhatifLot{Ref: l.Ref, RUC: l.Key.Identifier, Arrived: at(l.Arrived), Sent: at(l.Sent),
			ReplaySent: at(l.ReplaySent), Answered: at(l.Answered), ReplayAnswered: at(l.ReplayAnswered)})
	}
	return out
}
