package throttle

import (
	"errors"
	"fmt"
)

// Resolver finds the Policy that applies to a key. Several keys under one
// policy name may resolve to different Policies (the DICT's PF and PJ users
// share a name but not a capacity). A Resolver returns an error wrapping
// ErrUnknownPolicy for a key it does not know.
type Resolver interface {
	Resolve(key Key) (Policy, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(key Key) (Policy, error)

// Resolve calls f(key).
func (f ResolverFunc) Resolve(key Key) (Policy, error) { return f(key) }

// Policies resolves keys by policy name alone.
type Policies map[string]Policy

// Resolve returns the policy named key.Policy.
func (ps Policies) Resolve(key Key) (Policy, error) {
	p, ok := ps[key.Policy]
	if !ok {
		return Policy{}, fmt.Errorf("%w: %q", ErrUnknownPolicy, key.Policy)
	}
	return p, nil
}

// Resolvers tries each resolver in turn; the first that knows the key wins.
type Resolvers []Resolver

// Resolve returns the first answer that is not ErrUnknownPolicy.
func (rs Resolvers) Resolve(key Key) (Policy, error) {
	for _, r := range rs {
		p, err := r.Resolve(key)
		if err == nil || !errors.Is(err, ErrUnknownPolicy) {
			return p, err
		}
	}
	return Policy{}, fmt.Errorf("%w: %q", ErrUnknownPolicy, key.Policy)
}
