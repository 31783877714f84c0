package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/throttle"
)

func testBucket(at time.Time) throttle.BucketState {
	p := throttle.Policy{Name: "SMS", Capacity: 10, RefillTokens: 1, RefillPeriod: time.Second}
	key := throttle.Key{Policy: "SMS", Env: "prod", Identifier: "account-with-a-very-long-identifier-42"}
	return throttle.BucketState{Bucket: throttle.Bucket{Key: key, Tokens: 3, RefilledAt: at, LastSentAt: at.Add(-90 * time.Second), SendCount: 7},
		Policy: p, At: at, Stored: true, UntilFull: 7 * time.Second}
}

// Buckets.List is buckets list's table: narrow (a shortened identifier) or
// wide (every column), the empty page said as such, and the partial and
// next-page lines.
func TestWriteBuckets(t *testing.T) {
	tr := i18n.New(i18n.English, time.UTC)
	scope := func(throttle.Key) string { return "account" }
	st := testBucket(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name       string
		page       inspect.Page
		wide       bool
		want, miss []string
	}{
		{"empty", inspect.Page{}, false, []string{"no stored bucket matches (a key with no row is a full bucket)\n"}, []string{"POLICY"}},
		{"narrow", inspect.Page{States: []throttle.BucketState{st}}, false,
			[]string{"POLICY", "STATE", "3/10", "1m30s ago"}, []string{"SCOPE", st.Key.Identifier, "more:", "partial:"}},
		{"wide", inspect.Page{States: []throttle.BucketState{st}, Next: "abc", Partial: true}, true,
			[]string{"SCOPE", "SENDS", "account", st.Key.Identifier, "more: add --after abc", "partial: the filter read"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, report.Buckets{W: &b, Tr: tr, Wide: tt.wide, Scope: scope}.List(tt.page))
			for _, w := range tt.want {
				require.Contains(t, b.String(), w)
			}
			for _, m := range tt.miss {
				require.NotContains(t, b.String(), m)
			}
		})
	}
}

// Buckets.Bucket is buckets show's "field: value" lines; Show adds its
// ledger, "no rows" when empty.
func TestWriteBucketAndLedger(t *testing.T) {
	tr := i18n.New(i18n.English, time.UTC)
	at := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	st := testBucket(at)
	var b bytes.Buffer
	out := report.Buckets{W: &b, Tr: tr, Scope: func(throttle.Key) string { return "account" }}
	out.Bucket(st)
	bucket := b.String()
	require.Contains(t, bucket, "bucket:")
	require.Contains(t, bucket, st.Key.String())
	require.Contains(t, bucket, "3 of 10")
	require.Contains(t, bucket, "full:")
	require.Contains(t, bucket, "in 7s")
	require.Contains(t, bucket, "sends:")
	require.Equal(t, 12, strings.Count(bucket, "\n"), "one line per field")

	b.Reset()
	require.NoError(t, out.Show(st, nil, 20))
	require.Equal(t, bucket+"\nledger (newest first, at most 20):\n  no rows\n", b.String())
	b.Reset()
	require.NoError(t, out.Show(st, []throttle.LedgerEntry{{ID: 9, Key: st.Key, At: at, Delta: -1, Balance: 3, Reason: throttle.LedgerTake, Ref: "sms 1"}}, 5))
	require.Contains(t, b.String(), "at most 5")
	require.Regexp(t, `  9 +\S.* +-1 +3 +1 +sms 1\n$`, b.String())
}
