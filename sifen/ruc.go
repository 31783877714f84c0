package sifen

import (
	"fmt"
	"strconv"
	"strings"
)

// RUC is a taxpayer's number with its check digit: "80069563-1" is
// RUC{Number: "80069563", DV: 1}.
type RUC struct {
	// Number is dRucEm: 3 to 8 ASCII letters or digits; DV is dDVEmi, 0..9.
	Number string
	DV     int
}

// String renders r as "NUMBER-DV".
func (r RUC) String() string { return r.Number + "-" + strconv.Itoa(r.DV) }

// validate checks the number's form (ErrInvalidRUC) and the check digit
// (ErrInvalidDV, naming the right one).
func (r RUC) validate() error {
	if err := ValidateRUCNumber(r.Number); err != nil {
		return err
	}
	if r.DV < 0 || r.DV > 9 {
		return fmt.Errorf("%w: check digit %d of %s is not one digit", ErrInvalidRUC, r.DV, r.Number)
	}
	if want := CheckDigit(r.Number); want != r.DV {
		return fmt.Errorf("%w: %s-%d (the check digit of %s is %d)", ErrInvalidDV, r.Number, r.DV, r.Number, want)
	}
	return nil
}

// ParseRUC parses "NUMBER-DV" (e.g. "80069563-1") and validates it.
func ParseRUC(s string) (RUC, error) {
	num, dv, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return RUC{}, fmt.Errorf("%w: %q is not NUMBER-DV", ErrInvalidRUC, s)
	}
	return newRUC(num, dv)
}

// newRUC builds a RUC from dRucEm and dDVEmi as they appear in a DE.
func newRUC(number, dv string) (RUC, error) {
	if len(dv) != 1 || dv[0] < '0' || dv[0] > '9' {
		return RUC{}, fmt.Errorf("%w: check digit %q of %q is not one digit", ErrInvalidRUC, dv, number)
	}
	r := RUC{Number: number, DV: int(dv[0] - '0')}
	return r, r.validate()
}

// ValidateRUCNumber checks the form of a RUC without its check digit:
// 3 to 8 ASCII letters or digits. The error wraps ErrInvalidRUC.
func ValidateRUCNumber(number string) error {
	if len(number) < 3 || len(number) > 8 {
		return fmt.Errorf("%w: %q is not 3 to 8 characters", ErrInvalidRUC, number)
	}
	for i := 0; i < len(number); i++ {
		c := number[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return fmt.Errorf("%w: %q holds %q (only letters and digits)", ErrInvalidRUC, number, c)
		}
	}
	return nil
}

// CheckDigit returns SET's module-11 check digit of s (a RUC's dDVEmi, a
// CDC's last digit): letters are uppercased and every non-digit byte is
// replaced by its decimal code ("A" becomes "65"); the digits, weighted 2,
// 3, ..., 11 from the right (again 2 after 11), are summed; with r = sum
// mod 11 the digit is 11 - r when r > 1, else 0. It does not validate s.
//
// Example: 88888801 → 1·2 + 0·3 + 8·(4+5+6+7+8+9) = 314; 314 mod 11 = 6;
// 11 - 6 = 5.
func CheckDigit(s string) int {
	// Expand right to left so the weights can run as the digits come.
	sum, k := 0, 2
	add := func(d int) {
		if k > 11 {
			k = 2
		}
		sum += d * k
		k++
	}
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if '0' <= c && c <= '9' {
			add(int(c - '0'))
			continue
		}
		code := strconv.Itoa(int(c))
		for j := len(code) - 1; j >= 0; j-- {
			add(int(code[j] - '0'))
		}
	}
	if r := sum % 11; r > 1 {
		return 11 - r
	}
	return 0
}
