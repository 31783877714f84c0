package dict

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// KeyType is the type of a Pix key.
type KeyType string

const (
	KeyCPF   KeyType = "CPF"
	keyCNPJ  KeyType = "CNPJ"
	KeyPhone KeyType = "PHONE"
	KeyEmail KeyType = "EMAIL"
	KeyEVP   KeyType = "EVP"
)

// Key is a valid Pix key and its type.
type Key struct {
	Type  KeyType
	Value string
}

const maxEmailLen = 77 // DICT API 2.6.1

var (
	phoneRE = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
	// emailRE is the DICT's pattern for EMAIL keys: lowercase only.
	emailRE    = regexp.MustCompile("^[a-z0-9.!#$&'*+/=?^_`{|}~-]+@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$")
	evpRE      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	ispbRE     = regexp.MustCompile(`^[0-9]{8}$`)
	e2eRE      = regexp.MustCompile(`^E[0-9]{8}[0-9]{12}[a-zA-Z0-9]{11}$`)
	categoryRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,16}$`)
	wordRE     = regexp.MustCompile(`\w+`) // a whole word of a problem's detail (Problem.Names)
)

// ParseKey validates s as a Pix key and infers its type: a leading "+" is a
// PHONE, an "@" an EMAIL, 36 characters with dashes an EVP, 11 digits a CPF,
// 14 characters a CNPJ. It does not normalise (an EMAIL with capitals is an
// error). Errors wrap ErrInvalidKey and the type's sentinel, or errUnknownKeyType.
func ParseKey(s string) (Key, error) {
	var t KeyType
	switch {
	case strings.HasPrefix(s, "+"):
		t = KeyPhone
	case strings.Contains(s, "@"):
		t = KeyEmail
	case len(s) == 36 && strings.Count(s, "-") == 4:
		t = KeyEVP
	case taxIDs[personPF].shape.MatchString(s): // 11 digits
		t = KeyCPF
	case len(s) == 14:
		t = keyCNPJ
	default:
		return Key{}, fmt.Errorf("%w %q: %w (not a CPF, CNPJ, PHONE, EMAIL or EVP)", ErrInvalidKey, truncate(s), errUnknownKeyType)
	}
	return parseKeyAs(t, s)
}

// parseKeyAs validates s as a key of type t. Errors as ParseKey.
func parseKeyAs(t KeyType, s string) (Key, error) {
	var err error
	switch t {
	case KeyCPF:
		err = validateTaxID(personPF, s)
	case keyCNPJ:
		err = validateTaxID(personPJ, s)
	case KeyPhone:
		if !phoneRE.MatchString(s) {
			err = fmt.Errorf("%w: %q is not E.164 (+ then 2 to 15 digits, no leading 0)", errInvalidPhone, truncate(s))
		}
	case KeyEmail:
		switch {
		case len(s) > maxEmailLen:
			err = fmt.Errorf("%w: %d characters (at most %d)", errInvalidEmail, len(s), maxEmailLen)
		case strings.ToLower(s) != s:
			err = fmt.Errorf("%w: %q has capital letters (the DICT stores EMAIL keys in lowercase)", errInvalidEmail, truncate(s))
		case !emailRE.MatchString(s):
			err = fmt.Errorf("%w: %q is not an email address", errInvalidEmail, truncate(s))
		}
	case KeyEVP:
		if !evpRE.MatchString(s) {
			err = fmt.Errorf("%w: %q is not a lowercase UUID", errInvalidEVP, truncate(s))
		}
	default:
		return Key{}, fmt.Errorf("%w: %w %q", ErrInvalidKey, errUnknownKeyType, t)
	}
	if err != nil {
		return Key{}, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return Key{Type: t, Value: s}, nil
}

// taxIDs are the rules of a CPF (PF) and a CNPJ (PJ): its shape, then not
// one repeated character, then the last two characters the mod-11 check
// digits of the others (checkDigitsOK), weighted 2..11 for a CPF and 2..9
// for a CNPJ. A CNPJ is numeric or alphanumeric (^[A-Z0-9]{12}[0-9]{2}$,
// "A" valued 17): "12ABC34501DE35" is valid.
var taxIDs = map[personType]struct {
	shape        *regexp.Regexp
	maxWeight    int
	err          error
	want, digits string
}{
	personPF: {regexp.MustCompile(`^[0-9]{11}$`), 11, errInvalidCPF, "11 digits", "digits"},
	personPJ: {regexp.MustCompile(`^[A-Z0-9]{12}[0-9]{2}$`), 9, errInvalidCNPJ, "12 digits or capital letters followed by 2 check digits", "characters"},
}

// validateTaxID reports whether s is a CPF (p is personPF) or a CNPJ
// (personPJ) by taxIDs. The error wraps errInvalidCPF or errInvalidCNPJ.
func validateTaxID(p personType, s string) error {
	t := taxIDs[p]
	switch {
	case !t.shape.MatchString(s):
		return fmt.Errorf("%w: %q is not %s", t.err, truncate(s), t.want)
	case strings.Count(s, s[:1]) == len(s):
		return fmt.Errorf("%w: %q has all %s equal", t.err, s, t.digits)
	case !checkDigitsOK(s, t.maxWeight):
		return fmt.Errorf("%w: %q has wrong check digits", t.err, s)
	}
	return nil
}

// checkDigitsOK reports whether the last two characters of s are the mod-11
// check digits of those before each, every character valued as its ASCII
// code minus 48 and weighted 2, 3, ... maxWeight from the right, then 2 again.
func checkDigitsOK(s string, maxWeight int) bool {
	for n := len(s) - 2; n < len(s); n++ {
		sum := 0
		for i := range n {
			sum += int(s[i]-'0') * ((n-1-i)%(maxWeight-1) + 2)
		}
		dv := 0
		if r := sum % 11; r >= 2 {
			dv = 11 - r
		}
		if int(s[n]-'0') != dv {
			return false
		}
	}
	return true
}

// ValidateISPB reports whether s is an ISPB, 8 digits (ErrInvalidISPB).
func ValidateISPB(s string) error {
	if !ispbRE.MatchString(s) {
		return fmt.Errorf("%w: %q is not 8 digits", ErrInvalidISPB, truncate(s))
	}
	return nil
}

// personType tells a natural person (PF, by CPF) from a legal person (PJ,
// by CNPJ), by which the DICT sizes a payer's anti-scan buckets.
type personType string

const (
	personPF personType = "PF"
	personPJ personType = "PJ"
)

// ValidatePayerID validates the payer id of a lookup, a CPF or a CNPJ. The
// error wraps ErrInvalidPayerID.
func ValidatePayerID(s string) error {
	_, err := parsePayerID(s)
	return err
}

// parsePayerID is ValidatePayerID telling PF from PJ; the error also wraps
// errInvalidCPF or errInvalidCNPJ.
func parsePayerID(s string) (personType, error) {
	p := personPJ
	if len(s) == 11 {
		p = personPF
	}
	err := validateTaxID(p, s)
	if err != nil && len(s) != 11 && len(s) != 14 {
		err = fmt.Errorf("%w or %w: %q is neither 11 nor 14 characters", errInvalidCPF, errInvalidCNPJ, truncate(s))
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidPayerID, err)
	}
	return p, nil
}

// NewEndToEndID returns a fresh Pix EndToEndId for a payment initiated by
// participant ispb at now: "E", the ISPB, the UTC time as yyyyMMddHHmm and
// 11 random letters and digits (32 characters), e.g.
// "E12345678202601020304ab3Cd5Ef7Gh". The error wraps ErrInvalidISPB.
func NewEndToEndID(ispb string, now time.Time) (string, error) {
	if err := ValidateISPB(ispb); err != nil {
		return "", err
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	return "E" + ispb + now.UTC().Format("200601021504") + randomString(alphabet, 11), nil
}

// ValidateEndToEndID reports whether s is a Pix EndToEndId: "E", an ISPB, a
// valid yyyyMMddHHmm and 11 letters or digits (ErrInvalidEndToEndID).
func ValidateEndToEndID(s string) error {
	if !e2eRE.MatchString(s) {
		return fmt.Errorf("%w: %q is not E + ISPB + yyyyMMddHHmm + 11 letters or digits", ErrInvalidEndToEndID, truncate(s))
	}
	if _, err := time.Parse("200601021504", s[9:21]); err != nil {
		return fmt.Errorf("%w: %q has no valid date and time", ErrInvalidEndToEndID, s)
	}
	return nil
}

// ValidateCategory reports whether s can be a participant category: 1 to 16
// letters, digits, "-" or "_", so that a category beyond A..H is no error
// (errInvalidCategory).
func ValidateCategory(s string) error {
	if !categoryRE.MatchString(s) {
		return fmt.Errorf("%w: %q (want a letter such as A..H)", errInvalidCategory, truncate(s))
	}
	return nil
}

// randomString returns n characters drawn uniformly from alphabet (at most
// 256 bytes) with crypto/rand.
func randomString(alphabet string, n int) string {
	limit := 256 - 256%len(alphabet) // rejecting bytes from limit up keeps the draw uniform
	b := make([]byte, 0, n)
	for len(b) < n {
		var r [1]byte
		_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+)
		if int(r[0]) < limit {
			b = append(b, alphabet[int(r[0])%len(alphabet)])
		}
	}
	return string(b)
}

// truncate shortens s for error messages.
func truncate(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
