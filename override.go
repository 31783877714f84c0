package balde

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/sifen"
)

// OverrideSifen is sifen.Sender.Override of document id on an operator's
// word ("balde sifen-override", docs/decisions/0210): SIFEN is asked by
// the document's CDC, and only its 0420 makes the document sendable again
// before SIFEN's 48 hours. It is recorded in the audit trail as
// audit.CLIUser(actor) with reason and what came of it (a 0422 or a
// failure too), except when it refused before asking: no reason
// (ErrNoReason), no SIFEN sender configured, no such document
// (sifen.ErrNotFound). When only the audit entry failed, the error says so
// after what was done.
func (e *Engine) OverrideSifen(ctx context.Context, id int64, actor, reason string) (sifen.Overridden, error) {
	switch {
	case strings.TrimSpace(reason) == "":
		return sifen.Overridden{}, ErrNoReason
	case e.sender == nil:
		return sifen.Overridden{}, errors.New("no SIFEN sender configured")
	}
	o, err := e.sender.Override(ctx, id)
	if errors.Is(err, sifen.ErrNotFound) {
		return o, err
	}
	entry := audit.Entry{User: audit.CLIUser(actor), Action: audit.ActionSifenOverride, Target: strconv.FormatInt(id, 10), Reason: reason,
		Outcome: audit.OverrideOutcome(o.Code, o.AuthNumber, o.Done)}
	if err != nil {
		entry.Outcome = url.Values{"error": {strings.ReplaceAll(err.Error(), "sifen: ", "")}}.Encode()
	}
	if _, aerr := e.audit.Record(context.WithoutCancel(ctx), entry); aerr != nil {
		return o, errors.Join(err, fmt.Errorf("the override of document %d was tried but not recorded in the audit trail: %w", id, aerr))
	}
	return o, err
}
