package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen"
)

// runSifenOverride is "balde sifen-override": the documents page's
// override of SIFEN's 48 hours in the terminal (docs/decisions/0210). It
// shows the document and the risk, asks for confirmation unless --yes, and
// asks SIFEN by CDC (balde.Engine.OverrideSifen): only SIFEN's 0420 makes
// the document a draft again, sent by the normal send path (sifen-send, the
// Send button). It is recorded in the audit trail as cli:ACTOR with the
// reason. Exit 0: overridden; 1: refused (SIFEN has the DE: 0422, another
// answer or none, not confirmed, the document not left in sending); 2: bad
// input, nothing asked.
func runSifenOverride(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("sifen-override",
		"sifen-override --reason WHY [--actor NAME] [--yes] [--db DSN] [--sifen-url URL] DOCUMENT_ID",
		"balde sifen-override --db sqlite://balde.db --sifen-url official --yes --actor alice --reason customer-waiting 1", storeFlags, sifenFlags)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	actor := fs.String("actor", settings.DefaultActor(m.Getenv), "who overrides, recorded in the audit trail as cli:ACTOR (default $USER@hostname, or \"cli\" without $USER)")
	reason := fs.String("reason", "", "why (required), recorded in the audit trail")
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return UsageError("sifen-override: want one DOCUMENT_ID (see balde sifen-override --help)")
	}
	id, perr := strconv.ParseInt(fs.Arg(0), 10, 64)
	if perr != nil || id < 1 {
		return UsageError("sifen-override: document id %q: want a positive number", fs.Arg(0))
	}
	if strings.TrimSpace(*reason) == "" {
		return UsageError("sifen-override: --reason is required (it is recorded in the audit trail)")
	}
	if strings.TrimSpace(*actor) == "" {
		return UsageError("sifen-override: --actor is empty")
	}
	sc, err := sifenConfig(*cfg, cfg.SifenURL, UsageError(`sifen-override: no SIFEN URL configured (set --sifen-url or BALDE_SIFEN_URL; "official" for SIFEN's endpoints)`))
	if err != nil {
		return err
	}
	if err := requireDatabase(cfg.DB); err != nil {
		return err
	}
	eng, err := openEngine(ctx, *cfg, balde.Config{Clock: m.Clock, Sifen: sc})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()

	tr := m.printer()
	d, err := eng.Sifen().Get(ctx, id)
	if errors.Is(err, sifen.ErrNotFound) {
		return UsageError("sifen-override: no document %d", id)
	} else if err != nil {
		return err
	}
	if !*yes {
		report.WriteOverridePrompt(m.Stdout, tr, d, *actor)
		ok, err := report.Confirm(ctx, m.Stdin)
		if err != nil {
			fmt.Fprintln(m.Stdout)
			return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("sifen-override: cancelled: document %d unchanged", id)}
		}
		if !ok {
			return &ExitError{Code: ExitFailed, Err: fmt.Errorf("sifen-override: not confirmed: document %d unchanged", id)}
		}
	}
	o, err := eng.OverrideSifen(ctx, id, *actor, *reason)
	switch {
	case err != nil:
		return fmt.Errorf("sifen-override: %w", err)
	case !o.Done:
		return fmt.Errorf("sifen-override: %s", o.Refusal())
	}
	fmt.Fprintln(m.Stdout, tr.Sprintf("document %d: SIFEN answered %s (%s): a draft again, sendable now by the normal send (by %s)", id, o.Code, o.Message, *actor))
	return nil
}
