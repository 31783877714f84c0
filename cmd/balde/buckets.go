package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/web"
)

// runBuckets is "balde buckets list|show|reset|shadow": the admin page's
// data in the terminal, its reset button and its shadow mode switch.
func runBuckets(ctx context.Context, m *Main, args []string) (err error) {
	// Of the DICT's settings, those that shape its buckets' keys and
	// capacities, not its URLs.
	cfg, fs, parse := m.newCommand("buckets",
		"buckets list|show|reset|shadow [--policy P] [--env E] [--id ID] [--severity S] [--state S] [--sort BY] [-o table|wide|json] [--watch D] [--limit N] [--after CURSOR] [--yes] [--actor NAME] [--reason WHY] [POLICY/ENV/ID | POLICY on|off]",
		"balde buckets list --severity critical --sort severity\n"+
			"  balde buckets list --policy ENTRIES_READ_USER_ANTISCAN --id 111 --limit 20 -o wide\n"+
			"  balde buckets show SIFEN_RECEPCION_LOTE/test/80069563\n"+
			"  balde buckets reset --yes --actor alice --reason key-fixed ENTRIES_READ_PARTICIPANT_ANTISCAN/prod/12345678\n"+
			"  balde buckets shadow --actor alice --reason new-limit-watched INBOUND_IP on", storeFlags, []string{"dict-participant", "dict-category", "dict-env"}, policyFlags)
	policy := fs.String("policy", "", "policy name (list: a filter; show, reset: part of the key)")
	env := fs.String("env", "", "env: prod, test, ... (list: a filter; show, reset: part of the key)")
	id := fs.String("id", "", "identifier (list: a prefix; show, reset: exact)")
	limit := fs.Int("limit", 0, "list: buckets per page (default 50, at most 1000); show: ledger rows (default 20)")
	after := fs.String("after", "", "list: the cursor printed at the end of the previous page")
	jsonOut := fs.Bool("json", false, "write JSON instead of a table (the same as -o json; the field names of /api/buckets)")
	output := fs.String("o", "table", "list: output format: table (fits 100 columns), wide (every column) or json")
	severity := fs.String("severity", "", "list: only buckets at this severity now: healthy, medium, high or critical")
	state := fs.String("state", "", "list: only buckets blocked, cooling (down) or negative now")
	sortBy := fs.String("sort", "key", "list: key, severity (worst first), last_send (newest first) or tokens (emptiest first)")
	watch := fs.Duration("watch", 0, "list: redraw every D (e.g. 2s) until Ctrl-C")
	yes := fs.Bool("yes", false, "reset: do not ask for confirmation")
	// The default is said once, in the help: its value depends on $USER.
	actor := fs.String("actor", "", "reset, shadow: who acts, recorded in the ledger and the audit trail (default $USER@hostname, or \"cli\" without $USER)")
	reason := fs.String("reason", "", "reset, shadow: why (required), recorded in the audit trail with cli:ACTOR")

	// Flags may come before or after the action and the key
	// ("buckets list --policy X", "buckets --policy X list").
	if err := parse(args); err != nil {
		return err
	}
	if !flagGiven(fs, "actor") {
		*actor = settings.DefaultActor(m.Getenv)
	}
	action, rest := fs.Arg(0), fs.Args()[min(1, fs.NArg()):]
	switch action {
	case "list", "show", "reset":
	case "shadow":
		if len(rest) != 2 || (rest[1] != "on" && rest[1] != "off") {
			return UsageError("buckets shadow: want POLICY on or POLICY off")
		}
		if strings.TrimSpace(*reason) == "" {
			return UsageError("buckets shadow: --reason is required (it is recorded in the audit trail)")
		}
		if strings.TrimSpace(*actor) == "" {
			return UsageError("buckets shadow: --actor is empty")
		}
	case "":
		return UsageError("buckets: want an action: list, show, reset or shadow")
	default:
		return UsageError("buckets: unknown action %q (want list, show, reset or shadow)", action)
	}
	if *limit < 0 || *limit > inspect.MaxPageSize {
		return UsageError("buckets: --limit %d: want 1..%d", *limit, inspect.MaxPageSize)
	}
	if *jsonOut {
		*output = "json"
	}
	if *output != "table" && *output != "wide" && *output != "json" {
		return UsageError("buckets: -o %q: want table, wide or json", *output)
	}
	var filter inspect.Filter
	if *severity != "" {
		sev, err := throttle.ParseSeverity(*severity)
		if err != nil {
			return UsageError("buckets: --severity %q: want healthy, medium, high or critical", *severity)
		}
		filter.Severity = sev
	}
	cond, err := inspect.ParseCondition(*state)
	if err != nil {
		return UsageError("buckets: --state %q: want blocked, cooling or negative", *state)
	}
	filter.Condition = cond
	order, err := inspect.ParseSortBy(*sortBy)
	if err != nil {
		return UsageError("buckets: --sort %q: want key, severity, last_send or tokens", *sortBy)
	}
	if *watch < 0 || (*watch > 0 && *watch < 100*time.Millisecond) {
		return UsageError("buckets: --watch %s: want at least 100ms", *watch)
	}
	eng, err := openAdminEngine(ctx, *cfg, m.Clock)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, eng.Close(ctx)) }()
	b := bucketsCmd{m: m, eng: eng, out: report.Buckets{W: m.Stdout, Tr: m.printerIn(cfg), JSON: *output == "json", Wide: *output == "wide",
		Scope: web.Scopes(eng.DictCatalog())}}

	if action == "shadow" {
		return b.shadow(ctx, rest[0], rest[1] == "on", *actor, *reason)
	}
	if action == "list" {
		if len(rest) > 0 {
			return UsageError("buckets list: unexpected arguments %q (filters are --policy, --env, --id)", rest)
		}
		cursor, err := inspect.DecodeCursor(*after)
		if err != nil {
			return UsageError("buckets list: --after: %v", err)
		}
		if *policy != "" && !slices.Contains(b.eng.PolicyNames(), *policy) {
			return UsageError("buckets list: unknown policy %q (known: %s)", *policy, strings.Join(b.eng.PolicyNames(), ", "))
		}
		filter.Policy, filter.Env, filter.IdentifierPrefix = *policy, *env, *id
		filter.After, filter.Limit = cursor, *limit
		// One page of stored buckets, refilled to now.
		list := func() error {
			page, err := eng.Reader().ListBy(ctx, filter, order)
			if err != nil {
				return err
			}
			return b.out.List(page)
		}
		if *watch > 0 { // redrawn every period until Ctrl-C: exit 0
			return report.Watch(ctx, m.Stdout, b.out.Tr, m.batchClock(), *watch, list)
		}
		return list()
	}
	key, err := bucketKey(action, rest, *policy, *env, *id)
	if err != nil {
		return err
	}
	if _, err := eng.Limiter().Policy(key); err != nil {
		return UsageError("buckets %s: %s: %v", action, key, err)
	}
	if action == "show" {
		return b.show(ctx, key, *limit)
	}
	if strings.TrimSpace(*actor) == "" {
		return UsageError("buckets reset: --actor is empty")
	}
	return b.reset(ctx, key, *actor, *reason, *yes)
}

// requireDatabase refuses a DSN that does not parse or a SQLite file that
// does not exist (settings.CheckDatabase): the operator commands that read or
// fix state (buckets, prune) do not create an empty database.
func requireDatabase(dsn string) error {
	err := settings.CheckDatabase(dsn)
	if errors.Is(err, settings.ErrNoDatabase) {
		path, _ := settings.SQLiteFile(dsn)
		return UsageError("no database at %s (give --db or BALDE_DB; balde migrate up creates one)", path)
	}
	if err != nil {
		return UsageError("%v", err)
	}
	return nil
}

// openAdminEngine opens the engine of an existing database
// (requireDatabase) with every policy serve knows — the inbound limiter's
// too (BALDE_INBOUND_TOKENS_FILE read), so its buckets are not shown as
// orphans — and the DICT category a reconciliation recorded; clock nil is
// the system clock. Its inbound limiter decides nothing.
func openAdminEngine(ctx context.Context, cfg settings.Settings, clock throttle.Clock) (*balde.Engine, error) {
	if err := requireDatabase(cfg.DB); err != nil {
		return nil, err
	}
	ic, err := cfg.InboundConfig()
	if err != nil {
		return nil, settingUsage(err)
	}
	eng, err := openEngine(ctx, cfg, balde.Config{Inbound: ic, Clock: clock})
	if err != nil {
		return nil, err
	}
	if err := eng.RestoreDictCategory(ctx, cfg.DictParticipant); err != nil {
		return nil, errors.Join(err, eng.Close(ctx))
	}
	return eng, nil
}

// bucketKey reads the key of show and reset: POLICY/ENV/IDENTIFIER as the
// argument, or --policy, --env and --id.
func bucketKey(action string, rest []string, policy, env, id string) (throttle.Key, error) {
	switch {
	case len(rest) == 1 && policy == "" && env == "" && id == "":
		k, err := inspect.ParseKey(rest[0])
		if errors.Is(err, inspect.ErrKeyForm) {
			return k, UsageError("buckets %s: %q is not POLICY/ENV/IDENTIFIER", action, rest[0])
		}
		return k, keyUsage(action, err)
	case len(rest) == 0:
		k := throttle.Key{Policy: policy, Env: env, Identifier: id}
		return k, keyUsage(action, k.Validate())
	}
	return throttle.Key{}, UsageError("buckets %s: give the key once: POLICY/ENV/IDENTIFIER, or --policy, --env and --id", action)
}

// keyUsage is a key's validation error as a usage error (nil: nil).
func keyUsage(action string, err error) error {
	if err != nil {
		return UsageError("buckets %s: want a key POLICY/ENV/IDENTIFIER (or --policy, --env and --id): %v", action, err)
	}
	return nil
}

// bucketsCmd runs one buckets action, printing with out.
type bucketsCmd struct {
	m   *Main
	eng *balde.Engine
	out report.Buckets
}

// show prints one bucket (a key with no row is a full bucket) and its most
// recent ledger rows.
func (b bucketsCmd) show(ctx context.Context, key throttle.Key, limit int) error {
	st, err := b.eng.Limiter().State(ctx, key)
	if err != nil {
		return err
	}
	limit = cmp.Or(limit, 20)
	entries, err := b.eng.Reader().Ledger(ctx, inspect.LedgerQuery{Key: &key, Limit: limit})
	if err != nil {
		return err
	}
	return b.out.Show(st, entries, limit)
}

// reset fills a stored bucket and clears its cooldown and block
// (balde.Engine.ResetBucket), after a confirmation read from stdin unless
// yes; it is recorded in the audit trail as cli:ACTOR with the reason.
func (b bucketsCmd) reset(ctx context.Context, key throttle.Key, actor, reason string, yes bool) error {
	st, err := b.eng.CheckReset(ctx, key, reason)
	switch {
	case errors.Is(err, balde.ErrNotStored):
		return UsageError("buckets reset: no stored bucket %s (a key with no row is already full)", key)
	case errors.Is(err, balde.ErrNoReason):
		return UsageError("buckets reset: --reason is required (it is recorded in the audit trail)")
	case err != nil:
		return err
	}
	if !yes {
		b.out.Bucket(st)
		fmt.Fprint(b.m.Stdout, b.out.Tr.Sprintf("Reset %s to %s tokens and clear its cooldown and block, as %s? [y/N] ", key, strconv.FormatInt(st.Policy.Capacity, 10), strconv.Quote(actor)))
		ok, err := report.Confirm(ctx, b.m.Stdin)
		if err != nil {
			fmt.Fprintln(b.m.Stdout)
			return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("buckets reset: reset cancelled: %s unchanged", key)}
		}
		if !ok {
			fmt.Fprintln(b.m.Stdout)
			return &ExitError{Code: ExitFailed, Err: fmt.Errorf("buckets reset: not confirmed: %s unchanged", key)}
		}
	}
	r, err := b.eng.ResetBucket(ctx, key, actor, reason)
	if errors.Is(err, balde.ErrResetNotAudited) {
		return fmt.Errorf("buckets reset: %w", err)
	} else if err != nil {
		return err
	}
	b.out.Reset(key, r, actor)
	return nil
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) (given bool) {
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
