package whatif

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// model is the period's ledger read as what happened: requests with their
// outcome, credits, resets (events, in order) and SIFEN lots per RUC.
type model struct {
	events []event
	rucs   []*ruc
	// start is the state of the buckets the period found neither full nor
	// idle; first is each policy's first key; seen marks the buckets read.
	start map[throttle.Key]throttle.Bucket
	first map[string]throttle.Key
	seen  map[throttle.Key]bool
	// unobserved counts the requests the recorded run refused;
	// unobservedDict: one of them charges a DICT bucket.
	unobserved     int64
	unobservedDict bool
	syncs, orphans int64
	// requests counts the requests (one each, whatever it charges).
	requests int64
}

// request is one request: the keys it charges (in the order of its rows),
// what it holds of each, and how the recorded run decided it.
type request struct {
	ref   string
	at    time.Time
	keys  []throttle.Key
	holds []int64
	// refused is, per key, the recorded refusal's reason (0: none).
	refused  []throttle.LedgerReason
	admitted bool
	// Each pass's state: admitted, and per key what the what-if cut from
	// the hold and whether it was settled.
	now     bool
	cut     []int64
	settled []bool
}

type eventKind uint8

const (
	evTake eventKind = iota
	evSettle
	evCredit
	evReset
)

// event is one thing to replay at its instant: a request's take, one
// bucket's settle (req's key i), a credit (req nil: before the period), a reset.
type event struct {
	kind  eventKind
	at    time.Time
	req   *request
	i     int
	key   throttle.Key
	delta int64
	ref   string
}

// queueGap is how soon after its RUC's previous answer a lot queued behind
// it is first tried (a batch tries the next lot as soon as a send returns).
const queueGap = time.Second

// ruc is one SIFEN key's lots, oldest first, and the state to follow them.
type ruc struct {
	key  throttle.Key
	lots []*lot
	// parse
	open       map[string]*lot
	inflight   *lot
	lastAnswer time.Time
	maxFlight  time.Duration
	// replay
	head int
}

type lot struct {
	Lot
	queued      bool // tried first right after the RUC's previous answer (or during it)
	refusedThen bool // its first recorded try was refused
	answer      string
	flight      time.Duration // take to answer; with answered false, none
	answered    bool
	// replay
	tried, refusedNow bool
	held              time.Time
}

// parse reads rows (sorted) into a model.
func parse(rows []throttle.LedgerEntry, res *resolver, cfg Config) (*model, error) {
	m := &model{start: make(map[throttle.Key]throttle.Bucket), first: make(map[string]throttle.Key),
		seen: make(map[throttle.Key]bool)}
	last := make(map[string]*request) // by reference: the latest request
	rucs := make(map[throttle.Key]*ruc)
	participants := make(map[string][]string) // env → participant ISPBs
	var refused []*request
	for _, e := range rows {
		if err := m.see(e, res); err != nil {
			return nil, err
		}
		if e.Key.Policy == sifen.PolicyRecepcionLote && e.Reason != throttle.LedgerReset {
			m.lotRow(e, rucs)
			continue
		}
		if i := slices.Index(throttle.ShadowReasons, e.Reason); i >= 0 {
			// A shadow refusal left its bucket as a refusal does: replay it as one.
			e.Reason = throttle.RefusalReasons[i]
		}
		switch e.Reason {
		case throttle.LedgerTake:
			if e.Count > 1 {
				return nil, aggregated(e.Key.Policy)
			}
			r := last[e.Ref]
			if e.Ref == "" || r == nil || !r.admitted || !r.at.Equal(e.At) {
				r = m.request(e, true)
				last[e.Ref] = r
			}
			r.keys, r.holds, r.refused = append(r.keys, e.Key), append(r.holds, -e.Delta), append(r.refused, 0)
			if isParticipant(e.Key) && !slices.Contains(participants[e.Key.Env], e.Key.Identifier) {
				participants[e.Key.Env] = append(participants[e.Key.Env], e.Key.Identifier)
			}
		case throttle.LedgerRefusedEmpty, throttle.LedgerRefusedCooldown, throttle.LedgerRefusedBlocked:
			// A group of refusals answered from memory (Count > 1, no
			// reference) is that many requests of one key at its time.
			for range max(e.Count, 1) {
				r := last[e.Ref]
				if e.Ref == "" || e.Count > 1 || r == nil || r.admitted || !r.at.Equal(e.At) {
					r = m.request(e, false)
					last[e.Ref] = r
					refused = append(refused, r)
				}
				r.keys, r.holds, r.refused = append(r.keys, e.Key), append(r.holds, res.hold(e.Key)), append(r.refused, e.Reason)
			}
		case throttle.LedgerRefund, throttle.LedgerPenalty:
			r := last[e.Ref]
			i := -1
			if e.Ref != "" && r != nil && r.admitted {
				i = slices.Index(r.keys, e.Key)
			}
			if i < 0 {
				m.orphans++
				continue
			}
			m.events = append(m.events, event{kind: evSettle, at: e.At, req: r, i: i, delta: e.Delta})
		case throttle.LedgerCredit:
			ev := event{kind: evCredit, at: e.At, key: e.Key, delta: e.Delta, ref: e.Ref, req: last[e.Ref]}
			if res.isDict(e.Key) {
				if n, err := cfg.Dict.Credit(e.Key, dict.EventPayment); err == nil {
					ev.delta = n
				}
			}
			m.events = append(m.events, ev)
		case throttle.LedgerReset:
			m.events = append(m.events, event{kind: evReset, at: e.At, key: e.Key, ref: e.Ref})
		case throttle.LedgerSync:
			m.syncs++
		default:
			return nil, fmt.Errorf("%w: %s: the ledger holds %q rows, which a replay cannot follow one decision at a time",
				ErrInvalid, e.Key.Policy, e.Reason)
		}
	}
	// A lookup the payer's bucket refused has no row on the participant's,
	// charged all the same: give it the period's only participant.
	for _, r := range refused {
		m.unobserved++
		for _, k := range r.keys {
			if k.Policy != dict.PolicyEntriesReadUserAntiscan && k.Policy != dict.PolicyEntriesReadUserAntiscanV2 {
				continue
			}
			if ps := participants[k.Env]; len(ps) == 1 && !slices.ContainsFunc(r.keys, isParticipant) {
				p := throttle.Key{Policy: dict.PolicyEntriesReadParticipantAntiscan, Env: k.Env, Identifier: ps[0]}
				r.keys, r.holds, r.refused = append(r.keys, p), append(r.holds, res.hold(p)), append(r.refused, 0)
			}
		}
		if slices.ContainsFunc(r.keys, func(k throttle.Key) bool { return res.isDict(k) }) {
			m.unobservedDict = true
		}
	}
	m.finishLots()
	return m, nil
}

// see checks each bucket's first row (checkPolicy), records its policy's
// first key, and records a bucket its first row shows was not full as that
// many tokens short of the what-if's capacity.
func (m *model) see(e throttle.LedgerEntry, res *resolver) error {
	if m.seen[e.Key] {
		return nil
	}
	m.seen[e.Key] = true
	if err := checkPolicy(e.Key, res); err != nil {
		return err
	}
	m.first[e.Key.Policy] = cmp.Or(m.first[e.Key.Policy], e.Key)
	p := res.get(e.Key)
	if before := e.Balance - e.Delta; before < p.then.Capacity {
		tokens := max(p.now.Capacity-(p.then.Capacity-before), -throttle.MaxTokens)
		m.start[e.Key] = throttle.Bucket{Key: e.Key, Tokens: tokens, RefilledAt: e.At}
	}
	return nil
}

// checkPolicy refuses k's policy unless the ledger holds every take of it.
func checkPolicy(k throttle.Key, res *resolver) error {
	p := res.get(k)
	if p.err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, k, p.err)
	}
	if res.cfg.Limiter.Granularity(p.then) != throttle.LedgerEveryTake {
		return aggregated(k.Policy)
	}
	return nil
}

func aggregated(policy string) error {
	return fmt.Errorf("%w: %s: the ledger does not hold its takes one by one (BALDE_LEDGER or the policy's ledger is minute or none): a replay needs every take", ErrInvalid, policy)
}

func isParticipant(k throttle.Key) bool { return k.Policy == dict.PolicyEntriesReadParticipantAntiscan }

// request starts the request of row e, its take event first.
func (m *model) request(e throttle.LedgerEntry, admitted bool) *request {
	r := &request{ref: e.Ref, at: e.At, admitted: admitted}
	m.requests++
	m.events = append(m.events, event{kind: evTake, at: e.At, req: r})
	return r
}

// lotRow follows one row of a RUC's gate: a refusal or a take starts a lot,
// a take sends it, the sync after a take is its answer.
func (m *model) lotRow(e throttle.LedgerEntry, rucs map[throttle.Key]*ruc) {
	u := rucs[e.Key]
	if u == nil {
		u = &ruc{key: e.Key, open: make(map[string]*lot)}
		rucs[e.Key] = u
		m.rucs = append(m.rucs, u)
	}
	switch e.Reason {
	case throttle.LedgerTake, throttle.LedgerRefusedEmpty, throttle.LedgerRefusedCooldown, throttle.LedgerRefusedBlocked:
		if e.Reason != throttle.LedgerTake && (e.Ref == "" || e.Count > 1) {
			return // retries answered from memory: the lot's first try is its own row
		}
		l := u.open[e.Ref]
		if l == nil {
			l = &lot{Lot: Lot{Key: e.Key, Ref: e.Ref, Arrived: e.At}, refusedThen: e.Reason != throttle.LedgerTake,
				queued: u.inflight != nil || !u.lastAnswer.IsZero() && e.At.Sub(u.lastAnswer) <= queueGap}
			u.lots = append(u.lots, l)
			u.open[e.Ref] = l
		}
		if e.Reason == throttle.LedgerTake {
			l.Sent = e.At
			delete(u.open, e.Ref)
			u.inflight = l
		}
	case throttle.LedgerSync:
		if l := u.inflight; l != nil {
			l.Answered, l.answer, l.answered = e.At, e.Ref, true
			l.flight = e.At.Sub(l.Sent)
			u.maxFlight = max(u.maxFlight, l.flight)
			u.inflight = nil
		}
		u.lastAnswer = e.At
	}
}

// finishLots gives each unanswered lot its RUC's longest flight (else any RUC's).
func (m *model) finishLots() {
	var longest time.Duration
	for _, u := range m.rucs {
		longest = max(longest, u.maxFlight)
	}
	for _, u := range m.rucs {
		flight := cmp.Or(u.maxFlight, longest)
		for _, l := range u.lots {
			if !l.answered {
				l.Assumed = true
				l.flight, l.answered = flight, flight > 0
			}
		}
		u.open, u.inflight = nil, nil
	}
}
