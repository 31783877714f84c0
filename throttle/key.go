package throttle

import (
	"cmp"
	"fmt"
	"strings"
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
	case !validName(k.Policy, MaxPolicyLen):
		return fmt.Errorf("%w: policy %q", ErrInvalidKey, k.Policy)
	case !validName(k.Env, maxEnvLen):
		return fmt.Errorf("%w: env %q", ErrInvalidKey, k.Env)
	case !validName(k.Identifier, maxIdentifierLen):
		return fmt.Errorf("%w: identifier %q", ErrInvalidKey, k.Identifier)
	}
	return nil
}

// Compare orders keys by policy, env, then identifier: the order in which a
// transaction locks several buckets, so two transactions never wait on each
// other in a cycle.
func (k Key) Compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Policy, o.Policy), cmp.Compare(k.Env, o.Env), cmp.Compare(k.Identifier, o.Identifier))
}

// validName reports whether s is not empty, at most maxLen bytes long and
// printable.
func validName(s string, maxLen int) bool {
	return s != "" && len(s) <= maxLen && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}
