package web

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The fill bar and its "N% full" are rounded to the nearest whole
// percentage, never cut; only an empty bucket reads 0 and only a full one
// 100.
func TestFillPercentRounds(t *testing.T) {
	for _, tc := range []struct {
		tokens, capacity, want int64
	}{
		{10, 18, 56}, // 55.6 %
		{4, 10, 40},
		{1, 8, 13}, // 12.5 % rounds half up
		{1, 1000, 1},
		{999, 1000, 99},
		{0, 10, 0},
		{-5, 10, 0},
		{10, 10, 100},
		{12, 10, 100},
		{5, 0, 0},
	} {
		require.Equal(t, tc.want, fillPercent(tc.tokens, tc.capacity), "%d of %d", tc.tokens, tc.capacity)
	}
}
