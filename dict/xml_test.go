package dict_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestGoldenRoundTrip decodes the XML of seed 001 (copied unchanged into
// testdata) and encodes it back: the bytes must be the same.
func TestGoldenRoundTrip(t *testing.T) {
	tests := []struct {
		file string
		v    any
	}{
		{"list_policies_response.xml", &dict.ListPoliciesResponse{}},
		{"get_policy_response.xml", &dict.GetPolicyResponse{}},
		{"problem_entry_not_found.golden.xml", &dict.Problem{}},
		{"get_entry_response.golden.xml", &dict.GetEntryResponse{}},
		{"check_keys_response.golden.xml", &dict.CheckKeysResponse{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			require.NoError(t, dict.Unmarshal(want, tt.v))
			got, err := dict.Marshal(tt.v)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

func TestGoldenFields(t *testing.T) {
	data, err := os.ReadFile("testdata/list_policies_response.xml")
	require.NoError(t, err)
	var r dict.ListPoliciesResponse
	require.NoError(t, dict.Unmarshal(data, &r))
	require.Equal(t, "B20220902101925801123456781A6998", r.CorrelationID)
	require.Equal(t, time.Date(2022, 9, 2, 13, 19, 25, 833e6, time.UTC), r.ResponseTime.Time)
	require.Equal(t, "A", r.Category)
	require.Equal(t, []dict.Policy{{Name: "ENTRIES_READ_PARTICIPANT_ANTISCAN"}}, r.Policies)

	data, err = os.ReadFile("testdata/get_policy_response.xml")
	require.NoError(t, err)
	var g dict.GetPolicyResponse
	require.NoError(t, dict.Unmarshal(data, &g))
	require.Equal(t, "B20220902102129115123456788B2B22", g.CorrelationID)
	require.Equal(t, "ENTRIES_READ_PARTICIPANT_ANTISCAN", g.Policy.Name)
}

func TestUnmarshalRejectsOtherRoot(t *testing.T) {
	data, err := os.ReadFile("testdata/get_policy_response.xml")
	require.NoError(t, err)
	var r dict.ListPoliciesResponse
	require.ErrorIs(t, dict.Unmarshal(data, &r), dict.ErrMalformedResponse)
}

func TestDecodeProblem(t *testing.T) {
	tests := []struct {
		name string
		xml  string
		want *dict.Problem
	}{
		{"OK", `<problem xmlns="urn:ietf:rfc:7807"><type>https://dict.pi.rsfn.net.br/api/v2/error/RateLimited</type><title>Rate limited</title><status>429</status></problem>`,
			dict.NewProblem(dict.ProblemRateLimited, 429, "Rate limited", "")},
		{"ErrWrongNamespace", `<problem xmlns="urn:other"><type>x</type><title>t</title><status>400</status></problem>`, nil},
		{"ErrNoNamespace", `<problem><type>x</type><title>t</title><status>400</status></problem>`, nil},
		{"ErrNoType", `<problem xmlns="urn:ietf:rfc:7807"><title>t</title><status>400</status></problem>`, nil},
		{"ErrBadStatus", `<problem xmlns="urn:ietf:rfc:7807"><type>x</type><status>42</status></problem>`, nil},
		{"ErrNotXML", `{"type":"x"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := dict.DecodeProblem([]byte(tt.xml))
			if tt.want == nil {
				require.ErrorIs(t, err, dict.ErrMalformedResponse)
				return
			}
			require.NoError(t, err)
			p.XMLName = tt.want.XMLName
			require.Equal(t, tt.want, p)
			require.Equal(t, dict.ProblemRateLimited, p.TypeName())
		})
	}
}

func TestPolicyFromState(t *testing.T) {
	s := throttle.BucketState{
		Bucket: throttle.Bucket{Key: throttle.Key{Policy: "KEYS_CHECK", Env: "prod", Identifier: "12345678"}, Tokens: -3},
		Policy: throttle.Policy{Name: "KEYS_CHECK", Capacity: 70, RefillTokens: 70, RefillPeriod: time.Minute},
	}
	require.Equal(t, dict.Policy{AvailableTokens: -3, Capacity: 70, RefillTokens: 70, RefillPeriodSec: 60, Name: "KEYS_CHECK"}, dict.PolicyFromState(s))

	// LocalPolicies stamps its answer with the limiter's clock and reports every bucket so.
	now := time.Date(2022, 9, 2, 13, 19, 25, 833e6, time.UTC)
	catalog := dict.NewCatalog("prod")
	clock := func() time.Time { return now }
	lim, err := throttle.NewLimiter(throttletest.NewMemStore(clock), catalog, throttle.Config{Clock: clock})
	require.NoError(t, err)
	_, err = lim.Take(t.Context(), "x", throttle.Charge{Key: s.Key, Cost: 70})
	require.NoError(t, err)
	_, err = lim.Adjust(t.Context(), throttle.Adjustment{Key: s.Key, Delta: -3, Reason: throttle.LedgerPenalty, Ref: "x"})
	require.NoError(t, err)
	r, err := dict.ListPolicies(t.Context(), lim, catalog, "12345678")
	require.NoError(t, err)
	data, err := dict.Marshal(r)
	require.NoError(t, err)
	require.Contains(t, string(data), "<ResponseTime>2022-09-02T13:19:25.833Z</ResponseTime>")
	require.Contains(t, string(data), "<Category>H</Category>")
	require.Contains(t, string(data), "<AvailableTokens>-3</AvailableTokens>")
}

func TestNewCorrelationID(t *testing.T) {
	// 13:19:25.801Z is 10:19:25.801 in Brasília, as in seed 001's sample.
	id := dict.NewCorrelationID("12345678", time.Date(2022, 9, 2, 13, 19, 25, 801e6, time.UTC))
	require.Len(t, id, 32)
	require.Regexp(t, regexp.MustCompile(`^B2022090210192580112345678[0-9A-F]{6}$`), id)
}
