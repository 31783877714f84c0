package inspect_test

import (
	"errors"
	"testing"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

// FuzzDecodeCursor: a cursor comes from a query string (?after=), so any
// string either decodes to a valid key that encodes back to a cursor of
// the same key, or fails with ErrInvalidKey; never a panic.
func FuzzDecodeCursor(f *testing.F) {
	for _, k := range []throttle.Key{
		{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "11144477735"},
		{Policy: "SIFEN", Env: "test", Identifier: "80069563"},
	} {
		f.Add(inspect.EncodeCursor(k))
	}
	for _, s := range []string{"", "e30", "WyIiLCIiLCIiXQ", "WzEsMiwzXQ", "!!", "WyJhIiwiYiJd", "bnVsbA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := inspect.DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, throttle.ErrInvalidKey) {
				t.Fatalf("DecodeCursor(%q): error %v does not wrap ErrInvalidKey", s, err)
			}
			return
		}
		if s == "" {
			if k != (throttle.Key{}) {
				t.Fatalf(`DecodeCursor("") = %v, want the zero key`, k)
			}
			return
		}
		again, err := inspect.DecodeCursor(inspect.EncodeCursor(k))
		if err != nil || again != k {
			t.Fatalf("cursor of %v decodes to %v, %v", k, again, err)
		}
	})
}

// FuzzParseCondition: a condition comes from a query string (?state=);
// anything parses to a condition whose Param parses back to it, or fails.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{"", "cooling", "cooldown", "cooling down", "cooling-down", "blocked", "negative", "Blocked", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := inspect.ParseCondition(s)
		if err != nil {
			return
		}
		again, err := inspect.ParseCondition(c.Param())
		if err != nil || again != c {
			t.Fatalf("ParseCondition(%q) = %v; its Param %q parses to %v, %v", s, c, c.Param(), again, err)
		}
	})
}
