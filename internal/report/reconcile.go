package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/balde-throttle/balde/dict"
)

// WriteReconcile writes r as "balde dict-reconcile" prints it; the caller
// says why a refused reconciliation was.
func WriteReconcile(w io.Writer, r dict.ReconcileResult) (int64, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "category %s", r.Category)
	if r.CategoryChanged {
		b.WriteString(" (changed)")
	}
	fmt.Fprintf(&b, "; %d policies at the DICT, %d local buckets lowered\n", len(r.Remote), len(r.Lowered))
	for _, a := range r.Lowered {
		fmt.Fprintf(&b, "lowered %s by %d to %d\n", a.Key, -a.Applied, a.Balance)
	}
	for _, s := range r.Mismatched {
		fmt.Fprintf(&b, "mismatch %s\n", s)
	}
	for _, name := range r.Unknown {
		fmt.Fprintf(&b, "unknown policy %s (not in the catalog)\n", name)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
