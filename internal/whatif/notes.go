package whatif

import (
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/throttle"
)

// Notes are the report's findings in words, in tr's language, for the
// command and the page alike: whether the DICT participant's allowance
// would have sufficed, how the requests whose outcome was never observed
// were counted, when each RUC's batch would have ended, and what the
// replay left out.
func (r *Report) Notes(tr *i18n.Printer) []string {
	var out []string
	for _, p := range r.Policies {
		if !isParticipant(throttle.Key{Policy: p.Policy}) || p.Total.Requests == 0 {
			continue
		}
		if p.Sufficed() {
			out = append(out, tr.Sprintf("%s: the participant's allowance would have sufficed; its lowest balance would have been %s of %s.",
				p.Policy, tr.Int(p.Lowest), tr.Int(p.Capacity)))
		} else {
			out = append(out, tr.Sprintf("%s: the participant's allowance would not have sufficed (lookups refused: %s, the first at %s); its lowest balance would have been %s of %s.",
				p.Policy, tr.Int(p.Total.RefusedNow), tr.Zoned(p.FirstRefused), tr.Int(p.Lowest), tr.Int(p.Capacity)))
		}
	}
	if r.Unobserved == 0 {
		out = append(out, tr.Sprintf("Every request of the period was admitted in the recorded run: each replayed outcome is the one observed."))
	} else {
		out = append(out, tr.Sprintf("Requests refused in the recorded run: %s. Their outcome was never observed: each one the replay admits is counted at its worst, it keeps what it held (for the DICT, a 404: 20 tokens of the payer, 3 of the participant). A lookup the participant's bucket refused is replayed without its payer's bucket, which the ledger does not name.",
			tr.Int(r.Unobserved)))
		for _, p := range r.Policies {
			if p.BestRefused != p.Total.RefusedNow {
				out = append(out, tr.Sprintf("%s: with those outcomes at their best (nothing kept, a 500), the requests refused would have been %s instead of %s.",
					p.Policy, tr.Int(p.BestRefused), tr.Int(p.Total.RefusedNow)))
			}
		}
	}
	assumed := 0
	for _, l := range r.Lots {
		if l.Assumed {
			assumed++
		}
	}
	for _, u := range r.RUCs {
		then, now := u.RecordedEnd.Sub(u.First), u.ReplayEnd.Sub(u.First)
		args := []any{u.Key.String(), tr.Int(int64(u.Lots)), tr.Zoned(u.First), roundWait(now), roundWait(then)}
		switch {
		case now < then:
			out = append(out, tr.Sprintf("%s: %s lots from %s; the last would have ended %s after the first try (recorded: %s), %s sooner.", append(args, roundWait(then-now))...))
		case now > then:
			out = append(out, tr.Sprintf("%s: %s lots from %s; the last would have ended %s after the first try (recorded: %s), %s later.", append(args, roundWait(now-then))...))
		default:
			out = append(out, tr.Sprintf("%s: %s lots from %s; the last would have ended %s after the first try, as recorded.", args[:4]...))
		}
	}
	if assumed > 0 {
		out = append(out, tr.Sprintf("Lots with no answer in the recorded period: %s. The replay gives each the longest flight seen on its RUC.", tr.Int(int64(assumed))))
	}
	if r.Syncs > 0 {
		out = append(out, tr.Sprintf("Syncs to the remote side's state (a DICT 429, a reconciliation) not replayed: %s. The replay takes the remote side to count as balde does.", tr.Int(r.Syncs)))
	}
	if r.Orphans > 0 {
		out = append(out, tr.Sprintf("Settles of requests taken before the period, not replayed: %s.", tr.Int(r.Orphans)))
	}
	if r.PartEmpty > 0 {
		out = append(out, tr.Sprintf("Buckets neither full nor idle when the period began: %s. Each starts as many tokens short of the what-if's capacity as it was of the recorded one, with no cooldown or block running.", tr.Int(r.PartEmpty)))
	}
	return out
}

// roundWait renders a wait to the tenth of a second (to the second past a
// minute): "21.4s", "2m5s".
func roundWait(d time.Duration) string {
	if d > time.Minute || d < -time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
