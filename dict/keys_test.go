package dict_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    dict.KeyType
		wantErr error
	}{
		{"CPF", "11144477735", dict.KeyCPF, nil},
		{"CNPJNumeric", "11222333000181", dict.KeyCNPJ, nil},
		{"CNPJAlphanumeric", "12ABC34501DE35", dict.KeyCNPJ, nil},
		{"Phone", "+5561988880000", dict.KeyPhone, nil},
		{"PhoneShortest", "+12", dict.KeyPhone, nil},
		{"Email", "maria.souza@example.com", dict.KeyEmail, nil},
		{"EmailAt77", strings.Repeat("a", 65) + "@example.com", dict.KeyEmail, nil},
		{"EVPv4", "123e4567-e89b-42d3-a456-426614174000", dict.KeyEVP, nil},
		{"EVPv1", "123e4567-e89b-12d3-a456-426614174000", dict.KeyEVP, nil},

		{"ErrCPFCheckDigits", "11144477736", "", dict.ErrInvalidCPF},
		{"ErrCPFAllSame", "11111111111", "", dict.ErrInvalidCPF},
		{"ErrCPFZeros", "00000000000", "", dict.ErrInvalidCPF},
		{"ErrCNPJCheckDigits", "11222333000182", "", dict.ErrInvalidCNPJ},
		{"ErrCNPJAlphanumericCheckDigits", "12ABC34501DE36", "", dict.ErrInvalidCNPJ},
		{"ErrCNPJLowercase", "12abc34501de35", "", dict.ErrInvalidCNPJ},
		{"ErrCNPJLetterInCheckDigits", "12ABC34501DE3A", "", dict.ErrInvalidCNPJ},
		{"ErrCNPJAllSame", "00000000000000", "", dict.ErrInvalidCNPJ},
		{"ErrPhoneLeadingZero", "+0561988880000", "", dict.ErrInvalidPhone},
		{"ErrPhoneTooLong", "+1234567890123456", "", dict.ErrInvalidPhone},
		{"ErrPhoneLetters", "+55619888a0000", "", dict.ErrInvalidPhone},
		{"ErrEmailCapitals", "Maria@example.com", "", dict.ErrInvalidEmail},
		{"ErrEmailTooLong", strings.Repeat("a", 66) + "@example.com", "", dict.ErrInvalidEmail},
		{"ErrEmailNoDomain", "maria@", "", dict.ErrInvalidEmail},
		{"ErrEVPUppercase", "123E4567-E89B-12D3-A456-426614174000", "", dict.ErrInvalidEVP},
		{"ErrEVPDashes", "123e4567e-89b-12d3-a456-426614174000", "", dict.ErrInvalidEVP},
		{"ErrUnknown", "not a key", "", dict.ErrUnknownKeyType},
		{"ErrEmpty", "", "", dict.ErrUnknownKeyType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := dict.ParseKey(tt.in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorIs(t, err, dict.ErrInvalidKey)
				return
			}
			require.NoError(t, err)
			require.Equal(t, dict.Key{Type: tt.want, Value: tt.in}, k)
		})
	}
}

func TestParseKeyAsChecksTheGivenType(t *testing.T) {
	_, err := dict.ParseKeyAs(dict.KeyPhone, "11144477735")
	require.ErrorIs(t, err, dict.ErrInvalidPhone)
	_, err = dict.ParseKeyAs("IBAN", "x")
	require.ErrorIs(t, err, dict.ErrUnknownKeyType)
	_, err = dict.ParseKeyType("cpf")
	require.ErrorIs(t, err, dict.ErrUnknownKeyType)
}

func TestParsePayerID(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    dict.PersonType
		wantErr error
	}{
		{"PF", "52998224725", dict.PF, nil},
		{"PJ", "11222333000181", dict.PJ, nil},
		{"PJAlphanumeric", "12ABC34501DE35", dict.PJ, nil},
		{"ErrCPF", "52998224726", "", dict.ErrInvalidCPF},
		{"ErrCNPJ", "11222333000180", "", dict.ErrInvalidCNPJ},
		{"ErrLength", "123", "", dict.ErrInvalidPayerID},
		{"ErrFormatted", "529.982.247-25", "", dict.ErrInvalidPayerID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := dict.ParsePayerID(tt.in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorIs(t, err, dict.ErrInvalidPayerID)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, p)
		})
	}
}

func TestValidateISPB(t *testing.T) {
	require.NoError(t, dict.ValidateISPB("00000000"))
	require.NoError(t, dict.ValidateISPB("12345678"))
	for _, bad := range []string{"", "1234567", "123456789", "1234567a", " 2345678", "１２３４５６７８"} {
		require.ErrorIs(t, dict.ValidateISPB(bad), dict.ErrInvalidISPB, bad)
	}
}

func TestEndToEndID(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id, err := dict.NewEndToEndID("12345678", now)
	require.NoError(t, err)
	require.Len(t, id, dict.EndToEndIDLen)
	require.Equal(t, "E12345678202601020304", id[:21])
	require.NoError(t, dict.ValidateEndToEndID(id))
	other, err := dict.NewEndToEndID("12345678", now)
	require.NoError(t, err)
	require.NotEqual(t, id, other)

	_, err = dict.NewEndToEndID("1234", now)
	require.ErrorIs(t, err, dict.ErrInvalidISPB)
	for _, bad := range []string{
		"",
		"E12345678202601020304ab3Cd5Ef7G",   // 31 characters
		"E12345678202601020304ab3Cd5Ef7Gh1", // 33 characters
		"D12345678202601020304ab3Cd5Ef7Gh",  // not E
		"E12345678202613020304ab3Cd5Ef7Gh",  // month 13
		"E12345678202601020304ab3Cd5Ef7G!",  // not alphanumeric
	} {
		require.ErrorIs(t, dict.ValidateEndToEndID(bad), dict.ErrInvalidEndToEndID, bad)
	}
}

func TestValidateCategory(t *testing.T) {
	for _, ok := range []string{"A", "H", "I", "Z9"} {
		require.NoError(t, dict.ValidateCategory(ok))
	}
	for _, bad := range []string{"", "A B", strings.Repeat("A", 17), "Á"} {
		require.ErrorIs(t, dict.ValidateCategory(bad), dict.ErrInvalidCategory, bad)
	}
}
