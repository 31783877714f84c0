package report_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
)

func TestConfirmReadsOneLine(t *testing.T) {
	got, err := report.Confirm(context.Background(), stringsReader("yes\nno\n"))
	require.NoError(t, err)
	require.True(t, got, "the first line only")

	got, err = report.Confirm(context.Background(), stringsReader(""))
	require.NoError(t, err)
	require.False(t, got, "the end of the input is the empty answer")

	// Ctrl-C while nothing is typed: the prompt ends at once.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = report.Confirm(ctx, pr)
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
		got, err := report.Confirm(context.Background(), stringsReader(answer))
		require.NoError(t, err)
		require.Equal(t, want, got, "%q", answer)
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

func TestWatch(t *testing.T) {
	tr := i18n.New(i18n.English, time.UTC)
	at := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	drawErr := errors.New("store down")
	tests := []struct {
		name      string
		sleeps    int // sleeps before ctx ends
		draw      func(n int, cancel context.CancelFunc) error
		wantDraws int
		wantErr   error
	}{
		{"until ctx ends", 2, func(int, context.CancelFunc) error { return nil }, 3, nil},
		{"a draw fails", 5, func(n int, _ context.CancelFunc) error {
			if n == 2 {
				return drawErr
			}
			return nil
		}, 2, drawErr},
		{"ctx ends during a draw", 5, func(_ int, cancel context.CancelFunc) error { cancel(); return context.Canceled }, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			slept := 0
			clock := report.NewClock(func() time.Time { return at }, func(ctx context.Context, d time.Duration) error {
				require.Equal(t, 2*time.Second, d)
				if slept++; slept > tt.sleeps {
					return context.Canceled
				}
				return ctx.Err()
			})
			var out bytes.Buffer
			draws := 0
			err := report.Watch(ctx, &out, tr, clock, 2*time.Second, func() error { draws++; return tt.draw(draws, cancel) })
			require.ErrorIs(t, err, tt.wantErr)
			require.Equal(t, tt.wantDraws, draws)
			require.Equal(t, tt.wantDraws, strings.Count(out.String(), "every 2s, at "), "one header per draw")
			require.NotContains(t, out.String(), "\033[2J", "no screen clearing off a terminal")
		})
	}
}
