package main

import (
	"context"
	"errors"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen"
)

// runSifenSend is "balde sifen-send": it imports DE and lot XML files as
// documents and sends them (report.SifenSend) by the send path, throttle
// and documents table of serve's "Send all drafts", printing one result
// per document. A rerun, or a run after a crash, never sends a document
// twice. With --follow it then fetches the results of every lot of the
// database still "sent", as serve's poller does; with no FILE it only
// does that.
func runSifenSend(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("sifen-send",
		"sifen-send [--env test|prod] [--db DSN] [--sifen-url URL] [--wait|--no-wait] [--max-wait D] [--follow] [--replace] [--allow-unsigned] [--json] FILE|DIR...\n       balde sifen-send --follow [--db DSN] [--sifen-url URL] [--json]",
		"balde sifen-send --env test --sifen-url official --db sqlite://balde.db invoices/2026-01/ extra/lote-17.xml\n  balde sifen-send --follow --sifen-url official --db sqlite://balde.db", storeFlags, sifenFlags)
	envName := fs.String("env", string(sifen.EnvTest), "SIFEN environment: test or prod")
	var wf report.WaitFlags
	wf.Add(fs)
	jsonOut := fs.Bool("json", false, "write one JSON object per document, then a summary object")
	allowUnsigned := fs.Bool("allow-unsigned", false, "accept DEs without a signature (test environment only; SIFEN rejects them)")
	replace := fs.Bool("replace", false, "a draft or error of the database holding a FILE's CDC with other content takes the FILE's content (without it, that DE is reported invalid and not sent)")
	follow := fs.Bool("follow", false, "after sending, query the result of every lot of the database still sent, this run's and earlier ones' (siConsLoteDE, each lot when due: 10 min after its send, then every interval), until each document is approved or rejected; with no FILE, only that")
	if err := parse(args); err != nil {
		return err
	}
	env, err := sifen.ParseEnv(*envName)
	if err != nil {
		return UsageError("sifen-send: --env %q: want test or prod", *envName)
	}
	if *allowUnsigned && env != sifen.EnvTest {
		return UsageError("sifen-send: --allow-unsigned is for the test environment only")
	}
	wait, maxWait, err := waitOf(wf, "sifen-send")
	if err != nil {
		return err
	}
	if fs.NArg() == 0 && !*follow {
		return UsageError("sifen-send: no FILE or DIR to send, and no --follow (see balde sifen-send --help)")
	}
	sc, err := sifenConfig(*cfg, cfg.SifenURL, UsageError(`sifen-send: no SIFEN URL configured (set --sifen-url or BALDE_SIFEN_URL; "official" for SIFEN's endpoints)`))
	if err != nil {
		return err
	}
	sc.AllowUnsigned = *allowUnsigned

	// Every file is read and parsed before anything is stored or sent:
	// bad input changes nothing.
	files, err := sifen.XMLFiles(fs.Args())
	if err != nil {
		return UsageError("sifen-send: %v", err)
	}
	clock := m.batchClock()
	mode := report.ChooseMode(m.Stdout, *jsonOut)
	items, bad := report.ReadSifenFiles(ctx, files, env, *allowUnsigned)
	if len(bad) > 0 {
		report.New(m.Stdout, mode, len(items), "sifen-send", clock, m.printer()).Invalid(bad, len(items))
		return UsageError("sifen-send: %d invalid document(s), nothing sent: %s", len(bad), bad[0].Message)
	}

	eng, err := openEngine(ctx, *cfg, balde.Config{Clock: clock.Now, Sifen: sc})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()
	b := &report.SifenSend{
		Sender: eng.Sifen(), Env: env, Wait: wait, MaxWait: maxWait, Clock: clock, Replace: *replace,
		Reporter: report.New(m.Stdout, mode, len(items), "sifen-send", clock, m.printer()), Warn: m.Stderr,
	}
	b.Reporter.Progress = wf.ProgressTo(m.Stderr, mode)
	sum, err := b.Run(ctx, items)
	if err != nil {
		return err
	}
	if *follow && ctx.Err() == nil { // after Ctrl-C the summary says what was done; nothing is followed
		if err := b.Follow(ctx, items); err != nil {
			return err // an interrupted follow too: exit 1
		}
	}
	return batchExit("sifen-send", sum, b.Reporter.Tr)
}
