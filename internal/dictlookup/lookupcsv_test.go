package dictlookup_test

import (
	"encoding/csv"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
)

const lookupPayer = "52998224725"

func TestReadLookupRequests(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		want     []dictlookup.LookupLine
		wantLine int    // line of a *LineError, 0 for none
		wantErr  string // substring of the error, "" for none
	}{
		{"HeaderCommentsAndDefaultPayer", "key,payer\n# a comment\n+5561988880000\nmaria.souza@example.com, 11222333000181\n", []dictlookup.LookupLine{
			{Line: 3, LookupRequest: dict.LookupRequest{Key: "+5561988880000", PayerID: lookupPayer}},
			{Line: 4, LookupRequest: dict.LookupRequest{Key: "maria.souza@example.com", PayerID: "11222333000181"}},
		}, 0, ""},
		{"Quoted", "\"+5561988880000\",\"11144477735\"\n", []dictlookup.LookupLine{
			{Line: 1, LookupRequest: dict.LookupRequest{Key: "+5561988880000", PayerID: "11144477735"}},
		}, 0, ""},
		{"ThreeFields", "+5561988880000\na,b,c\n", nil, 2, "line 2: too many fields: 3, want key or key,payer"},
		{"InvalidKey", "11144477700\n", nil, 1, "line 1: dict: invalid key"},
		{"InvalidPayer", "+5561988880000,11144477700\n", nil, 1, "line 1: dict: invalid payer id"},
		{"BareQuote", "key,payer\n\"+5561988880000," + lookupPayer + "\n", nil, 0, "extraneous or missing \" in quoted-field"},
		{"NoKey", "key,payer\n", nil, 0, "no key to look up"},
		{"TooLong", "+5561988880000\n" + strings.Repeat("a", 5000) + "@example.com\n", nil, 2, "line 2: line too long: longer than 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dictlookup.ReadLookupRequests(strings.NewReader(tt.input), lookupPayer)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			var le *dictlookup.LineError
			if tt.wantLine == 0 {
				require.False(t, errors.As(err, &le), "not a line error: %v", err)
				return
			}
			require.ErrorAs(t, err, &le)
			require.Equal(t, tt.wantLine, le.Line)
		})
	}

	_, err := dictlookup.ReadLookupRequests(strings.NewReader("+5561988880000\n"), "")
	require.ErrorIs(t, err, dictlookup.ErrNoPayer)
	_, err = dictlookup.ReadLookupRequests(strings.NewReader(""), lookupPayer)
	require.ErrorIs(t, err, dictlookup.ErrNoLookups)
	var pe *csv.ParseError
	_, err = dictlookup.ReadLookupRequests(strings.NewReader("\"unterminated\n"), lookupPayer)
	require.ErrorAs(t, err, &pe)
}

// longLine reads as "key,payer" then one line of n bytes and a newline,
// making no copy of it.
type longLine struct{ head, n int }

func (l *longLine) Read(p []byte) (int, error) {
	const head = "key,payer\n"
	if l.n <= 0 {
		return 0, io.EOF
	}
	i := 0
	for ; i < len(p) && l.head < len(head); i++ {
		p[i] = head[l.head]
		l.head++
	}
	for ; i < len(p) && l.n > 0; i++ {
		p[i] = 'a'
		if l.n--; l.n == 0 {
			p[i] = '\n'
		}
	}
	return i, nil
}

// TestReadLookupRequestsLineLimit: a 64 MB line is refused as bad input
// naming the line, after reading no more than the bound of it (before, the
// whole line was read into memory: a 300 MB line took 1.2 GB).
func TestReadLookupRequestsLineLimit(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := dictlookup.ReadLookupRequests(&longLine{n: 64 << 20}, lookupPayer)
	runtime.ReadMemStats(&after)
	var le *dictlookup.LineError
	require.ErrorAs(t, err, &le)
	require.Equal(t, 2, le.Line)
	require.ErrorIs(t, err, dictlookup.ErrLineTooLong)
	require.ErrorContains(t, err, "line 2: line too long: longer than 4096 bytes")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated reading a 64 MB line")
}

// FuzzReadLookupRequests: any input is either refused as bad input (a
// *LineError, a *csv.ParseError or ErrNoLookups) or read into lookups, in
// line order, whose every key and payer is valid.
func FuzzReadLookupRequests(f *testing.F) {
	for _, s := range []string{
		"key,payer\n+5561988880000,52998224725\n",
		"# c\n11144477735\n",
		"maria.souza@example.com, 11222333000181\n",
		"\"+5561988880000\",\"52998224725\"\n",
		"a,b,c\n",
		"\"unterminated\n",
		"",
		"key,payer\n" + strings.Repeat("a", 5000) + "@example.com,52998224725\n", // beyond the line limit
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		lines, err := dictlookup.ReadLookupRequests(strings.NewReader(input), lookupPayer)
		if err != nil {
			var le *dictlookup.LineError
			var pe *csv.ParseError
			require.True(t, errors.As(err, &le) || errors.As(err, &pe) || errors.Is(err, dictlookup.ErrNoLookups), "bad input, not a failure: %v", err)
			return
		}
		require.NotEmpty(t, lines)
		prev := 0
		for _, l := range lines {
			require.Greater(t, l.Line, prev)
			prev = l.Line
			_, err := dict.ParseKey(l.Key)
			require.NoError(t, err)
			require.NoError(t, dict.ValidatePayerID(l.PayerID))
		}
	})
}
