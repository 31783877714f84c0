package inspect

import (
	"errors"
	"fmt"
	"strings"

	"github.com/balde-throttle/balde/throttle"
)

// ErrKeyForm is ParseKey's error for a string that is not
// POLICY/ENV/IDENTIFIER.
var ErrKeyForm = errors.New("not POLICY/ENV/IDENTIFIER")

// ParseKey reads a bucket key as throttle.Key.String writes it,
// "POLICY/ENV/IDENTIFIER" (the identifier may itself contain "/"), and
// validates it. A string without two "/" is ErrKeyForm; a key with an
// empty, too long or unprintable part wraps throttle.ErrInvalidKey.
func ParseKey(s string) (throttle.Key, error) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return throttle.Key{}, fmt.Errorf("%q: %w", s, ErrKeyForm)
	}
	k := throttle.Key{Policy: parts[0], Env: parts[1], Identifier: parts[2]}
	if err := k.Validate(); err != nil {
		return throttle.Key{}, err
	}
	return k, nil
}
