package dict

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Scope says what one bucket of a policy belongs to: its keys' Identifier.
type Scope string

const (
	// ScopePSP: one bucket per participant; the identifier is its ISPB.
	ScopePSP Scope = "PSP"
	// ScopeUser: one bucket per end user; the identifier is the payer's CPF
	// (class PF) or CNPJ (class PJ).
	ScopeUser Scope = "USER"
	// scopeEntity: one bucket per free identifier, for a policy file's own policies.
	scopeEntity Scope = "ENTITY"
)

// DefaultEnv is the env part of DICT bucket keys unless configured.
const DefaultEnv = "prod"

// Outcomes and events of the counting rules. An outcome is the HTTP status
// ("404"); outcomeDefault costs any outcome a policy does not list; a lost
// response keeps its hold; a request that provably never left costs nothing.
const (
	outcomeDefault        = "*"
	outcomeTransportError = "error"
	outcomeNotSent        = "not-sent"
	EventPayment          = "payment" // a pacs.008 with a lookup's EndToEndId
)

// limits are the size of a bucket and its refill (RefillTokens whole tokens
// every RefillPeriod); Credits, when set, override Spec.Credits for a class.
type limits struct {
	Capacity, RefillTokens int64
	RefillPeriod           time.Duration
	Credits                map[string]int64
}

// Spec is one policy of the catalog: which operations it limits, how its
// buckets are sized, and what each outcome costs. A request is admitted while
// the bucket holds Reserve whole tokens and holds its worst case
// (Catalog.Hold); once the outcome is known it costs Costs[outcome] (else
// Costs[outcomeDefault], else Reserve) and the rest is refunded. An event
// credits Credits[event] tokens, capped at capacity, once per reference.
type Spec struct {
	Name       string
	Scope      Scope
	Operations []string
	// Limits apply when Classes is empty.
	Limits limits
	// Classes size the buckets by class: "PF" and "PJ" for a USER policy,
	// the participant category for a PSP policy (one with no class gets the
	// strictest, the smallest capacity).
	Classes map[string]limits
	// Refill is the refill mode when RefillSet, else the catalog's applies.
	Refill    throttle.RefillMode
	RefillSet bool
	Reserve   int64            // whole tokens >= 1 (1: the DICT admits while positive)
	Costs     map[string]int64 // outcome to a request's total cost, whole tokens >= 0
	Credits   map[string]int64 // event to the tokens it gives back (> 0)
	// MinInterval, BlockFor and FailMode are passed to throttle.Policy.
	MinInterval time.Duration
	BlockFor    time.Duration
	FailMode    throttle.FailMode
}

// Catalog is the set of policies the DICT applies (the DICT manual, chapter
// 19), overridable and extensible from a policy file, plus the participant's
// category. It implements throttle.Resolver for keys in its env: USER
// policies by payer id (a CPF resolves to the PF limits, a CNPJ to the PJ
// ones), PSP policies by ISPB (the categorised ones to the current
// category's limits). Safe for concurrent use, SetCategory included.
type Catalog struct {
	env string

	mu       sync.RWMutex
	specs    map[string]Spec
	order    []string
	category string
	refill   throttle.RefillMode
}

var _ throttle.Resolver = (*Catalog)(nil)

// NewCatalog returns the DICT's catalog for env ("" means DefaultEnv), with
// refill mode throttle.RefillStepwise and no category (the categorised
// policies use the strictest, H, until SetCategory).
func NewCatalog(env string) *Catalog {
	if env == "" {
		env = DefaultEnv
	}
	c := &Catalog{env: env, specs: make(map[string]Spec), refill: throttle.RefillStepwise}
	for _, s := range seedPolicies() {
		c.specs[s.Name] = s
		c.order = append(c.order, s.Name)
	}
	return c
}

// Env returns the env part of the catalog's keys.
func (c *Catalog) Env() string { return c.env }

// Key returns the bucket key of policy for identifier in the catalog's env.
func (c *Catalog) Key(policy, identifier string) throttle.Key {
	return throttle.Key{Policy: policy, Env: c.env, Identifier: identifier}
}

// Category returns the participant's current category ("" when unknown).
func (c *Catalog) Category() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.category
}

// CategoryInEffect returns the category the catalog applies, never "": the
// one set, else the strictest class of the categorised participant policy (H).
func (c *Catalog) CategoryInEffect() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.category != "" {
		return c.category
	}
	if s, ok := c.specs[PolicyEntriesReadParticipantAntiscan]; ok && len(s.Classes) > 0 {
		return strictest(s.Classes)
	}
	return Categories[len(Categories)-1]
}

// SetCategory sets the participant's category: any that passes
// ValidateCategory (one with no class in a policy gets its strictest).
func (c *Catalog) SetCategory(category string) error {
	if err := ValidateCategory(category); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.category = category
	return nil
}

// Spec returns the policy named name, with Refill set to the mode in
// effect; ok is false when the catalog has no such policy.
func (c *Catalog) Spec(name string) (Spec, bool) {
	s, _, err := c.find(name)
	return cloneSpec(s), err == nil
}

// Specs returns every policy, the DICT's in the manual's order, then those a
// policy file added.
func (c *Catalog) Specs() []Spec {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Spec, len(c.order))
	for i, name := range c.order {
		out[i] = cloneSpec(c.effective(c.specs[name]))
	}
	return out
}

// effective is s with the refill mode in effect (its maps still the
// stored ones); c.mu held.
func (c *Catalog) effective(s Spec) Spec {
	if !s.RefillSet {
		s.Refill = c.refill
	}
	return s
}

func (c *Catalog) define(s Spec) {
	if _, ok := c.specs[s.Name]; !ok {
		c.order = append(c.order, s.Name)
	}
	c.specs[s.Name] = s
}

// find returns the stored spec of policy (read-only) with its refill mode
// in effect, and the category in effect.
func (c *Catalog) find(policy string) (s Spec, category string, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.specs[policy]
	if !ok {
		return Spec{}, "", fmt.Errorf("%w: %q is not in the DICT catalog", throttle.ErrUnknownPolicy, policy)
	}
	return c.effective(s), c.category, nil
}

// Resolve implements throttle.Resolver. Errors: throttle.ErrUnknownPolicy;
// throttle.ErrInvalidKey (with ErrInvalidPayerID or ErrInvalidISPB) for a key
// in another env or whose identifier does not fit the policy's scope.
func (c *Catalog) Resolve(key throttle.Key) (throttle.Policy, error) {
	s, category, err := c.find(key.Policy)
	if err != nil {
		return throttle.Policy{}, err
	}
	if key.Env != c.env {
		return throttle.Policy{}, fmt.Errorf("%w: %s: env %q is not the DICT's %q", throttle.ErrInvalidKey, key, key.Env, c.env)
	}
	lim, _, err := s.limitsFor(key.Identifier, category)
	if err != nil {
		return throttle.Policy{}, fmt.Errorf("%w: %s: %w", throttle.ErrInvalidKey, key.Policy, err)
	}
	return throttle.Policy{
		Name:         s.Name,
		Capacity:     lim.Capacity,
		RefillTokens: lim.RefillTokens,
		RefillPeriod: lim.RefillPeriod,
		Refill:       s.Refill,
		MinInterval:  s.MinInterval,
		BlockFor:     s.BlockFor,
		FailMode:     s.FailMode,
	}, nil
}

// Admission is what key's bucket must hold to admit a request (Spec.Reserve).
func (c *Catalog) Admission(key throttle.Key) (int64, error) {
	s, _, err := c.find(key.Policy)
	if err != nil {
		return 0, err
	}
	return s.Reserve, nil
}

// Hold is a request's worst-case cost to key's bucket, held until its
// outcome is known: the largest of its costs and reserve, at most capacity.
func (c *Catalog) Hold(key throttle.Key) (int64, error) {
	s, category, err := c.find(key.Policy)
	if err != nil {
		return 0, err
	}
	n := s.Reserve
	for _, cost := range s.Costs {
		n = max(n, cost)
	}
	if lim, _, err := s.limitsFor(key.Identifier, category); err == nil {
		n = min(n, lim.Capacity)
	}
	return n, nil
}

// cost is a request's total cost to key's bucket given outcome:
// Costs[outcome], else Costs[outcomeDefault], else the reserve.
func (c *Catalog) cost(key throttle.Key, outcome string) (int64, error) {
	s, _, err := c.find(key.Policy)
	if err != nil {
		return 0, err
	}
	for _, o := range []string{outcome, outcomeDefault} {
		if n, ok := s.Costs[o]; ok {
			return n, nil
		}
	}
	return s.Reserve, nil
}

// Credit is what event gives back to key's bucket: the class's Credit,
// else the policy's, else errUnknownOutcome.
func (c *Catalog) Credit(key throttle.Key, event string) (int64, error) {
	s, category, err := c.find(key.Policy)
	if err != nil {
		return 0, err
	}
	lim, _, err := s.limitsFor(key.Identifier, category)
	if err != nil {
		return 0, err
	}
	for _, credits := range []map[string]int64{lim.Credits, s.Credits} {
		if n, ok := credits[event]; ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: %s does not credit %q", errUnknownOutcome, key.Policy, event)
}

// participantKeys are participant's PSP buckets, in catalog order.
func (c *Catalog) participantKeys(participant string) ([]throttle.Key, error) {
	if err := ValidateISPB(participant); err != nil {
		return nil, err
	}
	var keys []throttle.Key
	for _, s := range c.Specs() {
		if s.Scope == ScopePSP {
			keys = append(keys, c.Key(s.Name, participant))
		}
	}
	return keys, nil
}

// limitsFor returns the limits and class of the bucket of identifier under
// s, given the participant's category.
func (s Spec) limitsFor(identifier, category string) (limits, string, error) {
	switch s.Scope {
	case ScopeUser:
		person, err := parsePayerID(identifier)
		if err != nil {
			return limits{}, "", err
		}
		if len(s.Classes) == 0 {
			return s.Limits, string(person), nil
		}
		lim, ok := s.Classes[string(person)]
		if !ok {
			return limits{}, "", fmt.Errorf("%w: %s has no limits for %s", throttle.ErrInvalidPolicy, s.Name, person)
		}
		return lim, string(person), nil
	case ScopePSP:
		if err := ValidateISPB(identifier); err != nil {
			return limits{}, "", err
		}
		if len(s.Classes) == 0 {
			return s.Limits, "", nil
		}
		if lim, ok := s.Classes[category]; ok {
			return lim, category, nil
		}
		class := strictest(s.Classes)
		return s.Classes[class], class, nil
	}
	return s.Limits, "", nil
}

// strictest returns the class with the smallest capacity, the last by name
// among equals ("H" before "G"), without allocating.
func strictest(classes map[string]limits) string {
	best := ""
	for name, l := range classes {
		if b, ok := classes[best]; !ok || l.Capacity < b.Capacity || (l.Capacity == b.Capacity && name > best) {
			best = name
		}
	}
	return best
}

// specError is a field of a spec that cannot describe a policy, named as in
// the policy file ("classes.PF.capacity").
type specError struct{ Field, Msg string }

func (e *specError) Error() string { return e.Field + ": " + e.Msg }

// validateSpec checks every field of s; mode is the catalog's refill mode.
func validateSpec(s Spec, mode throttle.RefillMode) *specError {
	if s.RefillSet {
		mode = s.Refill
	}
	bad := func(field, format string, args ...any) *specError {
		return &specError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if err := (throttle.Key{Policy: s.Name, Env: "x", Identifier: "x"}).Validate(); err != nil {
		return bad("name", "%q is not a policy name (1 to %d printable bytes)", s.Name, throttle.MaxPolicyLen)
	}
	switch s.Scope {
	case ScopePSP, ScopeUser, scopeEntity:
	default:
		return bad("scope", "%q (want PSP, USER or ENTITY)", s.Scope)
	}
	if s.MinInterval < 0 {
		return bad("min_interval", "negative")
	}
	if s.BlockFor < 0 {
		return bad("block_for", "negative")
	}
	// counts checks a map of costs or credits: each at least least, want says so.
	counts := func(field string, m map[string]int64, least int64, want string) *specError {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if n := m[k]; n < least || n > throttle.MaxTokens {
				return bad(field+k, "%d is not %s", n, want)
			}
		}
		return nil
	}
	check := func(prefix string, l limits) *specError {
		switch {
		case l.Capacity <= 0 || l.Capacity > throttle.MaxTokens:
			return bad(prefix+"capacity", "%d is not a whole number of tokens in 1..%d", l.Capacity, int64(throttle.MaxTokens))
		case l.RefillTokens <= 0 || l.RefillTokens > throttle.MaxTokens:
			return bad(prefix+"refill_tokens", "%d is not a whole number of tokens in 1..%d", l.RefillTokens, int64(throttle.MaxTokens))
		case l.RefillPeriod <= 0:
			return bad(prefix+"refill_period", "%s is not a positive duration", l.RefillPeriod)
		case s.Reserve < 1 || s.Reserve > l.Capacity:
			return bad("reserve", "%d not in 1..%d (the %scapacity)", s.Reserve, l.Capacity, prefix)
		}
		p := throttle.Policy{Name: s.Name, Capacity: l.Capacity, RefillTokens: l.RefillTokens, RefillPeriod: l.RefillPeriod,
			Refill: mode, MinInterval: s.MinInterval, BlockFor: s.BlockFor, FailMode: s.FailMode}
		if err := p.Validate(); err != nil {
			return bad("refill", "%s refill of %s: %v", mode, prefix+"limits", err)
		}
		return counts(prefix+"credits.", l.Credits, 1, "a positive number of tokens")
	}
	if len(s.Classes) == 0 {
		if err := check("", s.Limits); err != nil {
			return err
		}
	} else {
		if s.Scope == scopeEntity {
			return bad("classes", "an ENTITY policy has no classes")
		}
		if s.Scope == ScopeUser {
			for _, p := range []personType{personPF, personPJ} {
				if _, ok := s.Classes[string(p)]; !ok {
					return bad("classes", "a USER policy needs both PF and PJ (missing %s)", p)
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Classes)) {
			if s.Scope == ScopeUser && name != string(personPF) && name != string(personPJ) {
				return bad("classes."+name, "a USER policy has classes PF and PJ only")
			}
			if s.Scope == ScopePSP && ValidateCategory(name) != nil {
				return bad("classes."+name, "a category is 1 to 16 letters, digits, - or _")
			}
			if err := check("classes."+name+".", s.Classes[name]); err != nil {
				return err
			}
		}
	}
	if err := counts("costs.", s.Costs, 0, "a number of tokens >= 0"); err != nil {
		return err
	}
	return counts("credits.", s.Credits, 1, "a positive number of tokens")
}

func cloneSpec(s Spec) Spec {
	s.Operations = slices.Clone(s.Operations)
	s.Costs = maps.Clone(s.Costs)
	s.Credits = maps.Clone(s.Credits)
	s.Limits.Credits = maps.Clone(s.Limits.Credits)
	s.Classes = maps.Clone(s.Classes)
	for k, l := range s.Classes {
		l.Credits = maps.Clone(l.Credits)
		s.Classes[k] = l
	}
	return s
}
