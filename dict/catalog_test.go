package dict_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/throttle"
)

const (
	ispb     = "12345678"
	cpfPF    = "52998224725"
	cnpjPJ   = "11222333000181"
	otherCPF = "11144477735"
)

// TestSeedTable checks every policy of seed 001 against the table, written
// out again here from the seed.
func TestSeedTable(t *testing.T) {
	type row struct {
		name     string
		scope    dict.Scope
		ops      string
		perMin   int64
		capacity int64
	}
	table := []row{
		{"ENTRIES_WRITE", dict.ScopePSP, "createEntry,deleteEntry", 1200, 36000},
		{"ENTRIES_UPDATE", dict.ScopePSP, "updateEntry", 600, 600},
		{"CLAIMS_READ", dict.ScopePSP, "getClaim", 600, 18000},
		{"CLAIMS_WRITE", dict.ScopePSP, "createClaim,acknowledgeClaim,cancelClaim,confirmClaim,completeClaim", 1200, 36000},
		{"CLAIMS_LIST_WITH_ROLE", dict.ScopePSP, "listClaims", 40, 200},
		{"CLAIMS_LIST_WITHOUT_ROLE", dict.ScopePSP, "listClaims", 10, 50},
		{"SYNC_VERIFICATIONS_WRITE", dict.ScopePSP, "createSyncVerification", 10, 50},
		{"CIDS_FILES_READ", dict.ScopePSP, "getCidSetFile", 10, 50},
		{"CIDS_EVENTS_LIST", dict.ScopePSP, "listCidSetEvents", 20, 100},
		{"CIDS_ENTRIES_READ", dict.ScopePSP, "getEntryByCid", 1200, 36000},
		{"INFRACTION_REPORTS_READ", dict.ScopePSP, "getInfractionReport", 600, 18000},
		{"INFRACTION_REPORTS_WRITE", dict.ScopePSP, "createInfractionReport,acknowledgeInfractionReport,cancelInfractionReport,closeInfractionReport", 1200, 36000},
		{"INFRACTION_REPORTS_LIST_WITH_ROLE", dict.ScopePSP, "listInfractionReports", 40, 200},
		{"INFRACTION_REPORTS_LIST_WITHOUT_ROLE", dict.ScopePSP, "listInfractionReports", 10, 50},
		{"KEYS_CHECK", dict.ScopePSP, "checkKeys", 70, 70},
		{"REFUNDS_READ", dict.ScopePSP, "getRefund", 1200, 36000},
		{"REFUNDS_WRITE", dict.ScopePSP, "createRefund,cancelRefund,closeRefund", 2400, 72000},
		{"REFUND_LIST_WITH_ROLE", dict.ScopePSP, "listRefunds", 40, 200},
		{"REFUND_LIST_WITHOUT_ROLE", dict.ScopePSP, "listRefunds", 10, 50},
		{"FRAUD_MARKERS_READ", dict.ScopePSP, "getFraudMarker", 600, 18000},
		{"FRAUD_MARKERS_WRITE", dict.ScopePSP, "createFraudMarker,cancelFraudMarker", 1200, 36000},
		{"FRAUD_MARKERS_LIST", dict.ScopePSP, "listFrauds", 600, 18000},
		{"PERSONS_STATISTICS_READ", dict.ScopePSP, "getPersonStatistics", 12000, 36000},
		{"POLICIES_READ", dict.ScopePSP, "getBucketState", 60, 200},
		{"POLICIES_LIST", dict.ScopePSP, "listBucketStates", 6, 20},
	}
	c := dict.NewCatalog("")
	require.Len(t, c.Specs(), 30)
	require.Equal(t, "prod", c.Env())
	for _, r := range table {
		t.Run(r.name, func(t *testing.T) {
			s, ok := c.Spec(r.name)
			require.True(t, ok)
			require.Equal(t, r.scope, s.Scope)
			require.Equal(t, r.ops, strings.Join(s.Operations, ","))
			require.Equal(t, throttle.RefillStepwise, s.Refill)
			p, err := c.Resolve(c.Key(r.name, ispb))
			require.NoError(t, err)
			require.Equal(t, throttle.Policy{Name: r.name, Capacity: r.capacity, RefillTokens: r.perMin, RefillPeriod: time.Minute, Refill: throttle.RefillStepwise}, p)
			// Every other policy: any status but 500 costs 1.
			for status, want := range map[string]int64{"200": 1, "404": 1, "400": 1, "503": 1, "500": 0} {
				got, err := c.Cost(c.Key(r.name, ispb), status)
				require.NoError(t, err)
				require.Equal(t, want, got, status)
			}
		})
	}

	t.Run("CIDS_FILES_WRITE", func(t *testing.T) {
		p, err := c.Resolve(c.Key("CIDS_FILES_WRITE", ispb))
		require.NoError(t, err)
		require.Equal(t, throttle.Policy{Name: "CIDS_FILES_WRITE", Capacity: 200, RefillTokens: 40, RefillPeriod: 24 * time.Hour, Refill: throttle.RefillStepwise}, p)
	})

	categories := map[string][2]int64{
		"A": {25000, 50000}, "B": {20000, 40000}, "C": {15000, 30000}, "D": {8000, 16000},
		"E": {2500, 5000}, "F": {250, 500}, "G": {25, 250}, "H": {2, 50},
	}
	for _, name := range []string{"ENTRIES_READ_PARTICIPANT_ANTISCAN", "ENTRIES_STATISTICS_READ"} {
		for cat, want := range categories {
			t.Run(name+"/"+cat, func(t *testing.T) {
				c := dict.NewCatalog("prod")
				require.NoError(t, c.SetCategory(cat))
				p, err := c.Resolve(c.Key(name, ispb))
				require.NoError(t, err)
				require.Equal(t, want[1], p.Capacity)
				require.Equal(t, want[0], p.RefillTokens)
				require.Equal(t, time.Minute, p.RefillPeriod)
			})
		}
	}

	for _, name := range []string{"ENTRIES_READ_USER_ANTISCAN", "ENTRIES_READ_USER_ANTISCAN_V2"} {
		t.Run(name, func(t *testing.T) {
			s, ok := c.Spec(name)
			require.True(t, ok)
			require.Equal(t, dict.ScopeUser, s.Scope)
			pf, err := c.Resolve(c.Key(name, cpfPF))
			require.NoError(t, err)
			require.Equal(t, int64(100), pf.Capacity)
			require.Equal(t, int64(2), pf.RefillTokens)
			pj, err := c.Resolve(c.Key(name, cnpjPJ))
			require.NoError(t, err)
			require.Equal(t, int64(1000), pj.Capacity)
			require.Equal(t, int64(20), pj.RefillTokens)
			require.Equal(t, time.Minute, pj.RefillPeriod)
		})
	}
}

func TestCountingRules(t *testing.T) {
	c := dict.NewCatalog("prod")
	user := c.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF)
	userPJ := c.Key(dict.PolicyEntriesReadUserAntiscanV2, cnpjPJ)
	psp := c.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb)
	tests := []struct {
		key     throttle.Key
		outcome string
		want    int64
	}{
		{user, "200", 1}, {user, "404", 20}, {user, "500", 0}, {user, "429", 0}, {user, "400", 1}, {user, dict.OutcomeTransportError, 1},
		{userPJ, "200", 1}, {userPJ, "404", 20},
		{psp, "200", 1}, {psp, "404", 3}, {psp, "500", 0}, {psp, "429", 0}, {psp, "403", 1},
	}
	for _, tt := range tests {
		got, err := c.Cost(tt.key, tt.outcome)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "%s %s", tt.key.Policy, tt.outcome)
	}
	for key, want := range map[throttle.Key]int64{user: 1, userPJ: 2, psp: 1} {
		got, err := c.Credit(key, dict.EventPayment)
		require.NoError(t, err)
		require.Equal(t, want, got, key.String())
	}
	_, err := c.Credit(c.Key(dict.PolicyKeysCheck, ispb), dict.EventPayment)
	require.ErrorIs(t, err, dict.ErrUnknownOutcome)

	require.Equal(t, dict.PolicyEntriesReadUserAntiscan, dict.UserPolicyFor(dict.KeyEmail))
	require.Equal(t, dict.PolicyEntriesReadUserAntiscan, dict.UserPolicyFor(dict.KeyPhone))
	for _, kt := range []dict.KeyType{dict.KeyCPF, dict.KeyCNPJ, dict.KeyEVP} {
		require.Equal(t, dict.PolicyEntriesReadUserAntiscanV2, dict.UserPolicyFor(kt))
	}
}

func TestResolveErrors(t *testing.T) {
	c := dict.NewCatalog("prod")
	tests := []struct {
		name string
		key  throttle.Key
		want []error
	}{
		{"UnknownPolicy", c.Key("NOPE", ispb), []error{throttle.ErrUnknownPolicy}},
		{"OtherEnv", throttle.Key{Policy: dict.PolicyKeysCheck, Env: "test", Identifier: ispb}, []error{throttle.ErrInvalidKey}},
		{"BadISPB", c.Key(dict.PolicyKeysCheck, "1234"), []error{throttle.ErrInvalidKey, dict.ErrInvalidISPB}},
		{"BadCPF", c.Key(dict.PolicyEntriesReadUserAntiscan, "52998224726"), []error{throttle.ErrInvalidKey, dict.ErrInvalidCPF, dict.ErrInvalidPayerID}},
		{"BadCNPJ", c.Key(dict.PolicyEntriesReadUserAntiscan, "11222333000180"), []error{throttle.ErrInvalidKey, dict.ErrInvalidCNPJ}},
		{"ISPBAsPayer", c.Key(dict.PolicyEntriesReadUserAntiscan, ispb), []error{throttle.ErrInvalidKey, dict.ErrInvalidPayerID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Resolve(tt.key)
			for _, want := range tt.want {
				require.ErrorIs(t, err, want)
			}
		})
	}
}

func TestCategory(t *testing.T) {
	c := dict.NewCatalog("prod")
	key := c.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb)
	capacity := func() int64 {
		p, err := c.Resolve(key)
		require.NoError(t, err)
		return p.Capacity
	}
	require.Equal(t, "", c.Category())
	require.Equal(t, int64(50), capacity(), "no category: the strictest (H)")
	require.NoError(t, c.SetCategory("C"))
	require.Equal(t, int64(30000), capacity())
	class, err := c.Class(key)
	require.NoError(t, err)
	require.Equal(t, "C", class)
	require.NoError(t, c.SetCategory("I"), "a category the DICT publishes later is accepted")
	require.Equal(t, int64(50), capacity(), "unknown category: the strictest (H)")
	require.ErrorIs(t, c.SetCategory("A B"), dict.ErrInvalidCategory)
	require.Equal(t, "I", c.Category())
}

// Among classes of equal capacity the strictest is the last by name, and
// a category with no class gets it.
func TestStrictestClassOnTies(t *testing.T) {
	c := dict.NewCatalog("prod")
	limits := func(capacity int64) dict.Limits {
		return dict.Limits{Capacity: capacity, RefillTokens: 1, RefillPeriod: time.Minute}
	}
	require.NoError(t, c.Define(dict.Spec{Name: "TIED", Scope: dict.ScopePSP,
		Classes: map[string]dict.Limits{"A": limits(100), "B": limits(10), "G": limits(10), "C": limits(50)}}))
	for _, category := range []string{"", "H"} {
		if category != "" {
			require.NoError(t, c.SetCategory(category))
		}
		class, err := c.Class(c.Key("TIED", ispb))
		require.NoError(t, err)
		require.Equal(t, "G", class, "category %q", category)
	}
}

// The decision path (resolve, reserve, settle, credit a lookup's two keys)
// reads the catalog without copying it: nothing is allocated, even with no
// category, when every call looks for the strictest class.
func TestCatalogDecisionPathDoesNotAllocate(t *testing.T) {
	c := dict.NewCatalog("prod")
	keys := c.LookupKeys(dict.KeyPhone, cpfPF, ispb)
	allocs := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			_, err := c.Resolve(k)
			require.NoError(t, err)
			_, err = c.Admission(k)
			require.NoError(t, err)
			_, err = c.Cost(k, "404")
			require.NoError(t, err)
			_, err = c.Credit(k, dict.EventPayment)
			require.NoError(t, err)
		}
	})
	require.Equal(t, 0.0, allocs)
}

func TestCatalogConcurrentCategory(t *testing.T) {
	c := dict.NewCatalog("prod")
	key := c.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				if i%2 == 0 {
					_ = c.SetCategory(dict.Categories[j%len(dict.Categories)])
				} else if _, err := c.Resolve(key); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	waitfor.Group(t, &wg, 30*time.Second, "4 goroutines setting and resolving the category")
}

func TestSetRefill(t *testing.T) {
	c := dict.NewCatalog("prod")
	require.NoError(t, c.SetRefill(throttle.RefillContinuous))
	p, err := c.Resolve(c.Key(dict.PolicyKeysCheck, ispb))
	require.NoError(t, err)
	require.Equal(t, throttle.RefillContinuous, p.Refill)
	// A rolling window must refill its whole capacity: ENTRIES_WRITE cannot.
	require.ErrorIs(t, c.SetRefill(throttle.RefillRolling), throttle.ErrInvalidPolicy)
	require.Equal(t, throttle.RefillContinuous, c.Refill())
}

func TestParticipantKeys(t *testing.T) {
	c := dict.NewCatalog("prod")
	keys, err := c.ParticipantKeys(ispb)
	require.NoError(t, err)
	require.Len(t, keys, 28, "30 policies, 2 of them USER")
	require.Equal(t, c.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb), keys[0])
	_, err = c.ParticipantKeys("x")
	require.ErrorIs(t, err, dict.ErrInvalidISPB)
}

func TestDefine(t *testing.T) {
	c := dict.NewCatalog("prod")
	err := c.Define(dict.Spec{Name: "WEBHOOK_OUT", Scope: dict.ScopeEntity,
		Limits: dict.Limits{Capacity: 10, RefillTokens: 1, RefillPeriod: time.Second}})
	require.NoError(t, err)
	s, ok := c.Spec("WEBHOOK_OUT")
	require.True(t, ok)
	require.Equal(t, int64(1), s.Reserve, "the reserve defaults to 1")
	require.Equal(t, "WEBHOOK_OUT", c.Specs()[30].Name, "added after the DICT's")
	p, err := c.Resolve(c.Key("WEBHOOK_OUT", "any entity"))
	require.NoError(t, err)
	require.Equal(t, int64(10), p.Capacity)

	err = c.Define(dict.Spec{Name: "BROKEN", Scope: dict.ScopeUser, Classes: map[string]dict.Limits{
		"PF": {Capacity: 1, RefillTokens: 1, RefillPeriod: time.Second}}})
	require.ErrorIs(t, err, throttle.ErrInvalidPolicy)
	require.ErrorContains(t, err, "BROKEN.classes: a USER policy needs both PF and PJ (missing PJ)")
	_, ok = c.Spec("BROKEN")
	require.False(t, ok)
}
