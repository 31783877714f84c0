package throttle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/balde-throttle/balde/internal/storebound"
)

// Config holds a Limiter's settings. The zero value is usable.
type Config struct {
	// Clock is used for reads (refill for display) and must be the store's
	// clock. Default SystemClock.
	Clock Clock
	// Thresholds grade severity. Zero means DefaultThresholds.
	Thresholds Thresholds
	// Ledger says how routine takes are written. Default LedgerEveryTake.
	Ledger LedgerGranularity
	// SkipRefusalRows leaves refusals out of the ledger (they are still
	// counted by the Observer). Default: refusals are recorded.
	SkipRefusalRows bool
	// Notifier receives severity changes. Default: none.
	Notifier Notifier
	// Observer receives metrics. Default: none.
	Observer Observer
	// Logger logs fail-open admissions. Nil discards them (slog.Default()
	// is never written to).
	Logger *slog.Logger
	// RefusalCacheSize bounds how many refused keys are remembered so that
	// repeated requests on them are refused from memory until their
	// retry-after (LRU). 0 means DefaultRefusalCacheSize; negative disables
	// the cache.
	RefusalCacheSize int
	// Lease, when above zero, turns on quota leases (docs/decisions/0221,
	// lease.go) for the keys of a rolling window with a grain that this
	// process saw more than once in the last Lease. Zero (the default):
	// every decision is a transaction.
	Lease time.Duration
	// Definitions, when set, returns a value that changes whenever the
	// Resolver's policies may have changed: stored severities are trusted
	// only after a full regrade under the current value (Limiter.Reevaluate).
	// Nil: the policies never change.
	Definitions func() string
	// Shadow, when set, says whether a policy is in shadow mode: a request
	// refused only by such policies is admitted (Decision.Shadow,
	// docs/decisions/0200). Nil: no policy is.
	Shadow func(policy string) bool
}

// defaultRefusalCacheSize is the refusal cache's default bound (about 10 MB
// at most).
const defaultRefusalCacheSize = 65536

// Limiter is the engine's API: it resolves policies, validates input, runs
// the rules in store transactions and reports to the notifier and observer.
// It holds no bucket state of its own (but for quota leases, when
// Config.Lease turns them on); several Limiters (in several processes) on
// one database share their buckets exactly. Safe for concurrent use.
type Limiter struct {
	store    Store
	policies Resolver
	clock    Clock
	rules    rules
	ledger   LedgerGranularity
	notifier Notifier
	observer Observer
	logger   *slog.Logger
	refused  *refusalCache
	leases   *leases
	defs     func() string
	// trusted holds the definitions of the last full regrade (nil: none
	// yet): see Trusted.
	trusted atomic.Pointer[string]
}

// RemoteRefused tells the Limiter's Observer, when it implements
// RemoteObserver, that the remote side refused a request the mirror had
// admitted (see RemoteObserver). It changes no bucket: the caller syncs
// the buckets itself.
func (l *Limiter) RemoteRefused(system, policy, code string) {
	if o, ok := l.observer.(RemoteObserver); ok {
		o.RemoteRefused(system, policy, code)
	}
}

// NewLimiter returns a Limiter deciding with store and policies.
func NewLimiter(store Store, policies Resolver, cfg Config) (*Limiter, error) {
	cfg.Thresholds = cmp.Or(cfg.Thresholds, DefaultThresholds)
	if err := cfg.Thresholds.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:    store,
		policies: policies,
		clock:    cfg.Clock,
		rules:    rules{thresholds: cfg.Thresholds, recordRefusals: !cfg.SkipRefusalRows, shadow: cfg.Shadow},
		ledger:   cmp.Or(cfg.Ledger, LedgerEveryTake),
		notifier: cfg.Notifier,
		observer: cmp.Or[Observer](cfg.Observer, nopObserver{}),
		logger:   cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		defs:     cfg.Definitions,
		leases:   newLeases(cfg.Lease),
		refused:  newRefusalCache(cmp.Or(cfg.RefusalCacheSize, defaultRefusalCacheSize), !cfg.SkipRefusalRows),
	}
	if l.rules.shadow == nil {
		l.rules.shadow = func(string) bool { return false }
	}
	if l.defs == nil {
		l.defs = func() string { return "" }
	}
	if l.clock == nil {
		l.clock = SystemClock
	}
	return l, nil
}

// Policy resolves the policy of key.
func (l *Limiter) Policy(key Key) (Policy, error) {
	if err := key.Validate(); err != nil {
		return Policy{}, err
	}
	p, err := l.policies.Resolve(key)
	if err != nil {
		return Policy{}, err
	}
	if p.Name != key.Policy {
		return Policy{}, fmt.Errorf("%w: key %s resolved to policy %q", ErrUnknownPolicy, key, p.Name)
	}
	return p, p.Validate()
}

// Take charges every charge at once, all or nothing, in one transaction,
// and returns the Decision. ref is recorded on the ledger rows (a document
// id, an EndToEndId; may be empty). Charges on the same key are merged.
//
// Errors: ErrInvalidKey, ErrUnknownPolicy, ErrInvalidPolicy, ErrInvalidCost
// for bad input (nothing changed); ErrStoreUnavailable when the store failed
// and some policy involved fails closed. When every policy fails open, a
// store failure yields an admitting Decision with FailOpen set.
func (l *Limiter) Take(ctx context.Context, ref string, charges ...Charge) (Decision, error) {
	start := time.Now()
	ps, err := l.price(charges)
	if err != nil {
		return Decision{}, err
	}
	// A lease's tokens are spent already: they admit before the refusal
	// cache answers, or a refusal remembered while a lease was being taken
	// would strand them (docs/decisions/0221).
	leased := l.leases.leasable(ps)
	if leased {
		if d, ok := l.leases.use(ps[0], l.clock()); ok {
			l.observer.Decided(d, time.Since(start))
			return d, nil
		}
	}
	// A take under a policy in shadow mode is decided by the store, never
	// from the refusal cache, so that its would-be refusal is recorded.
	if !slices.ContainsFunc(ps, func(p priced) bool { return l.rules.shadow(p.policy.Name) }) {
		if d, ok, flush := l.refused.check(ps, l.clock()); ok {
			if flush {
				// Best effort: a failure keeps the counts for the next transaction.
				_ = l.writeRefusals(ctx, l.refused.drain())
			}
			l.observer.Decided(d, time.Since(start))
			return d, nil
		}
	}
	var back, want int64
	var backAt time.Time
	for leased {
		var wait <-chan struct{}
		var lead bool
		back, backAt, want, lead, wait = l.leases.pending(ps[0].Key, l.clock())
		if wait == nil {
			if lead {
				defer l.leases.taken(ps[0].Key)
			}
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return Decision{}, fmt.Errorf("throttle: take %s: %w", ps[0].Key, ctx.Err())
		}
		if d, ok := l.leases.use(ps[0], l.clock()); ok {
			l.observer.Decided(d, time.Since(start))
			return d, nil
		}
	}
	// Refusals answered from memory whose groups are due ride along.
	due := l.refused.drain()
	keys := keysOf(ps, func(p *priced) Key { return p.Key })
	var d Decision
	var after []Bucket
	var at, stamp time.Time
	var lent, left int64
	err = l.update(ctx, append(keys, keysOf(due, refusalKey)...), nil, func(tx *Tx) error {
		lent = 0
		if back > 0 {
			tx.unleaseIn(ps[0].Key, ps[0].policy, back, backAt, ref)
		}
		d = tx.take(ref, ps, l.rules)
		if !d.Allowed && l.refused != nil {
			after, at = tx.snapshot(keys), tx.now
		}
		if leased && d.Allowed && want > 0 {
			lent, stamp = tx.leaseIn(ps[0], want, ref)
			left = tx.buckets[ps[0].Key].b.Tokens
		}
		tx.recordRefusals(due)
		return nil
	})
	if err != nil {
		l.refused.requeue(due)
		return l.failTake(ps, err)
	}
	switch {
	case lent > 0:
		l.leases.granted(ps[0].Key, lent, stamp, left)
	case want > 0 && d.Allowed:
		l.leases.starve(ps[0].Key)
	}
	if d.Allowed {
		// A cheaper take admitted on a key remembered as refused for a
		// dearer one changed the bucket under the entry.
		l.refused.forget(keys...)
	} else {
		l.refused.remember(d, ps, after, at)
	}
	l.observer.Decided(d, time.Since(start))
	return d, nil
}

// failTake applies the fail mode of the policies of a Take whose
// transaction failed.
func (l *Limiter) failTake(ps []priced, err error) (Decision, error) {
	if o, ok := l.observer.(StoreObserver); ok && errors.Is(err, ErrStoreUnavailable) {
		for _, p := range ps {
			o.StoreFailed(p.Key, err)
		}
	}
	for _, p := range ps {
		if p.policy.FailMode != FailOpen || !errors.Is(err, ErrStoreUnavailable) {
			return Decision{}, fmt.Errorf("throttle: take %s: %w", p.Key, err)
		}
	}
	d := Decision{Allowed: true, FailOpen: true, Buckets: make([]BucketDecision, len(ps))}
	for i, p := range ps {
		d.Buckets[i] = BucketDecision{Key: p.Key, Policy: p.policy, Cost: p.Cost, Remaining: p.policy.Capacity}
		l.observer.FailedOpen(p.Key, err)
		l.logger.Warn("store unavailable: admitting because the policy fails open",
			slog.String("key", p.Key.String()), slog.Any("error", err))
	}
	d = d.decided()
	l.observer.Decided(d, 0)
	return d, nil
}

// Adjust applies every adjustment in one transaction and returns one result
// each, in order. Credits are idempotent per (Key, Ref).
//
// Errors: ErrInvalidKey, ErrUnknownPolicy, ErrInvalidAdjustment for bad input
// (nothing changed); ErrStoreUnavailable.
func (l *Limiter) Adjust(ctx context.Context, adjs ...Adjustment) ([]Adjusted, error) {
	return l.apply(ctx, "adjust", adjs, nil)
}

// Sync lowers buckets to the remote side's state in one transaction (see
// SyncTarget). Errors as Adjust.
func (l *Limiter) Sync(ctx context.Context, targets ...SyncTarget) ([]Adjusted, error) {
	return l.apply(ctx, "sync", nil, targets)
}

// AdjustAndSync applies adjs, then targets, in one transaction, so no
// decision sees the buckets between the two (the settle of a request the
// remote side refused: no request is admitted on the refunded tokens). It
// returns one Adjusted per adjustment, then one per target, in order.
// Errors as Adjust; on an error nothing changed.
func (l *Limiter) AdjustAndSync(ctx context.Context, adjs []Adjustment, targets []SyncTarget) ([]Adjusted, error) {
	return l.apply(ctx, "adjust and sync", adjs, targets)
}

// apply validates adjs and targets and applies them, adjustments first, in
// one store transaction; op names it in errors.
func (l *Limiter) apply(ctx context.Context, op string, adjs []Adjustment, targets []SyncTarget) ([]Adjusted, error) {
	var keys []Key
	var credits []CreditRef
	var ops []func(*Tx) Adjusted
	for _, a := range adjs {
		p, err := l.Policy(a.Key)
		if err == nil {
			err = validateAdjustment(a)
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, a.Key)
		if a.Reason == LedgerCredit {
			credits = append(credits, CreditRef{Key: a.Key, Ref: a.Ref})
		}
		ops = append(ops, func(tx *Tx) Adjusted { return tx.adjust(a, p, l.rules) })
	}
	for _, t := range targets {
		p, err := l.Policy(t.Key)
		switch {
		case err != nil:
		case t.BlockFor < 0 || t.Tokens > MaxTokens || t.Tokens < -MaxTokens:
			err = fmt.Errorf("%w: sync %s to %d tokens, block %s", ErrInvalidAdjustment, t.Key, t.Tokens, t.BlockFor)
		case t.Cooldown < 0 || t.BlockMax < 0 || t.Memory < 0:
			err = fmt.Errorf("%w: sync %s: negative cooldown %s, block limit %s or memory %s", ErrInvalidAdjustment, t.Key, t.Cooldown, t.BlockMax, t.Memory)
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.Key)
		ops = append(ops, func(tx *Tx) Adjusted { return tx.sync(t, p, l.rules) })
	}
	// A key adjusted and synced is locked once.
	slices.SortFunc(keys, Key.Compare)
	out := make([]Adjusted, len(ops))
	err := l.update(ctx, slices.Compact(keys), credits, func(tx *Tx) error {
		for i, f := range ops {
			out[i] = f(tx)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("throttle: %s: %w", op, err)
	}
	for _, a := range adjs {
		if a.Delta > 0 {
			l.refused.forget(a.Key)
		}
	}
	return out, nil
}

func validateAdjustment(a Adjustment) error {
	switch {
	case a.Delta > MaxTokens || a.Delta < -MaxTokens:
		return fmt.Errorf("%w: %s: delta %d out of range", ErrInvalidAdjustment, a.Key, a.Delta)
	case a.Reason == LedgerPenalty && a.Delta < 0,
		(a.Reason == LedgerRefund || a.Reason == LedgerCredit) && a.Delta > 0,
		a.Reason == LedgerRefund && a.Delta == 0:
	default:
		return fmt.Errorf("%w: %s: %s of %d (penalties are negative, credits positive, refunds positive or 0)", ErrInvalidAdjustment, a.Key, a.Reason, a.Delta)
	}
	if a.Reason == LedgerCredit && a.Ref == "" {
		return fmt.Errorf("%w: %s: a credit needs a reference", ErrInvalidAdjustment, a.Key)
	}
	return nil
}

// Reset fills key's bucket and clears its cooldown and block, recording
// actor (who did it) in the ledger. It returns the new state.
func (l *Limiter) Reset(ctx context.Context, key Key, actor string) (BucketState, error) {
	p, err := l.Policy(key)
	if err != nil {
		return BucketState{}, err
	}
	if actor == "" {
		return BucketState{}, fmt.Errorf("%w: a reset needs the name of who did it", ErrInvalidAdjustment)
	}
	var b Bucket
	var now time.Time
	err = l.update(ctx, []Key{key}, nil, func(tx *Tx) error {
		b, now = tx.reset(key, p, actor, l.rules), tx.now
		return nil
	})
	if err != nil {
		return BucketState{}, fmt.Errorf("throttle: reset %s: %w", key, err)
	}
	l.refused.forget(key)
	st := []BucketState{l.state(b, p, true, now)}
	if err := l.RecallLastSends(ctx, st); err != nil {
		// The reset committed: say so, with the last send unknown, rather
		// than report a failure for a reset that happened.
		l.logger.WarnContext(ctx, "reset done; its last send could not be read back", slog.String("key", key.String()), slog.Any("error", err))
	}
	return st[0], nil
}

// update runs apply in one store transaction with the limiter's ledger
// granularity, then delivers the severity changes it caused.
//
// The write counts against ctx's request bound when it carries one
// (internal/storebound): a write that spent it fails with
// ErrStoreUnavailable, as one that waited out the store's own bound does.
func (l *Limiter) update(ctx context.Context, keys []Key, credits []CreditRef, apply func(*Tx) error) error {
	var changes []SeverityChange
	exit := storebound.Enter(ctx)
	err := l.store.Update(ctx, keys, credits, func(tx *Tx) error {
		// Under group commit several operations share tx: keep only the
		// transitions this one caused.
		tx.granularity = l.ledger
		first := len(tx.changes)
		if err := apply(tx); err != nil {
			return err
		}
		changes = slices.Clone(tx.changes[first:])
		return nil
	})
	exit()
	if err != nil && storebound.Spent(ctx) {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, storebound.ErrSpent)
	}
	if err != nil {
		return err
	}
	for _, c := range changes {
		l.observer.SeverityChanged(c)
		if l.notifier != nil {
			l.notifier.Notify(ctx, c)
		}
	}
	return nil
}

// price resolves and validates charges, merges charges on one key and sorts
// them in lock order.
func (l *Limiter) price(charges []Charge) ([]priced, error) {
	if len(charges) == 0 {
		return nil, fmt.Errorf("%w: no charge", ErrInvalidCost)
	}
	ps := make([]priced, 0, len(charges))
	for _, c := range charges {
		p, err := l.Policy(c.Key)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(ps, func(q priced) bool { return q.Key == c.Key }); i >= 0 {
			// Merged: the costs add up; the stricter admission and the
			// longer hold win.
			if ps[i].Admit > 0 || c.Admit > 0 {
				ps[i].Admit = max(ps[i].need(), c.need())
			}
			ps[i].Cost += c.Cost
			ps[i].HoldFor = max(ps[i].HoldFor, c.HoldFor)
		} else {
			ps = append(ps, priced{Charge: c, policy: p})
		}
	}
	for _, p := range ps {
		if p.Cost < 1 || p.Cost > p.policy.Capacity {
			return nil, fmt.Errorf("%w: %s: cost %d not in 1..%d", ErrInvalidCost, p.Key, p.Cost, p.policy.Capacity)
		}
		if p.Admit < 0 || p.Admit > p.Cost {
			return nil, fmt.Errorf("%w: %s: admit %d not in 0..%d (the cost)", ErrInvalidCost, p.Key, p.Admit, p.Cost)
		}
		if p.HoldFor < 0 {
			return nil, fmt.Errorf("%w: %s: negative hold %s", ErrInvalidCost, p.Key, p.HoldFor)
		}
	}
	slices.SortFunc(ps, func(a, b priced) int { return a.Key.Compare(b.Key) })
	return ps, nil
}

// keysOf returns the key of each of xs.
func keysOf[T any](xs []T, key func(*T) Key) []Key {
	keys := make([]Key, len(xs))
	for i := range xs {
		keys[i] = key(&xs[i])
	}
	return keys
}

func refusalKey(r *refusalCount) Key { return r.key }
