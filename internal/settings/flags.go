package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AddFlags registers on fs the flags named ("db", "dict-url", ...), each
// accepting what its variable does, its current value the default: call it
// after ParseEnv. A name FlagNames does not list panics.
func (s *Settings) AddFlags(fs *flag.FlagSet, names ...string) {
	all := s.settings()
	for _, n := range names {
		i := slices.IndexFunc(all, func(v setting) bool { return v.flag == n })
		if n == "" || i < 0 {
			panic(fmt.Sprintf("settings: no setting flag %q", n))
		}
		all[i].add(fs, n, all[i].help)
	}
}

// FlagNames lists the names AddFlags knows, sorted.
func FlagNames() []string {
	var names []string
	for _, v := range new(Settings).settings() {
		if v.flag != "" {
			names = append(names, v.flag)
		}
	}
	slices.Sort(names)
	return names
}

// FlagOf is a flag.Value read with parse (an error leaves it unchanged)
// and shown in --help with format (nil: fmt.Sprint).
func FlagOf[T any](v *T, parse func(string) (T, error), format func(T) string) flag.Value {
	if format == nil {
		format = func(t T) string { return fmt.Sprint(t) }
	}
	return parsedFlag[T]{v, parse, format}
}

type parsedFlag[T any] struct {
	v      *T
	parse  func(string) (T, error)
	format func(T) string
}

// String is the value in its format; "" for PrintDefaults' zero value.
func (f parsedFlag[T]) String() string {
	if f.v == nil {
		return ""
	}
	return f.format(*f.v)
}

func (f parsedFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.v = v
	return nil
}

// Formats of the flags' defaults: seconds, a period ("off" for 0), the
// reconciliation's "auto".
func formatSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

func formatPeriod(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return d.String()
}

func formatReconcile(d time.Duration) string {
	if d == ReconcileAuto {
		return "auto"
	}
	return formatPeriod(d)
}

// formatProxies writes prefixes as BALDE_TRUSTED_PROXIES takes them.
func formatProxies(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// ParseDuration reads a Go duration that is not negative ("1m").
func ParseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 1m)", s)
	}
	return v, nil
}

// ParseFlags parses args with fs, flags before, between or after the
// positional arguments, which fs.Args() then holds in order; "--" ends the
// flags. The usage is printed only for -h or --help (flag.ErrHelp).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	restore := func() {
		fs.Usage = usage
		fs.SetOutput(out)
	}
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer restore()
	var pos []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			restore() // the usage prints the flags to the real output
			usage()
			return err
		case err != nil:
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...) // after "--": arguments only
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	// Parsing "--" first leaves the arguments in fs.Args().
	_ = fs.Parse(append([]string{"--"}, pos...))
	return nil
}

// ParseTrustedProxies reads comma- or space-separated CIDR prefixes or
// addresses ("10.0.0.0/8, 127.0.0.1, ::1").
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("web: trusted proxy %q: %w", f, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("web: trusted proxy %q is neither an address nor a CIDR prefix", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
