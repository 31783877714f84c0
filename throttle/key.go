package throttle

import (
	"cmp"
	"fmt"
	"unicode"
)

// Key names one bucket: who (Identifier: a payer's CPF, an ISPB, a RUC, an
// IP address), where (Env: "prod", "test", ...) and under which Policy name.
type Key struct {
	Policy     string
	Env        string
	Identifier string
}

// String renders k as "POLICY/env/identifier".
func (k Key) String() string { return k.Policy + "/" + k.Env + "/" + k.Identifier }

// Validate reports whether every part of k is non-empty, not too long and
// printable. The error wraps ErrInvalidKey.
func (k Key) Validate() error {
	switch {
	case k.Policy == "" || len(k.Policy) > MaxPolicyLen || !printable(k.Policy):
		return fmt.Errorf("%w: policy %q", ErrInvalidKey, k.Policy)
	case k.Env == "" || len(k.Env) > maxEnvLen || !printable(k.Env):
		return fmt.Errorf("%w: env %q", ErrInvalidKey, k.Env)
	case k.Identifier == "" || len(k.Identifier) > maxIdentifierLen || !printable(k.Identifier):
		return fmt.Errorf("%w: identifier %q", ErrInvalidKey, k.Identifier)
	}
	return nil
}

// Compare orders keys by policy, env, then identifier: the order in which a
// transaction locks several buckets, so two transactions never wait on each
// other in a cycle.
func (k Key) Compare(o Key) int {
	if c := cmp.Compare(k.Policy, o.Policy); c != 0 {
		return c
	}
	if c := cmp.Compare(k.Env, o.Env); c != 0 {
		return c
	}
	return cmp.Compare(k.Identifier, o.Identifier)
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
