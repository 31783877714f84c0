package report

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
)

// Confirm reads one line from r and reports whether it is "y" or "yes", in
// any case (the end of the input is no), or returns ctx.Err() as soon as
// ctx ends; the read's goroutine ends with the input.
func Confirm(ctx context.Context, r io.Reader) (bool, error) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		a := strings.ToLower(strings.TrimSpace(s))
		return a == "y" || a == "yes", nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Shorten cuts s to n characters with an ellipsis in the middle.
func Shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	half := (n - 1) / 2
	return string(r[:half]) + "…" + string(r[len(r)-(n-1-half):])
}

// Watch draws every period until ctx ends (nil), under a line with the
// period and time, clearing a terminal first; draw's errors stop it.
func Watch(ctx context.Context, w io.Writer, tr *i18n.Printer, clock Clock, every time.Duration, draw func() error) error {
	for {
		if IsTerminal(w) {
			fmt.Fprint(w, "\033[H\033[2J") // home, clear
		}
		fmt.Fprintln(w, tr.Sprintf("every %s, at %s (Ctrl-C to stop)", every, tr.Time(clock.Time())))
		if err := draw(); err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C during a draw
			}
			return err
		}
		if err := clock.Sleep(ctx, every); err != nil {
			return nil // interrupted: the normal end of a watch
		}
	}
}
