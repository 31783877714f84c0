// Package whatif replays a period of the ledger under other numbers: another
// DICT category, another capacity or refill, another SIFEN interval
// (docs/decisions/0150-what-if-from-the-ledger.md). The replay decides
// with the engine itself — a throttle.Limiter over a store in memory, on a
// clock set to each recorded instant — so that replaying under the settings
// in force reproduces every recorded decision by construction, and another
// scenario differs from it only by the numbers changed.
//
// What a replay reads from the ledger: every admitted request is its take
// rows (one per bucket, one transaction, the same reference); its outcome is
// its settle rows (a refund or penalty with that reference) and a later
// credit (a payment); a refused request is its refusal rows. A SIFEN lot is
// its RUC's take, and its answer the sync that follows it on that RUC.
package whatif

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// ErrInvalid wraps every error about the question asked (a bad scenario, a
// policy the ledger cannot replay): nothing was replayed.
var ErrInvalid = errors.New("whatif")

// Scenario is the other numbers. The zero Scenario is the settings in
// force: its replay reproduces the recorded decisions.
type Scenario struct {
	// Category, when set (A..H), sizes the DICT's categorised policies
	// (ENTRIES_READ_PARTICIPANT_ANTISCAN, ENTRIES_STATISTICS_READ) as the
	// DICT sizes that participant category.
	Category string
	// Capacity, RefillTokens and RefillPeriod, when > 0, replace those of
	// every chosen policy's buckets.
	Capacity, RefillTokens int64
	RefillPeriod           time.Duration
	// Interval, when > 0, is SIFEN's least time between the answer to a
	// lot of a RUC and its next lot.
	Interval time.Duration
}

// Query is what to replay.
type Query struct {
	// Policies are the chosen policies. A DICT lookup charges three
	// (the payer's two anti-scan policies and the participant's): choosing
	// one of them replays the three, since one refusal spares the others.
	Policies []string
	// From and To bound the period: ledger rows with From <= At < To.
	From, To time.Time
	Scenario Scenario
}

// Source reads the ledger, newest first (inspect.Store, inspect.Reader and
// sqlstore.Store have this method).
type Source interface {
	Ledger(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error)
}

// Config is what a replay reads and the settings in force.
type Config struct {
	Source Source
	// Limiter is the engine's: it resolves each key under the settings in
	// force and says how its takes are in the ledger.
	Limiter *throttle.Limiter
	// Dict, when set, is the DICT's catalog: what its policies' requests
	// need to be admitted, hold and get back, and the categories.
	Dict *dict.Catalog
	// Sifen is the SIFEN sender's configuration in force (InFlightFor, the
	// block after 0301); zero fields are the sender's defaults.
	Sifen sifen.SenderConfig
	// OnDecision, when set, is told each request's replayed decision, in
	// order (SIFEN lots are in Report.Lots).
	OnDecision func(Decision)
}

// Decision is one replayed request.
type Decision struct {
	Ref  string
	At   time.Time
	Keys []throttle.Key
	// Recorded is whether the recorded run admitted it (and so whether
	// its outcome was observed).
	Recorded bool
	Replayed throttle.Decision
}

// Report is a replay's answer.
type Report struct {
	Query Query
	// Rows is the ledger rows read, Requests the requests and lots replayed.
	Rows, Requests int64
	// Policies are the replayed policies, the chosen ones first.
	Policies []PolicyReport
	// Unobserved counts the requests the recorded run refused: their
	// outcome was never observed (see PolicyReport.BestRefused).
	Unobserved int64
	// Lots are the SIFEN lots, in the order they arrived; RUCs sum them
	// per RUC.
	Lots []Lot
	RUCs []RUC
	// Syncs are rows that lowered a mirror to the remote side's state (a
	// DICT 429, a reconciliation): not replayed. Orphans are settle rows
	// whose take is before the period. PartEmpty counts the buckets the
	// period found neither full nor idle (see the decision record).
	Syncs, Orphans, PartEmpty int64
}

// PolicyReport is one policy's replay.
type PolicyReport struct {
	Policy string
	Chosen bool
	// Recorded and Replayed are the policy of its first key as recorded
	// and as replayed.
	Recorded, Replayed throttle.Policy
	// Total sums the period; Hours are the hours in which some request was
	// refused, in either run, or a lot went at another time.
	Total Hour
	Hours []Hour
	// Lowest is the lowest balance any of its buckets reached in the
	// replay, and Capacity that bucket's capacity; FirstRefused is the
	// replay's first refusal by one of its buckets.
	Lowest, Capacity int64
	FirstRefused     time.Time
	// BestRefused is Total.RefusedNow when the unobserved requests the
	// replay admits cost nothing (the DICT's 500); Total.RefusedNow counts
	// them at their worst (they keep their hold: a 404).
	BestRefused int64
}

// Participant reports whether p is the DICT participant's anti-scan
// policy, whose allowance the report judges (Sufficed).
func (p PolicyReport) Participant() bool {
	return p.Policy == dict.PolicyEntriesReadParticipantAntiscan
}

// Sufficed reports whether the policy's allowance would have admitted
// every request the replay made of it.
func (p PolicyReport) Sufficed() bool { return p.Total.RefusedNow == 0 }

// Hour is one hour of a policy (or the period's total). For requests:
// RefusedThen and RefusedNow count the requests its buckets refused in the
// recorded run and in the replay, Worse those refused only in the replay,
// Better those admitted only in the replay, LongestWait the longest
// retry-after a replay refusal gave. For SIFEN lots: a lot is refused when
// its first try was (it waited), Worse when it went later than recorded,
// Better sooner, LongestWait its longest wait from its first try.
type Hour struct {
	Start                             time.Time
	Requests, RefusedThen, RefusedNow int64
	Worse, Better                     int64
	LongestWait                       time.Duration
	FirstBite                         time.Time // the first Worse
}

func (h *Hour) add(o Hour) {
	h.Requests += o.Requests
	h.RefusedThen += o.RefusedThen
	h.RefusedNow += o.RefusedNow
	h.Worse += o.Worse
	h.Better += o.Better
	h.LongestWait = max(h.LongestWait, o.LongestWait)
	if !o.FirstBite.IsZero() && (h.FirstBite.IsZero() || o.FirstBite.Before(h.FirstBite)) {
		h.FirstBite = o.FirstBite
	}
}

func (h Hour) eventful() bool { return h.RefusedThen+h.RefusedNow+h.Worse+h.Better > 0 }

// Lot is one SIFEN lot: when it was first tried (Arrived), sent and
// answered in the recorded run (zero when it was not), and in the replay.
type Lot struct {
	Key                        throttle.Key
	Ref                        string
	Arrived, Sent, Answered    time.Time
	ReplaySent, ReplayAnswered time.Time
	// Assumed is set when the lot was never answered in the recorded run:
	// the replay gives it the longest flight seen on its RUC.
	Assumed bool
}

// RUC sums one RUC's lots: the recorded and replayed last answer (the
// batch's end; the last send when no answer came).
type RUC struct {
	Key                    throttle.Key
	Lots                   int
	First                  time.Time
	RecordedEnd, ReplayEnd time.Time
}

// Run replays q under cfg. Errors wrap ErrInvalid for a question that
// cannot be answered (nothing replayed): a bad scenario, no policy, a
// policy whose takes the ledger does not hold one by one (aggregated per
// minute, or none); otherwise they are the source's.
func Run(ctx context.Context, cfg Config, q Query) (*Report, error) {
	if err := q.validate(cfg); err != nil {
		return nil, err
	}
	policies := withCompanions(q.Policies, cfg.Dict)
	rows, err := read(ctx, cfg.Source, policies, q.From, q.To)
	if err != nil {
		return nil, err
	}
	res := newResolver(cfg, q)
	m, err := parse(rows, res, cfg)
	if err != nil {
		return nil, err
	}
	for _, name := range policies {
		// A policy with no row in the period is checked on its newest.
		if _, ok := m.first[name]; ok {
			continue
		}
		newest, err := cfg.Source.Ledger(ctx, inspect.LedgerQuery{Policy: name, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(newest) > 0 {
			if err := checkPolicy(newest[0].Key, res); err != nil {
				return nil, err
			}
		}
	}
	rep := &Report{Query: q, Rows: int64(len(rows)), Unobserved: m.unobserved,
		Syncs: m.syncs, Orphans: m.orphans, PartEmpty: int64(len(m.start))}
	worst, err := replay(ctx, cfg, res, m, false)
	if err != nil {
		return nil, err
	}
	best := worst
	if m.unobservedDict {
		// The outcome of a request the recorded run refused is unknown:
		// run again with each such request costing nothing.
		c := cfg
		c.OnDecision = nil
		if best, err = replay(ctx, c, res, m, true); err != nil {
			return nil, err
		}
	}
	worst.fill(rep, best, q.Policies, res)
	return rep, nil
}

func (q Query) validate(cfg Config) error {
	s := q.Scenario
	switch {
	case cfg.Source == nil || cfg.Limiter == nil:
		return fmt.Errorf("%w: a replay needs a ledger source and the settings in force", ErrInvalid)
	case len(q.Policies) == 0:
		return fmt.Errorf("%w: choose at least one policy", ErrInvalid)
	case !q.To.After(q.From):
		return fmt.Errorf("%w: the period %s to %s is empty", ErrInvalid, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	case s.Capacity < 0 || s.Capacity > throttle.MaxTokens || s.RefillTokens < 0 || s.RefillTokens > throttle.MaxTokens:
		return fmt.Errorf("%w: capacity and refill tokens must be in 1..%d", ErrInvalid, int64(throttle.MaxTokens))
	case s.RefillPeriod < 0 || s.Interval < 0:
		return fmt.Errorf("%w: negative refill period or interval", ErrInvalid)
	case s.Category != "" && cfg.Dict == nil:
		return fmt.Errorf("%w: a DICT category needs the DICT's catalog (no DICT is configured)", ErrInvalid)
	case s.Category != "" && !slices.Contains(dict.Categories, s.Category):
		return fmt.Errorf("%w: category %q (want one of A to H)", ErrInvalid, s.Category)
	case s.Interval > 0 && !slices.Contains(q.Policies, sifen.PolicyRecepcionLote):
		return fmt.Errorf("%w: a SIFEN interval applies to %s: choose it", ErrInvalid, sifen.PolicyRecepcionLote)
	}
	return nil
}

// withCompanions adds to policies the DICT policies one of them is charged
// with (a getEntry charges the payer's anti-scan policy and the
// participant's: a what-if on one changes which requests reach the other).
func withCompanions(policies []string, cat *dict.Catalog) []string {
	out := slices.Clone(policies)
	if cat == nil {
		return out
	}
	for _, name := range policies {
		spec, ok := cat.Spec(name)
		if !ok {
			continue
		}
		for _, other := range cat.Specs() {
			if !slices.Contains(out, other.Name) && slices.ContainsFunc(other.Operations, func(op string) bool {
				return slices.Contains(spec.Operations, op)
			}) {
				out = append(out, other.Name)
			}
		}
	}
	return out
}

// pageSize is how many ledger rows one read asks for (a Source may cap it).
const pageSize = 10_000

// read returns the ledger rows of policies with from <= At < to, in the
// order they happened: by time, then by ID (one transaction's rows share
// an instant).
func read(ctx context.Context, src Source, policies []string, from, to time.Time) ([]throttle.LedgerEntry, error) {
	var rows []throttle.LedgerEntry
	for _, p := range policies {
		var before int64
		for {
			page, err := src.Ledger(ctx, inspect.LedgerQuery{Policy: p, Since: from, BeforeID: before, Limit: pageSize})
			if err != nil {
				return nil, err
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.At.Before(to) {
					rows = append(rows, e)
				}
			}
			before = inspect.NextLedgerCursor(page)
		}
	}
	slices.SortFunc(rows, func(a, b throttle.LedgerEntry) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID)) })
	return rows, nil
}

// resolver gives each key's policy as recorded (the settings in force) and
// under the scenario; it is the replay limiter's throttle.Resolver.
type resolver struct {
	cfg    Config
	sc     Scenario
	chosen []string
	cache  map[throttle.Key]policies
	// admit is, per policy, what a DICT policy's bucket must hold to admit
	// a request (Catalog.Admission); absent for a policy not in the DICT's
	// catalog.
	admit map[string]int64
}

type policies struct {
	then, now throttle.Policy
	err       error
}

func newResolver(cfg Config, q Query) *resolver {
	return &resolver{cfg: cfg, sc: q.Scenario, chosen: q.Policies, cache: make(map[throttle.Key]policies),
		admit: make(map[string]int64)}
}

// Resolve implements throttle.Resolver: the scenario's policy.
func (r *resolver) Resolve(k throttle.Key) (throttle.Policy, error) {
	p := r.get(k)
	return p.now, p.err
}

func (r *resolver) get(k throttle.Key) policies {
	if p, ok := r.cache[k]; ok {
		return p
	}
	var p policies
	p.then, p.err = r.cfg.Limiter.Policy(k)
	if p.err == nil {
		p.now, p.err = r.scenario(k, p.then)
	}
	r.cache[k] = p
	return p
}

// scenario applies the scenario to p, key k's recorded policy.
func (r *resolver) scenario(k throttle.Key, p throttle.Policy) (throttle.Policy, error) {
	if r.sc.Category != "" {
		if spec, ok := r.cfg.Dict.Spec(k.Policy); ok && spec.Scope == dict.ScopePSP {
			if lim, ok := spec.Classes[r.sc.Category]; ok {
				p.Capacity, p.RefillTokens, p.RefillPeriod = lim.Capacity, lim.RefillTokens, lim.RefillPeriod
			}
		}
	}
	if slices.Contains(r.chosen, k.Policy) {
		if r.sc.Capacity > 0 {
			p.Capacity = r.sc.Capacity
			if p.Refill == throttle.RefillRolling {
				p.RefillTokens = p.Capacity
			}
		}
		if r.sc.RefillTokens > 0 {
			p.RefillTokens = r.sc.RefillTokens
		}
		if r.sc.RefillPeriod > 0 {
			p.RefillPeriod = r.sc.RefillPeriod
		}
	}
	if r.sc.Interval > 0 && k.Policy == sifen.PolicyRecepcionLote {
		pc := sifen.PolicyConfig{Interval: r.sc.Interval}
		if p.Refill == throttle.RefillRolling {
			pc.PerMinute = p.Capacity
		}
		q := pc.RecepcionPolicy(r.sc.Interval)
		q.Ledger, q.FailMode, q.Grading = p.Ledger, p.FailMode, p.Grading
		p = q
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("%w: %s under the what-if: %w", ErrInvalid, k.Policy, err)
	}
	return p, nil
}

// isDict reports whether k's policy is in the DICT's catalog.
func (r *resolver) isDict(k throttle.Key) bool {
	_, ok := r.admission(k)
	return ok
}

// admission is what a bucket of a DICT policy must hold to admit a
// request (Catalog.Admission: the DICT admits while the balance is
// positive, 1); ok is false for a policy not in the DICT's catalog.
func (r *resolver) admission(k throttle.Key) (n int64, ok bool) {
	if n, ok := r.admit[k.Policy]; ok {
		return n, n > 0
	}
	if r.cfg.Dict != nil {
		if _, found := r.cfg.Dict.Spec(k.Policy); found {
			n, _ = r.cfg.Dict.Admission(k)
		}
	}
	r.admit[k.Policy] = n
	return n, n > 0
}

// hold is what a request the recorded run refused would have held of k:
// the catalog's worst case for a DICT policy (20 from a payer, 3 from the
// participant), else 1.
func (r *resolver) hold(k throttle.Key) int64 {
	if r.isDict(k) {
		if n, err := r.cfg.Dict.Hold(k); err == nil {
			return n
		}
	}
	return 1
}
