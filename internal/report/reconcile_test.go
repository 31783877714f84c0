package report_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/throttle"
)

func TestWriteReconcile(t *testing.T) {
	key := throttle.Key{Policy: "ENTRIES_READ_PARTICIPANT_ANTISCAN", Env: "prod", Identifier: "12345678"}
	tests := []struct {
		name string
		res  dict.ReconcileResult
		want string
	}{
		{"nothing to do", dict.ReconcileResult{Category: "B", Remote: make([]dict.Policy, 3)},
			"category B; 3 policies at the DICT, 0 local buckets lowered\n"},
		{"everything", dict.ReconcileResult{Category: "C", CategoryChanged: true, Remote: make([]dict.Policy, 2),
			Lowered:    []throttle.Adjusted{{Key: key, Applied: -40, Balance: 10}},
			Mismatched: []string{"X: local 2/60s capacity 50, remote 4/60s capacity 100"}, Unknown: []string{"NEW_POLICY"}},
			"category C (changed); 2 policies at the DICT, 1 local buckets lowered\n" +
				"lowered " + key.String() + " by 40 to 10\n" +
				"mismatch X: local 2/60s capacity 50, remote 4/60s capacity 100\n" +
				"unknown policy NEW_POLICY (not in the catalog)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			n, err := report.WriteReconcile(&b, tt.res)
			require.NoError(t, err)
			require.Equal(t, tt.want, b.String())
			require.Equal(t, int64(len(tt.want)), n)
		})
	}
}
