package balde

import (
	"context"
	"slices"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/web"
)

// RestoreDictCategory sets the DICT catalog's participant category to the
// one the DICT last reported for participant (recorded by a
// reconciliation or a client that learns it), so that a tool that does
// not ask the DICT itself grades and shows the categorised buckets as
// serve does. An empty participant (a tool run without
// BALDE_DICT_PARTICIPANT) restores the category of the one participant
// recorded in the catalog's env. With none recorded, or several and none
// named, the catalog is unchanged (its configured category, else the
// strictest).
func (e *Engine) RestoreDictCategory(ctx context.Context, participant string) error {
	if participant == "" {
		learned, err := e.records.LearnedCategories(ctx, e.catalog.Env())
		if err != nil || len(learned) != 1 {
			return err
		}
		for _, category := range learned {
			return e.catalog.SetCategory(category)
		}
	}
	category, _, ok, err := e.records.LearnedCategory(ctx, e.catalog.Env(), participant)
	if err != nil || !ok {
		return err
	}
	return e.catalog.SetCategory(category)
}

// PolicyNames are the names of every policy whose buckets an operator
// may see in this engine's database, sorted (the admin pages' filters):
// the DICT's, SIFEN's and the inbound limiter's (web.InboundPolicyNames),
// whose buckets serve and the gateways write even when this engine has no
// inbound limiter.
func (e *Engine) PolicyNames() []string {
	names := append(web.InboundPolicyNames(), sifen.PolicyRecepcionLote)
	for _, s := range e.catalog.Specs() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
