package report_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/report"
)

func TestReadAnswer(t *testing.T) {
	got, err := report.ReadAnswer(context.Background(), stringsReader("yes\nno\n"))
	require.NoError(t, err)
	require.Equal(t, "yes\n", got)

	got, err = report.ReadAnswer(context.Background(), stringsReader(""))
	require.NoError(t, err)
	require.Empty(t, got, "the end of the input is the empty answer")

	// Ctrl-C while nothing is typed: the prompt ends at once.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = report.ReadAnswer(ctx, pr)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second)
}

func stringsReader(s string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, s)
		pw.Close()
	}()
	return pr
}

func TestConfirmed(t *testing.T) {
	for answer, want := range map[string]bool{
		"y\n": true, "YES\n": true, "  yes ": true, "": false, "\n": false, "n\n": false, "yess\n": false, "sim\n": false,
	} {
		require.Equal(t, want, report.Confirmed(answer), "%q", answer)
	}
}

func TestShorten(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"80069563", 24, "80069563"},
		{"012345678901234567890123", 24, "012345678901234567890123"},
		{"01800695631001001000000612026010210000001239", 24, "01800695631…210000001239"},
		{"ñandutíñandutí", 5, "ña…tí"},
	} {
		got := report.Shorten(tc.in, tc.n)
		require.Equal(t, tc.want, got)
		require.LessOrEqual(t, len([]rune(got)), tc.n)
	}
}
