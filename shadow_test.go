package balde_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// arrival is one request of a trace: how long after the previous one it
// comes, on which identifier, at what cost.
type arrival struct {
	gap  time.Duration
	id   string
	cost int64
}

// shadowTrace is a fixed trace that empties, cools down and blocks the
// buckets of shadowPolicy many times over.
func shadowTrace() []arrival {
	rng := rand.New(rand.NewPCG(35, 200))
	trace := make([]arrival, 300)
	for i := range trace {
		trace[i] = arrival{
			gap:  time.Duration(rng.IntN(900)) * time.Millisecond,
			id:   []string{"acct-1", "acct-2"}[rng.IntN(2)],
			cost: 1 + rng.Int64N(2),
		}
	}
	return trace
}

// shadowPolicy is an application's policy with every rule a refusal can
// come from: tokens, a cooldown and a block after a refusal.
var shadowPolicy = throttle.Policy{Name: "APP_SMS", Capacity: 5, RefillTokens: 1, RefillPeriod: 2 * time.Second,
	MinInterval: 200 * time.Millisecond, BlockFor: 3 * time.Second}

// seen is one decision of a run, as a comparison needs it.
type seen struct {
	at      time.Time
	key     throttle.Key
	refused bool // enforced: refused; shadow: admitted as a would-be refusal
	reason  throttle.Reason
	left    int64
}

// runTrace runs trace on a fresh engine of engine, limiting with the
// limiter lim picks (the outbound one, or the inbound one) on keys of
// policy, with policy in shadow mode when shadow. It returns each
// decision, the engine and its metrics.
func runTrace(t *testing.T, engine sqlstore.Engine, policy string, inbound bool, shadow bool, trace []arrival) ([]seen, *balde.Engine, *web.Metrics) {
	t.Helper()
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	metrics := web.NewMetrics()
	cfg := balde.Config{DB: sqlstoretest.DSN(t, engine), Migrate: true, Clock: clock.Now, Observer: metrics,
		Resolvers: throttle.Resolvers{throttle.Policies{shadowPolicy.Name: shadowPolicy}}}
	if inbound {
		cfg.Inbound = &web.InboundConfig{IPLimit: 4, Window: 5 * time.Second, Block: 2 * time.Second}
	}
	eng, err := balde.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
	if shadow {
		require.NoError(t, eng.SetShadow(ctx, policy, true))
	}
	lim := eng.Limiter()
	if inbound {
		lim = eng.Inbound().Limiter
	}
	var out []seen
	for _, a := range trace {
		clock.Advance(a.gap)
		key := throttle.Key{Policy: policy, Env: "prod", Identifier: a.id}
		cost := a.cost
		if inbound {
			cost = 1
		}
		d, err := lim.Take(ctx, "", throttle.Charge{Key: key, Cost: cost})
		require.NoError(t, err)
		require.Equal(t, shadow && !d.Allowed, false, "a policy in shadow mode admits everything")
		bd := d.Buckets[0]
		out = append(out, seen{at: clock.Now(), key: key, refused: !d.Allowed || d.Shadow, reason: bd.Reason, left: bd.Remaining})
	}
	require.NoError(t, lim.FlushRefusals(ctx))
	return out, eng, metrics
}

// A policy in shadow mode decides exactly as it would enforced: one
// arrival trace run enforced and in shadow mode gives the same decisions,
// the shadow run's would-be refusals being the enforced run's refusals
// one by one (in its decisions, its ledger and its metric), and the
// shadow run admits every request. For an application's policy and for
// the inbound limiter's per-IP rule, on both engines.
func TestShadowModeRecordsTheEnforcedRefusals(t *testing.T) {
	trace := shadowTrace()
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		for _, tc := range []struct {
			name    string
			policy  string
			inbound bool
		}{
			{"application policy", shadowPolicy.Name, false},
			{"inbound per-IP rule", web.PolicyInboundIP, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				enforced, engE, mE := runTrace(t, engine, tc.policy, tc.inbound, false, trace)
				shadow, engS, mS := runTrace(t, engine, tc.policy, tc.inbound, true, trace)

				refused := 0
				for i := range enforced {
					require.Equal(t, enforced[i], shadow[i], "decision %d", i)
					if enforced[i].refused {
						refused++
					}
				}
				require.Greater(t, refused, 20, "the trace refuses often")
				require.Less(t, refused, len(trace)-20, "and admits often")
				reasons := map[throttle.Reason]bool{}
				for _, s := range enforced {
					reasons[s.reason] = true
				}
				require.Len(t, reasons, 3, "admitted, and refused for more than one reason: %v", reasons)

				require.Equal(t, float64(refused), (counterSum(t, mS, "balde_throttle_shadow_refusals_total")), "one shadow refusal counted per would-be refusal")
				require.Zero(t, (counterSum(t, mS, "balde_throttle_refusals_total")), "no refusal counted in shadow mode")
				require.Equal(t, float64(refused), (counterSum(t, mE, "balde_throttle_refusals_total")))
				require.Zero(t, (counterSum(t, mE, "balde_throttle_shadow_refusals_total")))

				st, err := engS.Limiter().State(ctx, throttle.Key{Policy: tc.policy, Env: "prod", Identifier: "acct-1"})
				require.NoError(t, err)
				require.True(t, st.Shadow, "the bucket's state says shadow")
				st, err = engE.Limiter().State(ctx, throttle.Key{Policy: tc.policy, Env: "prod", Identifier: "acct-1"})
				require.NoError(t, err)
				require.False(t, st.Shadow)
				if tc.inbound {
					return // the inbound limiter writes no refusal rows, enforced or not
				}

				// The ledger: one shadow row per would-be refusal, at its
				// instant, with its reason, where the enforced run has its
				// refusals (some grouped from memory, Count > 1).
				shadowRows := ledger(t, engS, throttle.ShadowReasons)
				require.Len(t, shadowRows, refused)
				var want []seen
				for _, s := range enforced {
					if s.refused {
						want = append(want, seen{at: s.at, key: s.key, refused: true, reason: s.reason, left: s.left})
					}
				}
				var got []seen
				for _, e := range shadowRows {
					require.EqualValues(t, 1, e.Count)
					require.Zero(t, e.Delta, "a would-be refusal takes nothing")
					got = append(got, seen{at: e.At, key: e.Key, refused: true, reason: shadowReason(e.Reason), left: e.Balance})
				}
				require.Equal(t, want, got)
				require.Empty(t, ledger(t, engS, throttle.RefusalReasons), "no refusal row in shadow mode")
				var n int64
				for _, e := range ledger(t, engE, throttle.RefusalReasons) {
					n += e.Count
				}
				require.EqualValues(t, refused, n, "the enforced run's refusal rows count the same refusals")
				require.Empty(t, ledger(t, engE, throttle.ShadowReasons))
				require.Equal(t, ledger(t, engE, []throttle.LedgerReason{throttle.LedgerTake}), ledger(t, engS, []throttle.LedgerReason{throttle.LedgerTake}),
					"the same takes, at the same instants, leaving the same balances")
			})
		}
	})
}

// shadowReason is the Reason a shadow ledger row records.
func shadowReason(r throttle.LedgerReason) throttle.Reason {
	switch r {
	case throttle.LedgerShadowCooldown:
		return throttle.ReasonCooldown
	case throttle.LedgerShadowBlocked:
		return throttle.ReasonBlocked
	}
	return throttle.ReasonEmpty
}

// ledger returns the engine's ledger rows of reasons, oldest first,
// without their ids.
func ledger(t *testing.T, eng *balde.Engine, reasons []throttle.LedgerReason) []throttle.LedgerEntry {
	t.Helper()
	rows, err := eng.Reader().Ledger(context.Background(), inspect.LedgerQuery{Reasons: reasons, Limit: inspect.MaxPageSize})
	require.NoError(t, err)
	slices.Reverse(rows)
	for i := range rows {
		rows[i].ID = 0
	}
	return rows
}

// counterSum sums a counter of m over its labels.
func counterSum(t *testing.T, m *web.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, mt := range f.GetMetric() {
				sum += mt.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A request refused by an enforcing policy is refused, even when a policy
// in shadow mode refuses it too; a request only a policy in shadow mode
// refuses is admitted, and sent: the enforcing policy's bucket is charged,
// the shadow one's left as the refusal leaves it.
func TestShadowModeLeavesEnforcingPoliciesAlone(t *testing.T) {
	ctx := context.Background()
	mail := throttle.PerMinute("APP_MAIL", 1, 3)
	eng, err := balde.Open(ctx, balde.Config{DB: sqlstoretest.DSN(t, sqlstore.SQLite), Migrate: true,
		Resolvers: throttle.Resolvers{throttle.Policies{shadowPolicy.Name: shadowPolicy, mail.Name: mail}}})
	require.NoError(t, err)
	defer eng.Close(ctx)
	require.NoError(t, eng.SetShadow(ctx, shadowPolicy.Name, true))
	sms := throttle.Key{Policy: shadowPolicy.Name, Env: "prod", Identifier: "a"}
	mailKey := throttle.Key{Policy: mail.Name, Env: "prod", Identifier: "a"}

	d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: sms, Cost: 5})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.False(t, d.Shadow)
	d, err = eng.Limiter().Take(ctx, "", throttle.Charge{Key: sms, Cost: 1}, throttle.Charge{Key: mailKey, Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed, "only the policy in shadow mode refuses")
	require.True(t, d.Shadow)
	require.Equal(t, []throttle.Reason{throttle.ReasonBlocked, throttle.ReasonNone}, []throttle.Reason{d.Buckets[1].Reason, d.Buckets[0].Reason},
		"APP_SMS would have refused (keys in order: APP_MAIL, APP_SMS)")
	require.EqualValues(t, 2, d.Buckets[0].Remaining)
	st, err := eng.Limiter().State(ctx, mailKey)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Tokens, "the request was sent: the enforcing policy counts it")
	st, err = eng.Limiter().State(ctx, sms)
	require.NoError(t, err)
	require.EqualValues(t, 0, st.Tokens, "the policy in shadow mode is left as the refusal leaves it")
	require.Len(t, ledger(t, eng, []throttle.LedgerReason{throttle.LedgerTake}), 2)
	require.Len(t, ledger(t, eng, throttle.ShadowReasons), 1)

	d, err = eng.Limiter().Take(ctx, "", throttle.Charge{Key: mailKey, Cost: 2})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = eng.Limiter().Take(ctx, "", throttle.Charge{Key: sms, Cost: 1}, throttle.Charge{Key: mailKey, Cost: 1})
	require.NoError(t, err)
	require.False(t, d.Allowed, "the enforcing policy refuses")
	require.False(t, d.Shadow)
	require.Equal(t, mailKey, d.Key)
}

// The DICT and SIFEN mirror policies refuse shadow mode: nothing is
// stored. An application's policy, an inbound rule, or a policy no bucket
// uses yet may be put in shadow mode, and another process on the
// database reads it when it opens.
func TestShadowModeRefusedToTheMirrors(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		dsn := sqlstoretest.DSN(t, engine)
		eng, err := balde.Open(ctx, balde.Config{DB: dsn})
		require.NoError(t, err)
		defer eng.Close(ctx)
		for _, p := range []string{"ENTRIES_READ_PARTICIPANT_ANTISCAN", "ENTRIES_READ_USER_ANTISCAN", "POLICIES_LIST", sifen.PolicyRecepcionLote} {
			require.ErrorIs(t, eng.CheckShadow(p), balde.ErrShadowMirror, p)
			require.ErrorIs(t, eng.SetShadow(ctx, p, true), balde.ErrShadowMirror, p)
		}
		require.ErrorIs(t, eng.SetShadow(ctx, "", true), throttle.ErrInvalidKey)
		require.Empty(t, eng.ShadowPolicies())

		for _, p := range []string{web.PolicyInboundIP, "APP_NOT_SHIPPED_YET", shadowPolicy.Name} {
			require.NoError(t, eng.SetShadow(ctx, p, true), p)
		}
		require.NoError(t, eng.SetShadow(ctx, shadowPolicy.Name, false))
		require.Equal(t, []string{"APP_NOT_SHIPPED_YET", web.PolicyInboundIP}, eng.ShadowPolicies())

		other, err := balde.Open(ctx, balde.Config{DB: dsn})
		require.NoError(t, err)
		defer other.Close(ctx)
		require.True(t, other.InShadow(web.PolicyInboundIP))
		require.False(t, other.InShadow(shadowPolicy.Name))
	})
}
