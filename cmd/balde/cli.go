package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/throttle"
)

// Exit codes of every command.
const (
	ExitOK          = 0 // everything done
	ExitFailed      = 1 // some items failed (or an unexpected error)
	ExitUsage       = 2 // bad usage or input: one line on stderr, nothing done
	ExitUnavailable = 3 // the store (database) is unavailable
	// ExitInterrupted: Ctrl-C at a confirmation prompt (128 + SIGINT, as
	// shells report it); nothing was changed.
	ExitInterrupted = 130
)

// Main holds what every command needs from the process: its streams, its
// environment and its time. Tests build one with their own buffers and
// getenv, and set Clock and Sleep to run the batch commands on a fake
// clock.
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string

	// Clock is the engine's time (the store's, and so the limiter's and
	// the SIFEN sender's) in sifen-send, dict-lookup, buckets and prune,
	// and the time of the batch commands' reports. Nil is the system clock.
	Clock throttle.Clock
	// Sleep is how sifen-send and dict-lookup wait the RetryAfter the
	// limiter computed against Clock: it waits d, or less when ctx ends
	// first (it then returns ctx.Err()). Nil is a real wait.
	Sleep func(ctx context.Context, d time.Duration) error
}

// printer is the language of the operator commands' messages, from
// LC_ALL, LC_MESSAGES or LANG (English when none names pt_BR or es_PY),
// with times in the local zone next to UTC.
func (m *Main) printer() *i18n.Printer {
	return i18n.FromLocale(cmp.Or(m.Getenv("LC_ALL"), m.Getenv("LC_MESSAGES"), m.Getenv("LANG")), time.Local)
}

// printerIn is printer with times in cfg's BALDE_TIME_ZONE, when set.
func (m *Main) printerIn(cfg *settings.Settings) *i18n.Printer {
	tr := m.printer()
	tr.Zone = cmp.Or(cfg.TimeZone, tr.Zone)
	return tr
}

// NewMain returns a Main over the given streams and environment.
func NewMain(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *Main {
	return &Main{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv}
}

// Command is one subcommand of balde.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, m *Main, args []string) error
}

// commands lists every subcommand; each lives in a file of its own.
func commands() []Command {
	return []Command{
		{"migrate", "apply or revert database migrations (up|down|version)", runMigrate},
		{"dict-reconcile", "lower local DICT buckets to the DICT's GET /policies/ state", runDictReconcile},
		{"serve", "run the web app: admin pages, /api, /metrics, /healthz", runServe},
		{"gateway", "run a throttled proxy in front of the DICT for clients in any language (gateway dict)", runGateway},
		{"sifen-override", "ask SIFEN about a document left sending; on 0420 make it sendable again (audited)", runSifenOverride},
		{"sifen-send", "send DE and lot XML files to SIFEN through the throttle", runSifenSend},
		{"dict-lookup", "look up Pix keys from a CSV through the throttle", runDictLookup},
		{"buckets", "list, show or reset buckets, switch a policy's shadow mode (the admin page in the terminal)", runBuckets},
		{"prune", "remove old ledger rows, idle buckets and old DICT lookups", runPrune},
		{"whatif", "replay a period's decisions under another DICT category, capacity or SIFEN interval", runWhatif},
		{"version", "print the version", runVersion},
		{"completion", "print a shell completion script (bash|zsh): source <(balde completion bash)", runCompletion},
		{"__complete", "", runComplete},
	}
}

// runVersion is "balde version": it prints the version.
func runVersion(_ context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("version", "version", "balde version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError("version: unexpected arguments %q", fs.Args())
	}
	fmt.Fprintln(m.Stdout, "balde", Version)
	return nil
}

// Run dispatches args[0] to its command and returns the process exit code.
// Errors print one line on stderr.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		m.usage(m.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.Name == args[0] {
			return m.exit(c.Run(ctx, m, args[1:]))
		}
	}
	fmt.Fprintln(m.Stderr, "balde:", m.printer().Sprintf("unknown command %q (run \"balde help\")", args[0]))
	return ExitUsage
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprintln(w, "balde is a SQL-backed throttle for DICT (Pix) and SIFEN senders.")
	fmt.Fprintln(w, "\nUsage: balde COMMAND [flags] [arguments]\n\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	for _, c := range cs {
		if c.Summary != "" { // hidden: __complete
			fmt.Fprintf(w, "  %-15s %s\n", c.Name, c.Summary)
		}
	}
	fmt.Fprintln(w, "\nRun \"balde COMMAND --help\" for a command's flags and an example.")
}

// exit turns a command's error into an exit code and one line on stderr,
// in the language of LANG when the command's message is in the catalog
// (internal/i18n); the words quoted from elsewhere (a flag parser's, a
// database's) stay as they were.
func (m *Main) exit(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	msg, code := err.Error(), ExitFailed
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		msg, code = ee.Err.Error(), ee.Code
		if tr := m.printer(); ee.format != "" && i18n.Has(ee.format) && tr.Tag != i18n.English {
			msg = tr.Sprintf(ee.format, ee.args...)
		}
	case errors.Is(err, throttle.ErrStoreUnavailable):
		code = ExitUnavailable
	}
	fmt.Fprintln(m.Stderr, "balde:", report.OneLine(msg))
	return code
}

// ExitError carries an exit code chosen by a command and its message
// (Err, not nil).
type ExitError struct {
	Code int
	Err  error

	// format and args are the English message, for its translation.
	format string
	args   []any
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is bad usage or input: exit 2 with the message.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...), format: format, args: args}
}

// newFlagSet returns a FlagSet that reports errors instead of exiting and
// prints usage (with the command's example) to its output: m.Stdout, since
// the usage is printed only when asked for with -h or --help (exit 0), so
// that "balde X --help | less" works. A command printing it with an error
// sets the output to m.Stderr first.
func (m *Main) newFlagSet(name, synopsis, example string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stdout)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: balde %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		if example != "" {
			fmt.Fprintf(w, "\nExample:\n  %s\n", example)
		}
	}
	return fs
}

// parseFlags parses args as settings.ParseFlags does (flags before,
// between or after the positional arguments, "--" ending the flags;
// fs.Args() the positional arguments in order). A parse error becomes a
// usage error of one line naming the flag and pointing at --help; the
// usage text is printed only when asked for with -h or --help.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := settings.ParseFlags(fs, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return UsageError("%s: %v (see balde %s --help)", fs.Name(), err, fs.Name())
	}
	return err
}
