package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/report"
)

// runDictReconcile is "balde dict-reconcile": one reconciliation of the
// local DICT buckets with the DICT's GET /api/v2/policies/.
func runDictReconcile(ctx context.Context, m *Main, args []string) (err error) {
	cfg, fs, parse := m.newCommand("dict-reconcile", "dict-reconcile [--db DSN] [--dict-url URL] [--dict-participant ISPB] [--dict-category C] [--dict-env ENV] [--policies FILE]",
		"BALDE_DICT_CERT=/etc/balde/dict-client.pem BALDE_DICT_KEY=/etc/balde/dict-client.key BALDE_DICT_CA=/etc/balde/rsfn-ca.pem BALDE_DICT_VERIFY_CERT=/etc/balde/dict-answers.pem balde dict-reconcile --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url https://dict-ratelimit.pi.rsfn.net.br:16422 --dict-participant \"$ISPB\" --db postgres://balde@127.0.0.1:5432/balde", storeFlags, dictFlags, policyFlags)
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return UsageError("dict-reconcile: unexpected arguments %q", fs.Args())
	}
	if err := checkDict(*cfg, UsageError("dict-reconcile: no DICT URL configured (set --dict-url or BALDE_DICT_URL)")); err != nil {
		return err
	}
	dc := cfg.DictConfig(cfg.DictURL)
	dc.LearnCategory = false // the reconciliation asks the DICT itself
	eng, err := openEngine(ctx, *cfg, balde.Config{Dict: &dc})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()
	res, err := eng.Dict().Reconcile(ctx)
	if err != nil {
		return err
	}
	if !res.Decision.Allowed {
		// Refused by the mirror, a value (decision 0065): nothing was sent.
		d := res.Decision
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("dict-reconcile: dict %s refused locally: %s %s, retry after %s",
			dict.OpListBucketStates, d.Key, d.Reason, d.RetryAfter)}
	}
	_, err = report.WriteReconcile(m.Stdout, res)
	return err
}
