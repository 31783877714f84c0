package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/sifen"
)

// WriteOverridePrompt shows document d left in sending and the risk of
// its override, then asks whether actor overrides it ([y/N]).
func WriteOverridePrompt(w io.Writer, tr *i18n.Printer, d sifen.Document, actor string) {
	fmt.Fprintf(w, "%s\nCDC %s\n%s\n\n", tr.Sprintf("Document %d (RUC %s, %s) was left in sending by a send without answer (%s). balde keeps it unsendable until SIFEN answers for it, and after SIFEN's 0420 (not found) until that send is 48 hours old: DNIT says the processing of a lot takes 1 to 24 hours.",
		d.ID, d.RUC.String(), string(d.Env), tr.Time(d.ClaimedAt)), d.CDC,
		tr.Sprintf("Risk: SIFEN may still be processing the first send. If it is, the document reaches SIFEN twice: the second send is rejected as a duplicate CDC, or its lot is not queued (0301) and the RUC is blocked."))
	fmt.Fprint(w, tr.Sprintf("Ask SIFEN about document %d now and, if it answers 0420, make it sendable again, as %s? [y/N] ", d.ID, strconv.Quote(actor)))
}
