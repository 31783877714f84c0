package web

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// parseEntries reads a configured list from r: one entry per line, or
// several separated by commas; blank lines and lines starting with # are
// skipped. parse reads one entry; name gives the entry's identity (no
// two entries may share one) and how an error shows it. list names the
// list in errors, which also give the line: "web: users: line 3: ...".
func parseEntries[T any](r io.Reader, list string, parse func(entry string) (T, error), name func(T) (key, shown string)) ([]T, error) {
	var out []T
	seen := make(map[string]bool)
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		for entry := range strings.SplitSeq(text, ",") {
			if entry = strings.TrimSpace(entry); entry == "" {
				continue
			}
			v, err := parse(entry)
			if err != nil {
				return nil, fmt.Errorf("web: %s: line %d: %w", list, line, err)
			}
			key, shown := name(v)
			if seen[key] {
				return nil, fmt.Errorf("web: %s: line %d: %s listed twice", list, line, shown)
			}
			seen[key] = true
			out = append(out, v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("web: %s: %w", list, err)
	}
	return out, nil
}
