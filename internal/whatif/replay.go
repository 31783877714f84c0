package whatif

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// pass is one replay of a model: the engine's Limiter over a memStore.
type pass struct {
	ctx   context.Context
	cfg   Config
	res   *resolver
	m     *model
	best  bool // unobserved requests cost nothing (else they keep their hold)
	store *memStore
	lim   *throttle.Limiter
	lots  []timed // the lots' steps, in order
	seq   int
	// Per policy: the hours' counts, the lowest balance with its capacity,
	// the first refusal.
	hours  map[string]map[time.Time]*Hour
	lowest map[string][2]int64
	first  map[string]time.Time
}

// replay runs one pass over m.
func replay(ctx context.Context, cfg Config, res *resolver, m *model, best bool) (*pass, error) {
	p := &pass{ctx: ctx, cfg: cfg, res: res, m: m, best: best,
		store: &memStore{buckets: maps.Clone(m.start), credited: make(map[throttle.CreditRef]bool)},
		hours: make(map[string]map[time.Time]*Hour), lowest: make(map[string][2]int64),
		first: make(map[string]time.Time)}
	var err error
	p.lim, err = throttle.NewLimiter(p.store, res, throttle.Config{
		Clock: p.store.clock, Ledger: throttle.LedgerNoTakes, SkipRefusalRows: true,
		RefusalCacheSize: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	for _, u := range m.rucs {
		u.head = 0
		for _, l := range u.lots {
			l.ReplaySent, l.ReplayAnswered, l.held, l.tried, l.refusedNow = time.Time{}, time.Time{}, time.Time{}, false, false
		}
		if len(u.lots) > 0 {
			p.push(u.lots[0].Arrived, u, nil)
		}
	}
	for i := 0; i < len(m.events) || len(p.lots) > 0; {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(p.lots) > 0 && (i == len(m.events) || p.lots[0].at.Before(m.events[i].at)) {
			t := p.lots[0]
			p.lots = p.lots[1:]
			p.store.now = t.at
			err = p.lot(t)
		} else {
			p.store.now = m.events[i].at
			err = p.event(&m.events[i])
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	for _, u := range m.rucs {
		for _, l := range u.lots {
			p.countLot(l)
		}
	}
	return p, nil
}

// event replays one request, settle, credit or reset.
func (p *pass) event(ev *event) error {
	switch ev.kind {
	case evTake:
		return p.take(ev.req)
	case evSettle:
		r := ev.req
		if !r.now {
			return nil
		}
		delta := ev.delta
		if !r.settled[ev.i] {
			// The first settle also keeps what the smaller hold never took.
			delta -= r.cut[ev.i]
			r.settled[ev.i] = true
		}
		return p.adjust(r.keys[ev.i], delta, r.ref)
	case evCredit:
		if ev.delta <= 0 || ev.req != nil && !ev.req.now {
			return nil // the what-if refused the lookup: no payment followed it
		}
		_, err := p.lim.Adjust(p.ctx, throttle.Adjustment{Key: ev.key, Delta: ev.delta, Reason: throttle.LedgerCredit, Ref: ev.ref})
		return p.failed(ev.key, err)
	default:
		_, err := p.lim.Reset(p.ctx, ev.key, cmp.Or(ev.ref, "whatif"))
		return p.failed(ev.key, err)
	}
}

// take replays a request's take: its holds, capped at the what-if's capacity
// for a DICT policy (Catalog.Hold's rule), admitted on the catalog's admission.
func (p *pass) take(r *request) error {
	charges := make([]throttle.Charge, len(r.keys))
	r.cut, r.settled = make([]int64, len(r.keys)), make([]bool, len(r.keys))
	for i, k := range r.keys {
		pol := p.res.get(k)
		if pol.err != nil {
			return pol.err
		}
		c := throttle.Charge{Key: k, Cost: r.holds[i]}
		if admit, ok := p.res.admission(k); ok {
			c.Cost = min(c.Cost, pol.now.Capacity)
			if admit < c.Cost {
				c.Admit = admit
			}
		} else if c.Cost > pol.now.Capacity {
			return fmt.Errorf("%w: a request of %s costs %d tokens, more than the what-if's capacity %d", ErrInvalid, k.Policy, c.Cost, pol.now.Capacity)
		}
		r.cut[i] = r.holds[i] - c.Cost
		charges[i] = c
	}
	d, err := p.lim.Take(p.ctx, r.ref, charges...)
	if err != nil {
		return fmt.Errorf("whatif: replaying %s at %s: %w", r.ref, r.at.Format(time.RFC3339Nano), err)
	}
	r.now = d.Allowed
	if d.Allowed && !r.admitted && p.best {
		// At its best an unobserved outcome costs nothing: the DICT's
		// buckets get the whole hold back.
		for i, k := range r.keys {
			if p.res.isDict(k) {
				if err := p.adjust(k, charges[i].Cost, r.ref); err != nil {
					return err
				}
			}
		}
	}
	p.count(r, d)
	if p.cfg.OnDecision != nil {
		p.cfg.OnDecision(Decision{Ref: r.ref, At: r.at, Keys: r.keys, Recorded: r.admitted, Replayed: d})
	}
	return nil
}

// adjust gives back (delta > 0) or charges (delta < 0) key's bucket.
func (p *pass) adjust(key throttle.Key, delta int64, ref string) error {
	a := throttle.Adjustment{Key: key, Delta: delta, Reason: throttle.LedgerRefund, Ref: ref}
	switch {
	case delta == 0:
		return nil
	case delta < 0:
		a.Reason = throttle.LedgerPenalty
	}
	_, err := p.lim.Adjust(p.ctx, a)
	return p.failed(key, err)
}

func (p *pass) failed(key throttle.Key, err error) error {
	if err != nil {
		return fmt.Errorf("whatif: replaying %s at %s: %w", key, p.store.now.Format(time.RFC3339Nano), err)
	}
	return nil
}

// hour returns policy's counts of the hour of at.
func (p *pass) hour(policy string, at time.Time) *Hour {
	if p.hours[policy] == nil {
		p.hours[policy] = make(map[time.Time]*Hour)
	}
	start := at.Truncate(time.Hour)
	if p.hours[policy][start] == nil {
		p.hours[policy][start] = &Hour{Start: start}
	}
	return p.hours[policy][start]
}

// count adds a replayed request to its policies' hours.
func (p *pass) count(r *request, d throttle.Decision) {
	for _, bd := range d.Buckets {
		h := p.hour(bd.Key.Policy, r.at)
		h.Requests++
		if i := slices.Index(r.keys, bd.Key); i >= 0 && r.refused[i] != 0 {
			h.RefusedThen++
		}
		if bd.Reason != throttle.ReasonNone {
			if _, ok := p.first[bd.Key.Policy]; !ok {
				p.first[bd.Key.Policy] = r.at
			}
			h.RefusedNow++
			h.LongestWait = max(h.LongestWait, bd.RetryAfter)
			if r.admitted {
				h.Worse++
				if h.FirstBite.IsZero() {
					h.FirstBite = r.at
				}
			}
		}
		if d.Allowed && !r.admitted {
			h.Better++
		}
		if low, ok := p.lowest[bd.Key.Policy]; !ok || bd.Remaining < low[0] {
			p.lowest[bd.Key.Policy] = [2]int64{bd.Remaining, bd.Policy.Capacity}
		}
	}
}

// countLot adds a lot to its RUC policy's hour (of its first try).
func (p *pass) countLot(l *lot) {
	h := p.hour(l.Key.Policy, l.Arrived)
	h.Requests++
	if l.refusedThen {
		h.RefusedThen++
	}
	if l.refusedNow {
		h.RefusedNow++
	}
	if !l.ReplaySent.IsZero() {
		h.LongestWait = max(h.LongestWait, l.ReplaySent.Sub(l.Arrived))
	}
	switch {
	case !l.Sent.IsZero() && (l.ReplaySent.IsZero() || l.ReplaySent.After(l.Sent)):
		h.Worse++
		if h.FirstBite.IsZero() || l.Sent.Before(h.FirstBite) {
			h.FirstBite = l.Sent
		}
	case !l.ReplaySent.IsZero() && (l.Sent.IsZero() || l.ReplaySent.Before(l.Sent)):
		h.Better++
	}
}

// timed is a lot's next step: a try of its RUC's head, or an answer.
type timed struct {
	at     time.Time
	seq    int
	ruc    *ruc
	answer *lot
}

// push schedules a lot's step; p.lots stays ordered by time, then as
// scheduled (it holds at most one step per RUC).
func (p *pass) push(at time.Time, u *ruc, answer *lot) {
	p.seq++
	t := timed{at: at, seq: p.seq, ruc: u, answer: answer}
	i, _ := slices.BinarySearchFunc(p.lots, t, func(a, b timed) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq)) })
	p.lots = slices.Insert(p.lots, i, t)
}

// lot runs a lot's step as the SIFEN sender does: a take holding the RUC
// while on the wire (a refusal retries after its wait), then, a flight
// later, the answer.
func (p *pass) lot(t timed) error {
	u, now := t.ruc, t.at
	if l := t.answer; l != nil {
		if err := p.answered(u, l, now); err != nil {
			return err
		}
		l.ReplayAnswered = now
		p.next(u, now)
		return nil
	}
	l := u.lots[u.head]
	hold := p.cfg.Sifen.InFlightFor
	if hold <= 0 {
		hold = sifen.DefaultInFlightFor
	}
	d, err := p.lim.Take(p.ctx, l.Ref, throttle.Charge{Key: u.key, Cost: 1, HoldFor: hold})
	if err != nil {
		return p.failed(u.key, err)
	}
	if !l.tried {
		l.tried, l.refusedNow = true, !d.Allowed
	}
	if !d.Allowed {
		p.push(now.Add(max(d.RetryAfter, 1)), u, nil)
		return nil
	}
	l.ReplaySent, l.held = now, d.Buckets[0].HeldUntil
	u.head++
	if l.answered {
		p.push(now.Add(l.flight), u, l)
	} else {
		p.next(u, l.held) // no answer: the hold ends it
	}
	return nil
}

// next schedules the first try of u's next lot at at, or when it arrived
// if later and it was not queued.
func (p *pass) next(u *ruc, at time.Time) {
	if u.head >= len(u.lots) {
		return
	}
	if n := u.lots[u.head]; !n.queued && n.Arrived.After(at) {
		at = n.Arrived
	}
	p.push(at, u, nil)
}

// answered records l's answer on its RUC's bucket as Sender does: the hold
// ends, the interval runs (not after a failed claim), a 0301 blocks.
func (p *pass) answered(u *ruc, l *lot, now time.Time) error {
	pol := p.res.get(u.key)
	t := throttle.SyncTarget{Key: u.key, Tokens: throttle.MaxTokens, Cooldown: pol.now.MinInterval, Hold: l.held, Ref: l.answer}
	switch {
	case strings.HasPrefix(l.answer, sifen.RefClaimFailed), strings.HasPrefix(l.answer, "not claimed:"): // "not claimed:": the ref earlier versions of SendNew wrote
		t.Cooldown = 0
	case strings.HasPrefix(l.answer, sifen.CodeLotNotQueued+":"):
		c := p.cfg.Sifen
		t.BlockFor, t.Escalate = cmp.Or(c.RemoteBlock, sifen.DefaultRemoteBlock), true
		t.BlockMax, t.Memory = cmp.Or(c.RemoteBlockMax, sifen.DefaultRemoteBlockMax), cmp.Or(c.BlockMemory, sifen.DefaultBlockMemory)
	}
	_, err := p.lim.Sync(p.ctx, t)
	return p.failed(u.key, err)
}

// fill writes the pass's counts into rep; best is the pass at the best
// unobserved outcomes (or p).
func (p *pass) fill(rep *Report, best *pass, chosen []string, res *resolver) {
	var names []string // the chosen first, in their order, then by name
	for _, name := range slices.Concat(chosen, slices.Sorted(maps.Keys(p.hours))) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		pr := PolicyReport{Policy: name, Chosen: slices.Contains(chosen, name)}
		if k, ok := p.m.first[name]; ok {
			pol := res.get(k)
			pr.Recorded, pr.Replayed = pol.then, pol.now
		}
		for _, h := range p.hours[name] {
			pr.Total.add(*h)
			if h.eventful() {
				pr.Hours = append(pr.Hours, *h)
			}
		}
		slices.SortFunc(pr.Hours, func(a, b Hour) int { return a.Start.Compare(b.Start) })
		pr.Total.Start = rep.Query.From
		low := p.lowest[name]
		pr.Lowest, pr.Capacity, pr.FirstRefused = low[0], low[1], p.first[name]
		for _, h := range best.hours[name] {
			pr.BestRefused += h.RefusedNow
		}
		rep.Policies = append(rep.Policies, pr)
	}
	// The lots are as the last pass left them: both passes send them alike.
	for _, u := range p.m.rucs {
		r := RUC{Key: u.key, Lots: len(u.lots)}
		for _, l := range u.lots {
			rep.Lots = append(rep.Lots, l.Lot)
			rep.Requests++
			if r.First.IsZero() {
				r.First = l.Arrived
			}
			r.RecordedEnd = slices.MaxFunc([]time.Time{r.RecordedEnd, l.Answered, l.Sent}, time.Time.Compare)
			r.ReplayEnd = slices.MaxFunc([]time.Time{r.ReplayEnd, l.ReplayAnswered, l.ReplaySent}, time.Time.Compare)
		}
		rep.RUCs = append(rep.RUCs, r)
	}
}

// memStore is a throttle.Store in memory for one replay, one goroutine: no
// ledger but the credits applied; buckets start as the part-empty ones.
type memStore struct {
	now      time.Time
	buckets  map[throttle.Key]throttle.Bucket
	credited map[throttle.CreditRef]bool
}

var _ throttle.Store = (*memStore)(nil)

func (s *memStore) clock() time.Time { return s.now }

// Update implements throttle.Store.
func (s *memStore) Update(_ context.Context, keys []throttle.Key, credits []throttle.CreditRef, apply func(*throttle.Tx) error) error {
	tx := throttle.NewTx(s.now)
	for _, k := range keys {
		if b, ok := s.buckets[k]; ok {
			tx.Load(b)
		}
	}
	for _, c := range credits {
		if s.credited[c] {
			tx.LoadCredit(c)
		}
	}
	if err := apply(tx); err != nil {
		return err
	}
	for _, w := range tx.BucketWrites() {
		if w.Delete {
			delete(s.buckets, w.Bucket.Key)
		} else {
			s.buckets[w.Bucket.Key] = w.Bucket
		}
	}
	rows, _ := tx.LedgerRows()
	for _, e := range rows {
		if e.Reason == throttle.LedgerCredit {
			s.credited[throttle.CreditRef{Key: e.Key, Ref: e.Ref}] = true
		}
	}
	return nil
}

// Buckets implements throttle.Store.
func (s *memStore) Buckets(_ context.Context, keys []throttle.Key) ([]throttle.Bucket, error) {
	var out []throttle.Bucket
	for _, k := range keys {
		if b, ok := s.buckets[k]; ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// Rows, LastTake, LedgerSince and PruneLedger implement throttle.Store for
// a store with no ledger that is never pruned.
func (s *memStore) Rows(context.Context, throttle.Key, throttle.Severity, int) ([]throttle.Bucket, error) {
	return nil, nil
}
func (s *memStore) LastTake(context.Context, throttle.Key) (time.Time, error) {
	return time.Time{}, nil
}
func (s *memStore) LedgerSince(context.Context, throttle.Key, time.Time) (bool, error) {
	return false, nil
}
func (s *memStore) PruneLedger(context.Context, time.Time, int) (int64, error) { return 0, nil }
