// Package whatif replays a period of the ledger under other numbers: another
// DICT category, capacity, refill or SIFEN interval
// (docs/decisions/0150-what-if-from-the-ledger.md). The replay decides with
// the engine itself, a throttle.Limiter over a store in memory on a clock set
// to each recorded instant, so that the settings in force reproduce every
// recorded decision and another scenario differs only by the numbers changed.
//
// An admitted request is its take rows (one per bucket, one reference), its
// outcome its settle rows and a later credit; a refused request is its
// refusal rows. A SIFEN lot is its RUC's take, its answer the next sync.
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

// ErrInvalid wraps every error about the question asked: nothing was replayed.
var ErrInvalid = errors.New("whatif")

// Scenario is the other numbers. The zero Scenario is the settings in
// force: its replay reproduces the recorded decisions.
type Scenario struct {
	// Category, when set (A..H), sizes the DICT's categorised policies as
	// the DICT sizes that participant category.
	Category string
	// Capacity, RefillTokens and RefillPeriod, when > 0, replace those of
	// every chosen policy's buckets.
	Capacity, RefillTokens int64
	RefillPeriod           time.Duration
	// Interval, when > 0, is SIFEN's least time from a RUC's answer to its next lot.
	Interval time.Duration
}

// Query is what to replay.
type Query struct {
	// Policies are the chosen policies; choosing one of a DICT lookup's
	// three replays the three (one refusal spares the others).
	Policies []string
	// From and To bound the period: ledger rows with From <= At < To.
	From, To time.Time
	Scenario Scenario
}

// Source reads the ledger, newest first (inspect.Store, inspect.Reader).
type Source interface {
	Ledger(ctx context.Context, q inspect.LedgerQuery) ([]throttle.LedgerEntry, error)
}

// Config is what a replay reads and the settings in force.
type Config struct {
	Source Source
	// Limiter is the engine's: the settings in force and the ledger's
	// granularity. Dict, when set, is the DICT's catalog. Sifen is the
	// sender's configuration in force (zero fields: its defaults).
	Limiter *throttle.Limiter
	Dict    *dict.Catalog
	Sifen   sifen.SenderConfig
	// OnDecision, when set, is told each request's replayed decision, in
	// order (not the SIFEN lots).
	OnDecision func(Decision)
}

// Decision is one replayed request.
type Decision struct {
	Ref  string
	At   time.Time
	Keys []throttle.Key
	// Recorded is whether the recorded run admitted it (its outcome observed).
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
	// Syncs count the rows not replayed that lowered a mirror to the remote
	// state, Orphans the settle rows whose take is before the period,
	// PartEmpty the buckets the period found neither full nor idle.
	Syncs, Orphans, PartEmpty int64
}

// PolicyReport is one policy's replay.
type PolicyReport struct {
	Policy string
	Chosen bool
	// Recorded and Replayed are its first key's policy in each run.
	Recorded, Replayed throttle.Policy
	// Total sums the period; Hours are the hours in which some request was
	// refused, in either run, or a lot went at another time.
	Total Hour
	Hours []Hour
	// Lowest is the lowest balance its buckets reached in the replay and
	// Capacity that bucket's; FirstRefused is the replay's first refusal.
	Lowest, Capacity int64
	FirstRefused     time.Time
	// BestRefused is Total.RefusedNow with the unobserved requests the replay
	// admits costing nothing (a 500) instead of keeping their hold (a 404).
	BestRefused int64
}

// Sufficed reports whether the replay refused none of the policy's requests.
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

// Lot is one SIFEN lot: its first try, and when it was sent and answered
// in each run (zero: it was not).
type Lot struct {
	Key                        throttle.Key
	Ref                        string
	Arrived, Sent, Answered    time.Time
	ReplaySent, ReplayAnswered time.Time
	// Assumed: unanswered in the recorded run, it flies the RUC's longest.
	Assumed bool
}

// RUC sums one RUC's lots: each run's last answer (or send).
type RUC struct {
	Key                    throttle.Key
	Lots                   int
	First                  time.Time
	RecordedEnd, ReplayEnd time.Time
}

// Run replays q under cfg. Errors wrap ErrInvalid for a question that
// cannot be answered (a bad scenario, no policy, a policy whose takes the
// ledger does not hold one by one); otherwise they are the source's.
func Run(ctx context.Context, cfg Config, q Query) (*Report, error) {
	if err := q.validate(cfg); err != nil {
		return nil, err
	}
	names := withCompanions(q.Policies, cfg.Dict)
	rows, err := read(ctx, cfg.Source, names, q.From, q.To)
	if err != nil {
		return nil, err
	}
	res := &resolver{cfg: cfg, sc: q.Scenario, chosen: q.Policies, cache: make(map[throttle.Key]policies), admit: make(map[string]int64)}
	m, err := parse(rows, res, cfg)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		// A policy with no row in the period is checked on its newest.
		if _, ok := m.first[name]; ok {
			continue
		}
		newest, err := cfg.Source.Ledger(ctx, inspect.LedgerQuery{Policy: name, Limit: 1})
		if err == nil && len(newest) > 0 {
			err = checkPolicy(newest[0].Key, res)
		}
		if err != nil {
			return nil, err
		}
	}
	rep := &Report{Query: q, Rows: int64(len(rows)), Requests: m.requests, Unobserved: m.unobserved,
		Syncs: m.syncs, Orphans: m.orphans, PartEmpty: int64(len(m.start))}
	worst, err := replay(ctx, cfg, res, m, false)
	if err != nil {
		return nil, err
	}
	best := worst
	if m.unobservedDict {
		// Run again with each unobserved outcome costing nothing.
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

// withCompanions adds to policies the DICT policies charged by the same
// operations (a what-if on one changes which requests reach the others).
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

// ParseWhen reads a bound of the period (the command's --from and --to,
// the page's from and to) in zone; "" is def.
func ParseWhen(s string, def time.Time, zone *time.Location) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, zone); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2026-01-05, 2026-01-05T14:00 or RFC 3339)", s)
}

// pageSize is how many ledger rows one read asks for (a Source may cap it).
const pageSize = 10_000

// read returns the ledger rows of policies with from <= At < to, by time,
// then by ID.
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

// resolver gives each key's policy as recorded and under the scenario: the
// replay limiter's throttle.Resolver.
type resolver struct {
	cfg    Config
	sc     Scenario
	chosen []string
	cache  map[throttle.Key]policies
	admit  map[string]int64 // per policy, see admission
}

type policies struct {
	then, now throttle.Policy
	err       error
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
		p.Capacity = cmp.Or(r.sc.Capacity, p.Capacity)
		if p.Refill == throttle.RefillRolling {
			p.RefillTokens = p.Capacity // a rolling window refills its capacity
		}
		p.RefillTokens = cmp.Or(r.sc.RefillTokens, p.RefillTokens)
		p.RefillPeriod = cmp.Or(r.sc.RefillPeriod, p.RefillPeriod)
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

// admission is what a DICT policy's bucket must hold to admit a request
// (Catalog.Admission); ok is false for a policy not in the catalog.
func (r *resolver) admission(k throttle.Key) (n int64, ok bool) {
	if n, ok := r.admit[k.Policy]; ok {
		return n, n > 0
	}
	if r.cfg.Dict != nil {
		n, _ = r.cfg.Dict.Admission(k) // 0 for a policy not in the catalog
	}
	r.admit[k.Policy] = n
	return n, n > 0
}

// hold is what a request the recorded run refused would have held of k:
// the catalog's worst case for a DICT policy, else 1.
func (r *resolver) hold(k throttle.Key) int64 {
	if r.isDict(k) {
		if n, err := r.cfg.Dict.Hold(k); err == nil {
			return n
		}
	}
	return 1
}
