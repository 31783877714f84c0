package sifen_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
)

func TestCheckDigit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"88888801", 5}, // the example: 314 mod 11 = 6, 11 - 6 = 5
		{"80069563", 1},
		{"800695", 4},
		{"3437941", 0},
		{"1234567", 9},
		{"A1234567", 3}, // "A" counts as "65"
		{"0", 0},
		{"", 0},
	} {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, sifen.CheckDigit(tc.in))
			require.Equal(t, tc.want, referenceCheckDigit(tc.in))
		})
	}
}

func TestRUCValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ruc     sifen.RUC
		wantErr error
	}{
		{"OK", sifen.RUC{Number: "80069563", DV: 1}, nil},
		{"OKThreeChars", sifen.RUC{Number: "123", DV: sifen.CheckDigit("123")}, nil},
		{"OKLetters", sifen.RUC{Number: "A1234567", DV: 3}, nil},
		{"ErrInvalidDV", sifen.RUC{Number: "80069563", DV: 2}, sifen.ErrInvalidDV},
		{"ErrInvalidRUCTooShort", sifen.RUC{Number: "12", DV: sifen.CheckDigit("12")}, sifen.ErrInvalidRUC},
		{"ErrInvalidRUCTooLong", sifen.RUC{Number: "123456789", DV: sifen.CheckDigit("123456789")}, sifen.ErrInvalidRUC},
		{"ErrInvalidRUCSymbol", sifen.RUC{Number: "8006-563", DV: sifen.CheckDigit("8006-563")}, sifen.ErrInvalidRUC},
		{"ErrInvalidRUCEmpty", sifen.RUC{}, sifen.ErrInvalidRUC},
		{"ErrInvalidRUCDVRange", sifen.RUC{Number: "80069563", DV: 10}, sifen.ErrInvalidRUC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ruc.Validate()
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestParseRUC(t *testing.T) {
	r, err := sifen.ParseRUC("80069563-1")
	require.NoError(t, err)
	require.Equal(t, sifen.RUC{Number: "80069563", DV: 1}, r)
	require.Equal(t, "80069563-1", r.String())

	_, err = sifen.ParseRUC("80069563-7")
	require.ErrorIs(t, err, sifen.ErrInvalidDV)
	require.ErrorContains(t, err, "the check digit of 80069563 is 1")
	_, err = sifen.ParseRUC("80069563")
	require.ErrorIs(t, err, sifen.ErrInvalidRUC)
	_, err = sifen.ParseRUC("80069563-12")
	require.ErrorIs(t, err, sifen.ErrInvalidRUC)

	// SET's algorithm uppercases letters first (issue 11): 123456a has the
	// check digit of 123456A, 7, not 5 (what "a" = 97 would give).
	require.Equal(t, 7, sifen.CheckDigit("123456A"))
	require.Equal(t, 7, sifen.CheckDigit("123456a"))
	_, err = sifen.ParseRUC("123456a-5")
	require.ErrorIs(t, err, sifen.ErrInvalidDV)
	_, err = sifen.ParseRUC("123456a-7")
	require.NoError(t, err)
}

// referenceCheckDigit is SET's algorithm written the way its published
// pseudo-code is: expand the string first, then weigh from the right.
func referenceCheckDigit(s string) int {
	expanded := ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A' // SET uppercases first
		}
		if c >= '0' && c <= '9' {
			expanded += string(c)
		} else {
			expanded += strconv.Itoa(int(c))
		}
	}
	total, k := 0, 2
	for i := len(expanded) - 1; i >= 0; i-- {
		if k > 11 {
			k = 2
		}
		total += int(expanded[i]-'0') * k
		k++
	}
	r := total % 11
	if r > 1 {
		return 11 - r
	}
	return 0
}

func FuzzRUCCheckDigit(f *testing.F) {
	for _, s := range []string{"88888801", "80069563", "A1234567", "800695", "123", "zzzzzzzz", "\xff\x00", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dv := sifen.CheckDigit(s)
		require.GreaterOrEqual(t, dv, 0)
		require.LessOrEqual(t, dv, 9)
		require.Equal(t, referenceCheckDigit(s), dv)

		formErr := sifen.ValidateRUCNumber(s)
		err := sifen.RUC{Number: s, DV: dv}.Validate()
		if formErr != nil {
			require.ErrorIs(t, err, sifen.ErrInvalidRUC)
			return
		}
		require.NoError(t, err)
		require.ErrorIs(t, sifen.RUC{Number: s, DV: (dv + 1) % 10}.Validate(), sifen.ErrInvalidDV)
		parsed, err := sifen.ParseRUC(s + "-" + strconv.Itoa(dv))
		require.NoError(t, err)
		require.Equal(t, sifen.RUC{Number: s, DV: dv}, parsed)
	})
}
