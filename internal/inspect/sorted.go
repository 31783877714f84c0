package inspect

import (
	"context"

	"github.com/balde-throttle/balde/throttle"
)

// ListBy returns the first page of the stored buckets matching f in by's
// order: List (keyset pages, Next set) for SortKey; for another order every
// matching bucket (at most MaxScan, Partial past it; f.After ignored) is
// read, sorted by SortStates and cut to f.Limit (default DefaultPageSize),
// with no Next. It is "balde buckets list --sort".
func (r *Reader) ListBy(ctx context.Context, f Filter, by SortBy) (Page, error) {
	if by == SortKey || by == "" {
		return r.List(ctx, f)
	}
	f.After = throttle.Key{}
	all, partial, err := r.ListAll(ctx, f)
	if err != nil {
		return Page{}, err
	}
	SortStates(all, by)
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	return Page{States: all[:min(limit, len(all))], Partial: partial}, nil
}
