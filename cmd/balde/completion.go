package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/balde-throttle/balde/sifen"
)

// runCompletion is "balde completion bash|zsh": a completion script for
// the shell. It completes command names, then each command's flags and
// actions, asking balde itself ("balde __complete COMMAND"), so the
// completions never drift from the flags.
func runCompletion(_ context.Context, m *Main, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(m.Stdout, "Usage: balde completion bash|zsh\n\nExample:\n  source <(balde completion bash)\n")
		return nil
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		return UsageError("completion: want bash or zsh (e.g. source <(balde completion bash))")
	}
	if args[0] == "zsh" {
		fmt.Fprintln(m.Stdout, "autoload -U +X bashcompinit && bashcompinit")
	}
	fmt.Fprint(m.Stdout, completionScript)
	return nil
}

// completionScript is the bash completion: it asks "balde __complete"
// for the words, and completes file names where it answers completeFiles.
//
//go:embed completion.bash
var completionScript string

// actions are the first arguments a command takes.
var actions = map[string][]string{
	"buckets":    {"list", "show", "reset", "shadow"},
	"migrate":    {"up", "down", "version"},
	"completion": {"bash", "zsh"},
	"gateway":    {"dict", "sifen"},
}

// flagValues are the values of the flags that take one of a few words.
var flagValues = map[string]map[string][]string{
	"buckets": {
		"sort":     {"key", "severity", "last_send", "tokens"},
		"severity": {"healthy", "medium", "high", "critical"},
		"state":    {"blocked", "cooling", "negative"},
		"o":        {"table", "wide", "json"},
	},
	"sifen-send": {"env": {string(sifen.EnvTest), string(sifen.EnvProd)}},
}

// completeFiles is what "__complete COMMAND next PREV" prints when file
// names are the completions (a file argument, a flag taking a path);
// completion.bash looks for this word.
const completeFiles = "__files__"

// flagLine is one flag of a --help: its name and, unless it is a boolean
// flag, the kind of its value ("  -sort string").
var flagLine = regexp.MustCompile(`(?m)^\s+-(\w[\w-]*)( \w+)?`)

// runComplete is the hidden "balde __complete [COMMAND [flags|next PREV]]":
// the command names, a command's actions, its flags (read from its --help),
// or what may follow the word PREV: a flag's values (buckets --sort: key,
// severity, ...), the command's actions after the command itself, nothing
// after an action or where a key is expected, and file names (printed as
// completeFiles) for a flag taking a path and the file arguments of the
// commands without actions.
func runComplete(ctx context.Context, m *Main, args []string) error {
	var words []string
	switch {
	case len(args) == 0:
		for _, c := range commands() {
			if !strings.HasPrefix(c.Name, "__") {
				words = append(words, c.Name)
			}
		}
		slices.Sort(words)
	case len(args) == 1:
		words = actions[args[0]]
	case args[1] == "next" && len(args) == 3:
		words = completeNext(ctx, args[0], args[2])
	default:
		for name := range commandFlags(ctx, args[0]) {
			words = append(words, "--"+name)
		}
		slices.Sort(words)
	}
	fmt.Fprintln(m.Stdout, strings.Join(words, " "))
	return nil
}

// completeNext is what may follow the word prev on command's line.
func completeNext(ctx context.Context, command, prev string) []string {
	if strings.HasPrefix(prev, "-") {
		name := strings.TrimLeft(prev, "-")
		if vs, ok := flagValues[command][name]; ok {
			return vs
		}
		if takesValue, known := commandFlags(ctx, command)[name]; known && takesValue {
			return []string{completeFiles} // --db, --policies, --output: a path, often
		}
	}
	if as, ok := actions[command]; ok {
		if prev == command {
			return as
		}
		return nil // after the action: a key or a version, not a file
	}
	return []string{completeFiles}
}

// commandFlags reads command's flags from its --help: name → whether it
// takes a value.
func commandFlags(ctx context.Context, command string) map[string]bool {
	flags := map[string]bool{}
	i := slices.IndexFunc(commands(), func(c Command) bool { return c.Name == command })
	if i < 0 || strings.HasPrefix(command, "__") || command == "completion" {
		return flags
	}
	var help bytes.Buffer
	_ = commands()[i].Run(ctx, NewMain(strings.NewReader(""), &help, &bytes.Buffer{}, func(string) string { return "" }), []string{"--help"})
	for _, f := range flagLine.FindAllStringSubmatch(help.String(), -1) {
		flags[f[1]] = f[2] != ""
	}
	return flags
}
