package dict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// policyFile is the "dict" section of balde's policy file (--policies,
// BALDE_POLICY_FILE; other sections are ignored here): it overrides the DICT's
// policies and defines new ones with their own costs and credits:
//
//	{
//	  "dict": {
//	    "refill": "stepwise",
//	    "policies": {
//	      "ENTRIES_WRITE": {"capacity": 30000, "refill_tokens": 1000, "refill_period": "1m"},
//	      "ENTRIES_READ_USER_ANTISCAN": {"classes": {"PF": {"capacity": 50}}},
//	      "PIX_ENTITY": {
//	        "scope": "ENTITY", "capacity": 2000, "refill_tokens": 2, "refill_period": "1m",
//	        "reserve": 2, "costs": {"valid": 2, "invalid": 10}, "credits": {"confirmed": 2}
//	      }
//	    }
//	  }
//	}
//
// An override changes only the fields it gives (classes, costs and credits
// merge entry by entry); a new policy needs a scope and complete limits.
// Periods are Go durations ("1m") or whole days ("1d").
type policyFile struct {
	Refill   *string                `json:"refill"` // stepwise, continuous or rolling
	Policies map[string]policyEntry `json:"policies"`
}

// policyEntry overrides or defines one policy. Nil fields are left as they are.
type policyEntry struct {
	Scope        *string                `json:"scope"`
	Operations   []string               `json:"operations"`
	Capacity     *int64                 `json:"capacity"`
	RefillTokens *int64                 `json:"refill_tokens"`
	RefillPeriod *string                `json:"refill_period"`
	Refill       *string                `json:"refill"`
	Classes      map[string]limitsEntry `json:"classes"`
	Reserve      *int64                 `json:"reserve"`
	Costs        map[string]int64       `json:"costs"`
	Credits      map[string]int64       `json:"credits"`
	MinInterval  *string                `json:"min_interval"`
	BlockFor     *string                `json:"block_for"`
	FailOpen     *bool                  `json:"fail_open"`
}

// limitsEntry overrides or defines the limits of one class.
type limitsEntry struct {
	Capacity     *int64           `json:"capacity"`
	RefillTokens *int64           `json:"refill_tokens"`
	RefillPeriod *string          `json:"refill_period"`
	Credits      map[string]int64 `json:"credits"`
}

// parseDuration reads a period of the policy file: a Go duration or whole days ("1d").
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err == nil && n > 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. \"1m\", \"24h\", \"1d\")", s)
	}
	return v, nil
}

// parseSet stores parse(*s) in *to when s is given; the error names field.
func parseSet[T any](field string, s *string, parse func(string) (T, error), to *T) error {
	if s == nil {
		return nil
	}
	v, err := parse(*s)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	*to = v
	return nil
}

const policyFileSection = "dict"

// parsePolicyFile returns the DICT section of a policy file (nil without
// one); unknown fields are errors. The error wraps errInvalidPolicyFile and
// names the field or line at fault.
func parsePolicyFile(r io.Reader) (*policyFile, error) {
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidPolicyFile, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		if syn, ok := errors.AsType[*json.SyntaxError](err); ok {
			line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
			return nil, fmt.Errorf("%w: line %d: %v", errInvalidPolicyFile, line, syn)
		}
		return nil, fmt.Errorf("%w: the file is not a JSON object of sections (want {\"dict\": {...}})", errInvalidPolicyFile)
	}
	raw, ok := top[policyFileSection]
	if !ok {
		return nil, nil
	}
	// Each policy on its own, so that an error names it.
	var section struct {
		Refill   *string                    `json:"refill"`
		Policies map[string]json.RawMessage `json:"policies"`
	}
	if err := strictDecode(raw, &section); err != nil {
		return nil, jsonError(err, policyFileSection)
	}
	f := &policyFile{Refill: section.Refill, Policies: make(map[string]policyEntry, len(section.Policies))}
	for _, name := range slices.Sorted(maps.Keys(section.Policies)) {
		var e policyEntry
		if err := strictDecode(section.Policies[name], &e); err != nil {
			return nil, jsonError(err, policyFileSection+".policies."+name)
		}
		f.Policies[name] = e
	}
	return f, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// jsonError turns a decoding error of the part at path into one naming the field.
func jsonError(err error, path string) error {
	if typ, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if typ.Field != "" {
			path += "." + typ.Field
		}
		return fmt.Errorf("%w: %s: want %s, got JSON %s", errInvalidPolicyFile, path, typ.Type, typ.Value)
	}
	return fmt.Errorf("%w: %s: %s", errInvalidPolicyFile, path, strings.TrimPrefix(err.Error(), "json: ")) // unknown field "x"
}

// apply merges f into the catalog, all or nothing. The error wraps
// errInvalidPolicyFile and names the field ("dict.policies.X.capacity").
func (c *Catalog) apply(f *policyFile) error {
	if f == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	mode := c.refill
	if err := parseSet("dict.refill", f.Refill, throttle.ParseRefillMode, &mode); err != nil {
		return fmt.Errorf("%w: %v", errInvalidPolicyFile, err)
	}
	merged := make(map[string]Spec, len(f.Policies))
	for _, name := range slices.Sorted(maps.Keys(f.Policies)) {
		old, exists := c.specs[name]
		s, err := mergeEntry(name, old, exists, f.Policies[name])
		if err != nil {
			return fmt.Errorf("%w: dict.policies.%s.%v", errInvalidPolicyFile, name, err)
		}
		merged[name] = s
	}
	// Validate what changed; a new refill mode changes every policy.
	check := merged
	if mode != c.refill {
		check = maps.Clone(c.specs)
		maps.Copy(check, merged)
	}
	for _, name := range slices.Sorted(maps.Keys(check)) {
		if err := validateSpec(check[name], mode); err != nil {
			return fmt.Errorf("%w: dict.policies.%s.%v", errInvalidPolicyFile, name, err)
		}
	}
	// Everything is valid: commit, new policies in name order.
	c.refill = mode
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		c.define(merged[name])
	}
	return nil
}

// LoadFile applies the "dict" section of the policy file at path to the
// catalog, all or nothing. The error wraps errInvalidPolicyFile and names the
// path and the field at fault.
func (c *Catalog) LoadFile(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", errInvalidPolicyFile, err)
	}
	defer fh.Close()
	f, err := parsePolicyFile(fh)
	if err == nil {
		err = c.apply(f)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// mergeEntry applies e over old (the current spec when exists). Errors name
// the field relative to the policy.
func mergeEntry(name string, old Spec, exists bool, e policyEntry) (Spec, error) {
	s := cloneSpec(old)
	if !exists {
		s = Spec{Name: name, Reserve: 1}
		if e.Scope == nil {
			return Spec{}, fmt.Errorf("scope: a new policy needs a scope (PSP, USER or ENTITY)")
		}
	}
	if e.Scope != nil {
		scope := Scope(*e.Scope)
		if exists && scope != old.Scope {
			return Spec{}, fmt.Errorf("scope: %s is a %s policy of the DICT; its scope cannot change to %q", name, old.Scope, scope)
		}
		s.Scope = scope
	}
	if e.Operations != nil {
		s.Operations = slices.Clone(e.Operations)
	}
	if err := parseSet("refill", e.Refill, throttle.ParseRefillMode, &s.Refill); err != nil {
		return Spec{}, err
	}
	s.RefillSet = s.RefillSet || e.Refill != nil
	if e.Capacity != nil || e.RefillTokens != nil || e.RefillPeriod != nil {
		if len(s.Classes) > 0 {
			return Spec{}, fmt.Errorf("capacity: %s is sized by class; override \"classes\" instead", name)
		}
		l, err := mergeLimits(s.Limits, limitsEntry{Capacity: e.Capacity, RefillTokens: e.RefillTokens, RefillPeriod: e.RefillPeriod})
		if err != nil {
			return Spec{}, err
		}
		s.Limits = l
	}
	for _, class := range slices.Sorted(maps.Keys(e.Classes)) {
		if s.Classes == nil {
			s.Classes = make(map[string]limits)
		}
		ce := e.Classes[class]
		if _, ok := s.Classes[class]; !ok && (ce.Capacity == nil || ce.RefillTokens == nil || ce.RefillPeriod == nil) {
			return Spec{}, fmt.Errorf("classes.%s: a new class needs capacity, refill_tokens and refill_period", class)
		}
		l, err := mergeLimits(s.Classes[class], ce)
		if err != nil {
			return Spec{}, fmt.Errorf("classes.%s.%w", class, err)
		}
		s.Classes[class] = l
	}
	if !exists && len(s.Classes) == 0 && (e.Capacity == nil || e.RefillTokens == nil || e.RefillPeriod == nil) {
		return Spec{}, fmt.Errorf("capacity: a new policy needs capacity, refill_tokens and refill_period (or classes)")
	}
	if e.Reserve != nil {
		s.Reserve = *e.Reserve
	}
	s.Costs, s.Credits = mergeCounts(s.Costs, e.Costs), mergeCounts(s.Credits, e.Credits)
	if err := parseSet("min_interval", e.MinInterval, parseDuration, &s.MinInterval); err != nil {
		return Spec{}, err
	}
	if err := parseSet("block_for", e.BlockFor, parseDuration, &s.BlockFor); err != nil {
		return Spec{}, err
	}
	if e.FailOpen != nil {
		s.FailMode = throttle.FailClosed
		if *e.FailOpen {
			s.FailMode = throttle.FailOpen
		}
	}
	return s, nil
}

func mergeLimits(l limits, e limitsEntry) (limits, error) {
	if e.Capacity != nil {
		l.Capacity = *e.Capacity
	}
	if e.RefillTokens != nil {
		l.RefillTokens = *e.RefillTokens
	}
	if err := parseSet("refill_period", e.RefillPeriod, parseDuration, &l.RefillPeriod); err != nil {
		return l, err
	}
	l.Credits = mergeCounts(l.Credits, e.Credits)
	return l, nil
}

// mergeCounts returns to with from's entries (a new map when to is nil).
func mergeCounts(to, from map[string]int64) map[string]int64 {
	if from != nil && to == nil {
		to = make(map[string]int64)
	}
	maps.Copy(to, from)
	return to
}
