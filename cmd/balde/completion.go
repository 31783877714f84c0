package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// runCompletion is "balde completion bash|zsh": a completion script for
// the shell. It completes command names, then each command's flags and
// actions, asking balde itself ("balde __complete COMMAND"), so the
// completions never drift from the flags.
func runCompletion(_ context.Context, m *Main, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(m.Stderr, "Usage: balde completion bash|zsh\n\nExample:\n  source <(balde completion bash)\n")
		return nil
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		return UsageError("completion: want bash or zsh (e.g. source <(balde completion bash))")
	}
	if args[0] == "zsh" {
		fmt.Fprintln(m.Stdout, "autoload -U +X bashcompinit && bashcompinit")
	}
	fmt.Fprint(m.Stdout, `_balde() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "$(balde __complete)" -- "$cur"))
    return
  fi
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$(balde __complete "${COMP_WORDS[1]}" flags)" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$(balde __complete "${COMP_WORDS[1]}")" -- "$cur") $(compgen -f -- "$cur")) ;;
  esac
}
complete -F _balde balde
`)
	return nil
}

// actions are the first arguments a command takes.
var actions = map[string][]string{
	"buckets":    {"list", "show", "reset"},
	"migrate":    {"up", "down", "version"},
	"completion": {"bash", "zsh"},
}

var flagLine = regexp.MustCompile(`(?m)^\s+-(\w[\w-]*)`)

// runComplete is the hidden "balde __complete [COMMAND [flags]]": the
// command names, a command's actions, or its flags (read from its --help).
func runComplete(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 {
		var names []string
		for _, c := range commands() {
			if !strings.HasPrefix(c.Name, "__") {
				names = append(names, c.Name)
			}
		}
		slices.Sort(names)
		fmt.Fprintln(m.Stdout, strings.Join(names, " "))
		return nil
	}
	if len(args) == 1 {
		fmt.Fprintln(m.Stdout, strings.Join(actions[args[0]], " "))
		return nil
	}
	for _, c := range commands() {
		if c.Name != args[0] || strings.HasPrefix(c.Name, "__") || c.Name == "completion" {
			continue
		}
		var help bytes.Buffer
		sub := &Main{Stdin: m.Stdin, Stdout: &bytes.Buffer{}, Stderr: &help, Getenv: func(string) string { return "" }}
		_ = c.Run(ctx, sub, []string{"--help"})
		var flags []string
		for _, f := range flagLine.FindAllStringSubmatch(help.String(), -1) {
			flags = append(flags, "--"+f[1])
		}
		fmt.Fprintln(m.Stdout, strings.Join(flags, " "))
	}
	return nil
}
