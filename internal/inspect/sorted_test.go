package inspect_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func TestListBy(t *testing.T) {
	ctx := context.Background()
	e := throttletest.NewMemEnv(t, fill)
	var keys []throttle.Key
	for i, cost := range []int64{10, 95, 60} { // a Healthy, b Critical, c Medium
		k := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: string(rune('a' + i))}
		require.True(t, e.Take(k, cost).Allowed)
		keys = append(keys, k)
	}
	ids := func(p inspect.Page) []string {
		var out []string
		for _, st := range p.States {
			out = append(out, st.Key.Identifier)
		}
		return out
	}
	tests := []struct {
		name     string
		by       inspect.SortBy
		limit    int
		want     []string
		wantNext bool
	}{
		{"KeyPagesByCursor", inspect.SortKey, 2, []string{"a", "b"}, true},
		{"SeverityWorstFirst", inspect.SortSeverity, 0, []string{"b", "c", "a"}, false},
		{"SeverityFirstPage", inspect.SortSeverity, 2, []string{"b", "c"}, false},
		{"TokensEmptiestFirst", inspect.SortTokens, 1, []string{"b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// After is ignored by the sorted orders: they always start at the top.
			f := inspect.Filter{Limit: tt.limit}
			if tt.by != inspect.SortKey {
				f.After = keys[0]
			}
			page, err := e.Reader.ListBy(ctx, f, tt.by)
			require.NoError(t, err)
			require.Equal(t, tt.want, ids(page))
			require.Equal(t, tt.wantNext, page.Next != "")
		})
	}
}
