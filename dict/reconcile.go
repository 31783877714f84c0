package dict

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// ReconcileResult is what one reconciliation saw and did.
type ReconcileResult struct {
	// Decision is the mirror's on GET /policies/: after a refusal nothing
	// was sent nor done, and the other fields are empty.
	Decision throttle.Decision
	At       time.Time
	// Category is the category the DICT reported ("" if none);
	// CategoryChanged is set when it differs from the catalog's before.
	Category        string
	CategoryChanged bool
	Remote          []Policy            // the DICT's answer, one Policy per bucket
	Lowered         []throttle.Adjusted // the local buckets brought down to the DICT's state
	// Unknown lists the policies reported that are no PSP policy of the catalog.
	Unknown []string
	// Mismatched lists policies whose remote capacity or refill differs from
	// the catalog's, as "NAME: local 2/60s capacity 50, remote 4/60s
	// capacity 100"; a policy file can bring the catalog in line.
	Mismatched []string
}

// Reconcile reads the participant's buckets at the DICT (ListBucketStates),
// whose category the Transport records (catalog and Records), and lowers every
// local PSP bucket to the DICT's balance less this process's holds in flight
// (never raising one). A refusal is res.Decision with a nil error. Errors: as
// ListBucketStates; throttle.ErrStoreUnavailable.
func (c *Client) Reconcile(ctx context.Context) (ReconcileResult, error) {
	before := c.meter.Catalog.Category() // the Transport learns the answer's category
	held := c.meter.holds.watch()
	defer held.stop()
	listed, err := c.ListBucketStates(ctx)
	if err != nil || !listed.Decision.Allowed {
		return ReconcileResult{Decision: listed.Decision}, err
	}
	remote := listed.Response
	res := ReconcileResult{Decision: listed.Decision, At: remote.ResponseTime.Time, Category: remote.Category, Remote: remote.Policies}
	if res.At.IsZero() {
		res.At = c.meter.Limiter.Now()
	}

	// The Transport set a usable category before it answered: it sizes the buckets synced below.
	switch err := ValidateCategory(remote.Category); {
	case remote.Category == "":
	case err != nil:
		c.transport.Logger.Warn("dict: reconcile: the DICT reported an unusable category", slog.Any("error", err))
	default:
		res.CategoryChanged = before != remote.Category
	}

	targets, unknown := c.meter.policyTargets(c.participant, remote.Policies, held, "reconcile "+remote.CorrelationID)
	res.Unknown = unknown
	for _, p := range remote.Policies {
		if slices.Contains(unknown, p.Name) {
			continue
		}
		local, err := c.meter.Catalog.Resolve(c.meter.Catalog.Key(p.Name, c.participant))
		if err != nil {
			return res, err
		}
		if local.Capacity != p.Capacity || local.RefillTokens != p.RefillTokens || int64(local.RefillPeriod/time.Second) != p.RefillPeriodSec {
			res.Mismatched = append(res.Mismatched, fmt.Sprintf("%s: local %d/%ds capacity %d, remote %d/%ds capacity %d",
				p.Name, local.RefillTokens, int64(local.RefillPeriod/time.Second), local.Capacity, p.RefillTokens, p.RefillPeriodSec, p.Capacity))
		}
	}
	if len(targets) == 0 {
		return res, nil
	}
	adjusted, err := c.meter.Limiter.Sync(ctx, targets...)
	if err != nil {
		return res, fmt.Errorf("dict: reconcile: %w", err)
	}
	res.Lowered = slices.DeleteFunc(adjusted, func(a throttle.Adjusted) bool { return a.Applied >= 0 })
	return res, nil
}

// RunReconcile reconciles every interval, the first one interval after it
// starts, until ctx is done, and returns ctx's error. Each result is logged
// and passed to report (which may be nil); failures wait for the next tick.
// POLICIES_LIST allows 6 a minute: keep every at 10 s or more.
func (c *Client) RunReconcile(ctx context.Context, every time.Duration, report func(ReconcileResult, error)) error {
	if every <= 0 {
		return fmt.Errorf("dict: reconcile interval %s is not positive", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if ctx.Err() != nil { // also when a tick was ready with the cancellation: no pass
			return ctx.Err()
		}
		res, err := c.Reconcile(ctx)
		switch {
		case err != nil:
			c.transport.Logger.Warn("dict: reconcile failed", slog.Any("error", err))
		case !res.Decision.Allowed:
			c.transport.Logger.Info("dict: reconcile deferred: POLICIES_LIST bucket empty", slog.Duration("retry_after", res.Decision.RetryAfter))
		default:
			c.transport.Logger.Info("dict: reconciled", slog.String("category", res.Category),
				slog.Int("lowered", len(res.Lowered)), slog.Int("mismatched", len(res.Mismatched)))
		}
		if report != nil {
			report(res, err)
		}
	}
}

// CategoryFresh is how long a category learned from the DICT is reused at
// start without asking again (decision 0068).
const CategoryFresh = defaultCategoryRecheck

// recheckCategory re-checks the participant's category at most once per
// recheck period: the one another process recorded within the period, else
// GET /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN (one POLICIES_READ token),
// whose category the Transport learns and whose balance the bucket is synced
// to. One check at a time; failures wait for the next period.
func (c *Client) recheckCategory(ctx context.Context) {
	if c.recheck < 0 || !c.checkMu.TryLock() { // a check in progress: no wait
		return
	}
	defer c.checkMu.Unlock()
	now := c.meter.Limiter.Now()
	if now.Sub(c.checkedAt) < c.recheck {
		return
	}
	defer func() { c.checkedAt = now }()
	if _, ok, err := c.restore(ctx, c.recheck); ok && err == nil {
		return
	}
	key := c.meter.Catalog.Key(PolicyEntriesReadParticipantAntiscan, c.participant)
	held := c.meter.holds.watch()
	defer held.stop()
	res, err := c.GetBucketState(ctx, key.Policy)
	switch {
	case err != nil:
		c.transport.Logger.Warn("dict: category re-check failed", slog.Any("error", err))
		return
	case !res.Decision.Allowed:
		c.transport.Logger.Info("dict: category re-check deferred: POLICIES_READ empty locally", slog.Duration("retry_after", res.Decision.RetryAfter))
		return
	}
	tokens := res.Response.Policy.AvailableTokens - held.held(key)
	if _, err := c.meter.Limiter.Sync(ctx, throttle.SyncTarget{Key: key, Tokens: tokens, Ref: "GET /policies/" + key.Policy}); err != nil {
		c.transport.Logger.Warn("dict: category re-check: sync failed", slog.Any("error", err))
	}
}

// LearnedCategory says where the catalog's category came from.
type LearnedCategory struct {
	Category string
	// Source is "stored" (learned earlier, still fresh) or "dict" (asked now).
	Source string
	At     time.Time
}

// LearnCategory sets the catalog's category from the DICT: the one kept in
// Records when learned less than maxAge ago, else Reconcile's. Otherwise the
// catalog keeps its category and the error says why: a refusal is a
// *throttle.RefusedError (decision 0010), or a remote error, a store failure.
func (c *Client) LearnCategory(ctx context.Context, maxAge time.Duration) (LearnedCategory, error) {
	if l, ok, err := c.restore(ctx, maxAge); ok || err != nil {
		return l, err
	}
	res, err := c.Reconcile(ctx)
	if err != nil {
		return LearnedCategory{}, err
	}
	if !res.Decision.Allowed {
		return LearnedCategory{}, &throttle.RefusedError{Op: "dict " + OpListBucketStates, Decision: res.Decision}
	}
	if res.Category == "" {
		return LearnedCategory{}, fmt.Errorf("dict: the DICT reported no category")
	}
	return LearnedCategory{Category: res.Category, Source: "dict", At: res.At}, nil
}

// RestoreCategory sets the catalog's category from Records and reports
// whether one was recorded.
func (c *Client) RestoreCategory(ctx context.Context) (bool, error) {
	_, ok, err := c.restore(ctx, math.MaxInt64)
	return ok, err
}

// restore sets the catalog's category to the one recorded in Records when
// learned less than maxAge ago; ok reports whether one was (err is then
// SetCategory's).
func (c *Client) restore(ctx context.Context, maxAge time.Duration) (l LearnedCategory, ok bool, err error) {
	if c.transport.Records == nil {
		return l, false, nil
	}
	cat, at, ok, err := c.transport.Records.LearnedCategory(ctx, c.meter.Catalog.Env(), c.participant)
	if err != nil || !ok || c.meter.Limiter.Now().Sub(at) >= maxAge {
		return l, false, err
	}
	return LearnedCategory{Category: cat, Source: "stored", At: at}, true, c.meter.Catalog.SetCategory(cat)
}

// LocalPolicies reports the participant's buckets in the local mirror as
// listBucketStates would.
func (c *Client) LocalPolicies(ctx context.Context) (*ListPoliciesResponse, error) {
	keys, err := c.meter.Catalog.participantKeys(c.participant)
	if err != nil {
		return nil, err
	}
	states, err := c.meter.Limiter.States(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("dict: list policies: %w", err)
	}
	now := c.meter.Limiter.Now()
	r := &ListPoliciesResponse{CorrelationID: NewCorrelationID(c.participant, now), ResponseTime: Timestamp{Time: now.UTC()},
		Category: c.meter.Catalog.CategoryInEffect(), Policies: make([]Policy, len(states))}
	for i, s := range states {
		r.Policies[i] = policyFromState(s)
	}
	return r, nil
}

// LocalPolicy reports one of the participant's buckets in the local mirror
// in the DICT's getBucketState format; a name that is no PSP policy is
// throttle.ErrUnknownPolicy.
func (c *Client) LocalPolicy(ctx context.Context, policy string) (*GetPolicyResponse, error) {
	spec, ok := c.meter.Catalog.Spec(policy)
	if !ok || spec.Scope != ScopePSP {
		return nil, fmt.Errorf("%w: %q is not a participant policy of the DICT", throttle.ErrUnknownPolicy, truncate(policy))
	}
	state, err := c.meter.Limiter.State(ctx, c.meter.Catalog.Key(policy, c.participant))
	if err != nil {
		return nil, fmt.Errorf("dict: get policy: %w", err)
	}
	now := c.meter.Limiter.Now()
	return &GetPolicyResponse{CorrelationID: NewCorrelationID(c.participant, now), ResponseTime: Timestamp{Time: now.UTC()},
		Category: c.meter.Catalog.CategoryInEffect(), Policy: policyFromState(state)}, nil
}
