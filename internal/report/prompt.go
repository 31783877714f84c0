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

// ReadAnswer reads one line from r (a prompt's answer; "" at the end of
// the input), or returns ctx.Err() as soon as ctx ends: Ctrl-C at a prompt
// cancels it, and the next line typed is not taken as the answer. The read
// itself cannot be interrupted; its goroutine ends with the input (a
// command exits first).
func ReadAnswer(ctx context.Context, r io.Reader) (string, error) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		return s, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Confirmed reports whether a prompt's answer is yes ("y" or "yes", any
// case, blanks around it ignored); anything else, the empty answer
// included, is no.
func Confirmed(answer string) bool {
	a := strings.ToLower(strings.TrimSpace(answer))
	return a == "y" || a == "yes"
}

// Shorten cuts s to n characters with an ellipsis in the middle, so that
// both ends of a long identifier (a CDC, an end-to-end id) stay readable
// in a narrow column.
func Shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	half := (n - 1) / 2
	return string(r[:half]) + "…" + string(r[len(r)-(n-1-half):])
}

// Watch draws with draw every period until ctx ends, as "balde buckets
// list --watch" does: on a terminal it clears the screen first, then a line
// says the period and the time (clock's, in tr's language). An ended ctx
// is the normal end of a watch (nil, also when it ends during a draw);
// draw's other errors stop it.
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
