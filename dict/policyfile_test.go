package dict_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func applyFile(t *testing.T, c *dict.Catalog, text string) error {
	t.Helper()
	f, err := dict.ParsePolicyFile(strings.NewReader(text))
	if err != nil {
		return err
	}
	return c.Apply(f)
}

func TestPolicyFileOverrides(t *testing.T) {
	c := dict.NewCatalog("prod")
	require.NoError(t, c.SetCategory("H"))
	err := applyFile(t, c, `{
		"sifen": {"anything": "belongs to another module"},
		"dict": {
			"refill": "continuous",
			"policies": {
				"ENTRIES_WRITE": {"capacity": 30000, "refill_tokens": 1000},
				"CIDS_FILES_WRITE": {"refill_period": "2d", "refill": "stepwise"},
				"ENTRIES_READ_USER_ANTISCAN": {"classes": {"PF": {"capacity": 50}}, "costs": {"404": 30}},
				"ENTRIES_READ_PARTICIPANT_ANTISCAN": {"classes": {"H": {"refill_tokens": 3}, "I": {"capacity": 10, "refill_tokens": 1, "refill_period": "1m"}}}
			}
		}
	}`)
	require.NoError(t, err)

	p, err := c.Resolve(c.Key(dict.PolicyEntriesWrite, ispb))
	require.NoError(t, err)
	require.Equal(t, throttle.Policy{Name: dict.PolicyEntriesWrite, Capacity: 30000, RefillTokens: 1000, RefillPeriod: time.Minute, Refill: throttle.RefillContinuous}, p)
	p, err = c.Resolve(c.Key(dict.PolicyCidsFilesWrite, ispb))
	require.NoError(t, err)
	require.Equal(t, throttle.Policy{Name: dict.PolicyCidsFilesWrite, Capacity: 200, RefillTokens: 40, RefillPeriod: 48 * time.Hour, Refill: throttle.RefillStepwise}, p)

	pf, err := c.Resolve(c.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF))
	require.NoError(t, err)
	require.Equal(t, int64(50), pf.Capacity)
	require.Equal(t, int64(2), pf.RefillTokens, "fields not in the file are kept")
	cost, err := c.Cost(c.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF), "404")
	require.NoError(t, err)
	require.Equal(t, int64(30), cost)
	cost, err = c.Cost(c.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF), "200")
	require.NoError(t, err)
	require.Equal(t, int64(1), cost, "costs merge outcome by outcome")
	credit, err := c.Credit(c.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF), dict.EventPayment)
	require.NoError(t, err)
	require.Equal(t, int64(1), credit)

	h, err := c.Resolve(c.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb))
	require.NoError(t, err)
	require.Equal(t, int64(50), h.Capacity)
	require.Equal(t, int64(3), h.RefillTokens)
	require.NoError(t, c.SetCategory("I"))
	i, err := c.Resolve(c.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb))
	require.NoError(t, err)
	require.Equal(t, int64(10), i.Capacity)
}

func TestPolicyFileWithoutDictSection(t *testing.T) {
	f, err := dict.ParsePolicyFile(strings.NewReader(`{"sifen": {}}`))
	require.NoError(t, err)
	require.Nil(t, f)
	c := dict.NewCatalog("prod")
	require.NoError(t, c.Apply(f))
	require.Len(t, c.Specs(), 30)
}

func TestPolicyFileErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{
		{"Syntax", "{\n\"dict\": {,}}", "line 2"},
		{"NotAnObject", `[1, 2]`, "not a JSON object of sections"},
		{"UnknownField", `{"dict": {"policies": {"KEYS_CHECK": {"capacty": 5}}}}`, `dict.policies.KEYS_CHECK: unknown field "capacty"`},
		{"WrongType", `{"dict": {"policies": {"KEYS_CHECK": {"capacity": "lots"}}}}`, "dict.policies.KEYS_CHECK.capacity: want int64"},
		{"BadDuration", `{"dict": {"policies": {"KEYS_CHECK": {"refill_period": "1 minute"}}}}`, `dict.policies.KEYS_CHECK.refill_period: "1 minute" is not a duration`},
		{"BadClassDuration", `{"dict": {"policies": {"ENTRIES_READ_USER_ANTISCAN": {"classes": {"PF": {"refill_period": "soon"}}}}}}`, "dict.policies.ENTRIES_READ_USER_ANTISCAN.classes.PF.refill_period"},
		{"BadBlockFor", `{"dict": {"policies": {"KEYS_CHECK": {"block_for": "x"}}}}`, "dict.policies.KEYS_CHECK.block_for"},
		{"UnknownSectionField", `{"dict": {"polices": {}}}`, `dict: unknown field "polices"`},
		{"ZeroCapacity", `{"dict": {"policies": {"KEYS_CHECK": {"capacity": 0}}}}`, "dict.policies.KEYS_CHECK.capacity: 0 is not a whole number of tokens"},
		{"NegativeRefill", `{"dict": {"policies": {"KEYS_CHECK": {"refill_tokens": -1}}}}`, "dict.policies.KEYS_CHECK.refill_tokens"},
		{"ClassCapacity", `{"dict": {"policies": {"ENTRIES_READ_USER_ANTISCAN": {"classes": {"PJ": {"capacity": -5}}}}}}`, "dict.policies.ENTRIES_READ_USER_ANTISCAN.classes.PJ.capacity"},
		{"FlatLimitsOnClassedPolicy", `{"dict": {"policies": {"ENTRIES_READ_USER_ANTISCAN": {"capacity": 5}}}}`, "dict.policies.ENTRIES_READ_USER_ANTISCAN.capacity: ENTRIES_READ_USER_ANTISCAN is sized by class"},
		{"ScopeChange", `{"dict": {"policies": {"KEYS_CHECK": {"scope": "USER"}}}}`, "dict.policies.KEYS_CHECK.scope"},
		{"NewWithoutScope", `{"dict": {"policies": {"NEW": {"capacity": 5, "refill_tokens": 1, "refill_period": "1m"}}}}`, "dict.policies.NEW.scope"},
		{"NewWithoutLimits", `{"dict": {"policies": {"NEW": {"scope": "PSP", "capacity": 5}}}}`, "dict.policies.NEW.capacity: a new policy needs"},
		{"BadScope", `{"dict": {"policies": {"NEW": {"scope": "BANK", "capacity": 5, "refill_tokens": 1, "refill_period": "1m"}}}}`, `dict.policies.NEW.scope: "BANK"`},
		{"ReserveAboveCapacity", `{"dict": {"policies": {"NEW": {"scope": "ENTITY", "capacity": 5, "refill_tokens": 1, "refill_period": "1m", "reserve": 6}}}}`, "dict.policies.NEW.reserve"},
		{"NegativeCost", `{"dict": {"policies": {"KEYS_CHECK": {"costs": {"200": -1}}}}}`, "dict.policies.KEYS_CHECK.costs.200"},
		{"ZeroCredit", `{"dict": {"policies": {"KEYS_CHECK": {"credits": {"payment": 0}}}}}`, "dict.policies.KEYS_CHECK.credits.payment"},
		{"NewClassIncomplete", `{"dict": {"policies": {"ENTRIES_READ_PARTICIPANT_ANTISCAN": {"classes": {"I": {"capacity": 5}}}}}}`, "dict.policies.ENTRIES_READ_PARTICIPANT_ANTISCAN.classes.I: a new class needs"},
		{"UserClassOtherThanPFPJ", `{"dict": {"policies": {"ENTRIES_READ_USER_ANTISCAN": {"classes": {"XX": {"capacity": 5, "refill_tokens": 1, "refill_period": "1m"}}}}}}`, "classes.XX"},
		{"BadRefill", `{"dict": {"refill": "sometimes"}}`, "dict.refill"},
		{"RollingForAll", `{"dict": {"refill": "rolling"}}`, "refill"},
		{"BadPolicyName", `{"dict": {"policies": {"": {"scope": "PSP", "capacity": 5, "refill_tokens": 1, "refill_period": "1m"}}}}`, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dict.NewCatalog("prod")
			before := c.Specs()
			err := applyFile(t, c, tt.file)
			require.ErrorIs(t, err, dict.ErrInvalidPolicyFile)
			require.Contains(t, err.Error(), tt.want)
			require.Equal(t, before, c.Specs(), "a bad file changes nothing")
			require.Equal(t, throttle.RefillStepwise, c.Refill())
		})
	}
}

func TestPolicyFileIsAllOrNothing(t *testing.T) {
	c := dict.NewCatalog("prod")
	err := applyFile(t, c, `{"dict": {"policies": {
		"ENTRIES_WRITE": {"capacity": 10},
		"KEYS_CHECK": {"capacity": 0}
	}}}`)
	require.ErrorIs(t, err, dict.ErrInvalidPolicyFile)
	p, err := c.Resolve(c.Key(dict.PolicyEntriesWrite, ispb))
	require.NoError(t, err)
	require.Equal(t, int64(36000), p.Capacity)
}

func TestLoadFileNamesThePath(t *testing.T) {
	c := dict.NewCatalog("prod")
	err := c.LoadFile("testdata/policies/missing.json")
	require.ErrorIs(t, err, dict.ErrInvalidPolicyFile)
	require.Contains(t, err.Error(), "missing.json")
}

// TestPixEntityFile runs seed 003's per-entity Pix bucket, defined only in
// the shipped example file, through a Limiter on a real store: capacity
// 2000, +2 per minute, a valid key -2, an invalid key -10, a confirmed
// transaction +2.
func TestPixEntityFile(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		clock := throttle.NewManualClock(throttletest.Epoch)
		c := dict.NewCatalog("prod")
		require.NoError(t, c.LoadFile("testdata/policies/pix_entity.json"))
		s, ok := c.Spec("PIX_ENTITY")
		require.True(t, ok)
		require.Equal(t, dict.ScopeEntity, s.Scope)
		store := sqlstoretest.MustOpen(t, engine, clock.Now)
		lim, err := throttle.NewLimiter(store, c, throttle.Config{Clock: clock.Now})
		require.NoError(t, err)
		m := dict.Meter{Limiter: lim, Catalog: c}
		key := c.Key("PIX_ENTITY", "Bucket_KaoBank")

		validate := func(outcome string) {
			t.Helper()
			r, err := m.Reserve(ctx, "pixKeyValidation", "", key)
			require.NoError(t, err)
			_, err = m.Settle(ctx, r, outcome)
			require.NoError(t, err)
		}
		tokens := func() int64 {
			t.Helper()
			st, err := lim.State(ctx, key)
			require.NoError(t, err)
			return st.Tokens
		}
		validate("valid")
		require.Equal(t, int64(1998), tokens())
		validate("invalid")
		require.Equal(t, int64(1988), tokens())

		// A confirmed transaction gives 2 back, once per transaction id.
		adj, err := m.Credit(ctx, "tx-1", "confirmed", key)
		require.NoError(t, err)
		require.Equal(t, int64(2), adj[0].Applied)
		require.Equal(t, int64(1990), tokens())
		adj, err = m.Credit(ctx, "tx-1", "confirmed", key)
		require.NoError(t, err)
		require.True(t, adj[0].Duplicate)
		require.Equal(t, int64(1990), tokens())

		// +2 every minute, stepwise: nothing after 59 s, 2 after a minute.
		clock.Advance(59 * time.Second)
		require.Equal(t, int64(1990), tokens())
		clock.Advance(time.Second)
		require.Equal(t, int64(1992), tokens())

		// Credits never pass the capacity.
		clock.Advance(time.Hour)
		require.Equal(t, int64(2000), tokens())
		adj, err = m.Credit(ctx, "tx-2", "confirmed", key)
		require.NoError(t, err)
		require.Equal(t, int64(0), adj[0].Applied)
		require.Equal(t, int64(2000), tokens())

		// An outcome the policy does not list costs the reserve.
		validate("timeout")
		require.Equal(t, int64(1998), tokens())
		_, err = m.Credit(ctx, "tx-3", "refund", key)
		require.ErrorIs(t, err, dict.ErrUnknownOutcome)
	})
}
