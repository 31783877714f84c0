package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/jobs"
	"github.com/balde-throttle/balde/internal/report"
)

// runDictLookup is "balde dict-lookup": it looks up Pix keys (getEntry)
// through the local mirror with dict.Batch: payers side by side, each
// payer's lines in order, results printed in input order. A lookup the
// mirror refuses is never sent: with --wait it sleeps exactly until the
// mirror would admit it and asks again (other payers go on meanwhile),
// with --no-wait it is reported and the run goes on.
func runDictLookup(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("dict-lookup",
		"dict-lookup [--payer CPF|CNPJ] [--wait|--no-wait] [--max-wait D] [--senders N] [--out FILE] [--format csv|json] [--json] [--db DSN] [--dict-url URL] FILE.csv",
		"BALDE_DICT_CERT=/etc/balde/dict-client.pem BALDE_DICT_KEY=/etc/balde/dict-client.key BALDE_DICT_CA=/etc/balde/rsfn-ca.pem BALDE_DICT_VERIFY_CERT=/etc/balde/dict-answers.pem balde dict-lookup --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url https://dict-ratelimit.pi.rsfn.net.br:16422 --dict-participant \"$ISPB\" --payer 11144477735 --out results.csv keys.csv", storeFlags, dictFlags, policyFlags)
	payer := fs.String("payer", "", "CPF or CNPJ of the payer, for lines that do not name one")
	var wf report.WaitFlags
	wf.Add(fs)
	senders := fs.Int("senders", dict.DefaultBatchSenders, "the most lookups in flight at once (payers go side by side; one payer's lines go in order)")
	outPath := fs.String("out", "", "write the results to FILE (CSV, or JSON with --format json or a .json name)")
	format := fs.String("format", "", "format of --out: csv or json (default: from the file name, else csv)")
	jsonOut := fs.Bool("json", false, "write one JSON object per key, then a summary object")
	if err := parse(args); err != nil {
		return err
	}
	wait, maxWait, err := waitOf(wf, "dict-lookup")
	if err != nil {
		return err
	}
	if *senders < 1 {
		return UsageError("dict-lookup: --senders %d: want 1 or more", *senders)
	}
	if fs.NArg() != 1 {
		return UsageError("dict-lookup: want exactly one FILE.csv (\"-\" for stdin), got %d arguments", fs.NArg())
	}
	if err := checkDict(*cfg, UsageError("dict-lookup: no DICT URL configured (set --dict-url or BALDE_DICT_URL)")); err != nil {
		return err
	}
	if *payer != "" {
		if err := dict.ValidatePayerID(*payer); err != nil {
			return UsageError("dict-lookup: --payer: %v", err)
		}
	}
	outJSON, err := dictlookup.LookupFileFormat(*format, *outPath)
	if err != nil {
		return UsageError("dict-lookup: --format %q: want csv or json", *format)
	}

	// The whole input is read and checked before anything is sent.
	reqs, err := readLookups(m, fs.Arg(0), *payer)
	if err != nil {
		return err
	}
	var out *dictlookup.LookupWriter
	if *outPath != "" {
		if out, err = dictlookup.CreateLookupFile(*outPath, outJSON); err != nil {
			return UsageError("dict-lookup: --out: %v", err)
		}
		defer func() { err = errors.Join(err, out.Close()) }()
	}

	clock := m.batchClock()
	dc := cfg.DictConfig(cfg.DictURL)
	eng, err := openEngine(ctx, *cfg, balde.Config{Clock: clock.Now, Dict: &dc})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()
	// A DICT that cannot be asked leaves the category recorded, else
	// --dict-category, else the strictest (H).
	if err := jobs.LearnCategory(ctx, eng.Dict(), eng.Logger()); err != nil {
		return err
	}

	mode := report.ChooseMode(m.Stdout, *jsonOut)
	rep := report.New(m.Stdout, mode, len(reqs), "dict-lookup", clock, m.printer())
	rep.Progress = wf.ProgressTo(m.Stderr, mode)
	lookup := &report.DictLookup{Reporter: rep, Wait: wait, MaxWait: maxWait, Out: out}
	batch := dict.Batch{Client: eng.Dict(), Wait: wait, MaxWait: maxWait, Senders: *senders, Sleep: clock.BaseSleep(), Progress: lookup.Progress}
	sum, err := lookup.Finish(ctx, len(reqs), batch.Run(ctx, reqs, lookup.Print))
	var oe *report.OutputError
	if errors.As(err, &oe) {
		return fmt.Errorf("dict-lookup: --out: %w", oe.Err)
	} else if err != nil {
		return err
	}
	return batchExit("dict-lookup", sum, rep.Tr)
}

// readLookups reads path ("-" is stdin) with dictlookup.ReadLookupRequests;
// the first bad line is a usage error naming it.
func readLookups(m *Main, path, defaultPayer string) ([]dict.LookupRequest, error) {
	var r io.Reader = m.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, UsageError("dict-lookup: %v", err)
		}
		defer f.Close()
		r = f
	}
	lines, err := dictlookup.ReadLookupRequests(r, defaultPayer)
	var bad *dictlookup.LineError
	switch {
	case errors.Is(err, dictlookup.ErrNoLookups):
		return nil, UsageError("dict-lookup: %s: no key to look up", path)
	case !errors.As(err, &bad): // not one line's: below
	case errors.Is(err, dictlookup.ErrLineTooLong):
		return nil, UsageError("dict-lookup: %s line %d: longer than %d bytes (a key and a payer take at most a few hundred)", path, bad.Line, dictlookup.MaxLookupLine)
	case errors.Is(err, dictlookup.ErrTooManyFields):
		return nil, UsageError("dict-lookup: %s line %d: %d fields, want key or key,payer", path, bad.Line, bad.Fields)
	case errors.Is(err, dictlookup.ErrNoPayer):
		return nil, UsageError("dict-lookup: %s line %d: no payer (add a payer column or --payer)", path, bad.Line)
	default:
		return nil, UsageError("dict-lookup: %s line %d: %v", path, bad.Line, bad.Err)
	}
	if err != nil {
		return nil, UsageError("dict-lookup: %s: %v", path, err)
	}
	reqs := make([]dict.LookupRequest, len(lines))
	for i, l := range lines {
		reqs[i] = l.LookupRequest
	}
	return reqs, nil
}
