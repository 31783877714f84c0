package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// AddFlags registers on fs the flags named ("db", "dict-url", ...), each
// accepting what its variable does, its current value the default: call it
// after FromEnv or ParseEnv. A name FlagNames does not list panics.
func (s *Settings) AddFlags(fs *flag.FlagSet, names ...string) {
	for _, n := range names {
		add, ok := settingFlags[n]
		if !ok {
			panic(fmt.Sprintf("settings: no setting flag %q", n))
		}
		add(s, fs, n)
	}
}

// FlagNames lists the names AddFlags knows, sorted.
func FlagNames() []string { return slices.Sorted(maps.Keys(settingFlags)) }

// settingFlags register each setting's flag, by name: its field, its
// parser and format, its help naming the variable.
var settingFlags = map[string]func(s *Settings, fs *flag.FlagSet, name string){
	"db": stringFlag(func(s *Settings) *string { return &s.DB }, "database DSN: sqlite://FILE, a file path, or postgres://... (env BALDE_DB); "+
		"a SQLite file is integrity-checked at open and, by serve's /readyz, every "+formatPeriod(sqlstore.DefaultIntegrityEvery)),
	"dict-url":               stringFlag(func(s *Settings) *string { return &s.DictURL }, "DICT base URL (env BALDE_DICT_URL)"),
	"dict-policies-url":      stringFlag(func(s *Settings) *string { return &s.DictPoliciesURL }, "base URL of the DICT's GET /policies/, on its own host (default: derived from --dict-url as the DICT's spec names it, dict… → dict-ratelimit…; required for another host) (env BALDE_DICT_POLICIES_URL)"),
	"dict-participant":       stringFlag(func(s *Settings) *string { return &s.DictParticipant }, "this participant's ISPB, 8 digits; required against a DICT that is not a simulator (env BALDE_DICT_PARTICIPANT)"),
	"dict-unverified":        boolFlag(func(s *Settings) *bool { return &s.DictUnverified }, "run against a DICT without BALDE_DICT_VERIFY_CERT: its answers are not verified (logged, balde_dict_answers_unverified 1) (env BALDE_DICT_UNVERIFIED=on)"),
	"dict-sign-with-tls-key": boolFlag(func(s *Settings) *bool { return &s.DictSignWithTLSKey }, "sign DICT writes with the mutual-TLS pair BALDE_DICT_CERT/BALDE_DICT_KEY when BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY are unset (env BALDE_DICT_SIGN_WITH_TLS_KEY=on)"),
	"dict-category":          stringFlag(func(s *Settings) *string { return &s.DictCategory }, "participant category A..H until learned from the DICT's GET /policies/ (default: the strictest, H) (env BALDE_DICT_CATEGORY)"),
	"dict-env":               stringFlag(func(s *Settings) *string { return &s.DictEnv }, "env part of DICT bucket keys (env BALDE_DICT_ENV)"),
	"sifen-url":              stringFlag(func(s *Settings) *string { return &s.SifenURL }, `SIFEN base URL, "{env}" standing for test or prod, or "official" for SIFEN's endpoints (env BALDE_SIFEN_URL)`),
	"sifen-throttle":         valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.SifenThrottle, ParseInterval, formatSeconds) }, "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)"),
	"sifen-throttle-prod":    valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.SifenThrottleProd, ParseInterval, formatSeconds) }, "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)"),
	"sifen-block-step":       valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.SifenBlockStep, ParseSifenBlockStep, nil) }, "local block of a RUC after SIFEN's first 0301, one step longer at each recurrence within a day; at least 10m (env BALDE_SIFEN_BLOCK_STEP)"),
	"sifen-block-max":        valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.SifenBlockMax, ParseSifenBlockMax, nil) }, "longest local block after repeated 0301s, at least --sifen-block-step (env BALDE_SIFEN_BLOCK_MAX)"),
	"policies":               stringFlag(func(s *Settings) *string { return &s.PolicyFile }, "JSON file overriding or adding policies (env BALDE_POLICY_FILE)"),
	"dict-reconcile-every": valueFlag(func(s *Settings) flag.Value {
		return FlagOf(&s.DictReconcileEvery, ParseReconcileEvery, formatReconcile)
	}, `period of the background DICT reconciliation, "auto" (every minute against a real DICT, off against the simulator) or "off" (env BALDE_DICT_RECONCILE_EVERY)`),
	"prune-every":          valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.PruneEvery, ParsePeriod, formatPeriod) }, `period of the background prune of old ledger rows, DICT lookups and idle buckets, or "off" (env BALDE_PRUNE_EVERY)`),
	"addr":                 stringFlag(func(s *Settings) *string { return &s.Addr }, "address to listen on, HOST:PORT (env BALDE_ADDR)"),
	"admin-user":           stringFlag(func(s *Settings) *string { return &s.AdminUser }, "admin user name; the password comes from BALDE_ADMIN_PASSWORD, BALDE_ADMIN_PASSWORD_BCRYPT or BALDE_ADMIN_PASSWORD_FILE, else DATA_DIR/admin-password, generated once (env BALDE_ADMIN_USER)"),
	"users-file":           stringFlag(func(s *Settings) *string { return &s.UsersFile }, "file of more admin-page users, NAME:ROLE:SECRET a line, ROLE viewer or admin, SECRET a bcrypt hash or a password (env BALDE_USERS_FILE; BALDE_USERS lists them inline)"),
	"dict-sim-addr":        stringFlag(func(s *Settings) *string { return &s.DictSimAddr }, "where the built-in DICT simulator listens, loopback HOST:PORT (env BALDE_DICT_SIM_ADDR)"),
	"sifen-sim-addr":       stringFlag(func(s *Settings) *string { return &s.SifenSimAddr }, "where the built-in SIFEN simulator listens, loopback HOST:PORT (env BALDE_SIFEN_SIM_ADDR)"),
	"trusted-proxies":      valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.TrustedProxies, ParseTrustedProxies, FormatProxies) }, "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)"),
	"inbound-ip-limit":     valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.InboundIPLimit, ParseInboundIPLimit, nil) }, "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)"),
	"inbound-window":       valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.InboundWindow, ParseInboundWindow, nil) }, "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)"),
	"inbound-client-limit": valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.InboundClientLimit, ParseInboundClientLimit, nil) }, "requests per window per gateway client, never blocked beyond its window (default 10000) (env BALDE_INBOUND_CLIENT_LIMIT)"),
	"clients":              stringFlag(func(s *Settings) *string { return &s.ClientsFile }, "file of the gateway's clients, a line each: NAME sha256:HEX (a bearer token's SHA-256), NAME token:TOKEN or NAME cn:NAME (a client certificate); reloaded on SIGHUP and when it changes (env BALDE_GATEWAY_CLIENTS_FILE)"),
	"tls-cert":             stringFlag(func(s *Settings) *string { return &s.TLSCert }, "PEM certificate the gateway serves HTTPS with, with --tls-key (env BALDE_GATEWAY_TLS_CERT)"),
	"tls-key":              stringFlag(func(s *Settings) *string { return &s.TLSKey }, "PEM key of --tls-cert (env BALDE_GATEWAY_TLS_KEY)"),
	"client-ca":            stringFlag(func(s *Settings) *string { return &s.ClientCA }, "PEM bundle of the CAs whose client certificates the gateway accepts, for clients listed as cn:NAME (env BALDE_GATEWAY_CLIENT_CA)"),
	"inbound-block":        valueFlag(func(s *Settings) flag.Value { return FlagOf(&s.InboundBlock, ParseInboundBlock, nil) }, "how long a client over its limit is refused (env BALDE_INBOUND_BLOCK)"),
}

// stringFlag, boolFlag and valueFlag register the flag of a field, its
// current value the default.
func stringFlag(field func(*Settings) *string, help string) func(*Settings, *flag.FlagSet, string) {
	return func(s *Settings, fs *flag.FlagSet, name string) { p := field(s); fs.StringVar(p, name, *p, help) }
}

func boolFlag(field func(*Settings) *bool, help string) func(*Settings, *flag.FlagSet, string) {
	return func(s *Settings, fs *flag.FlagSet, name string) { p := field(s); fs.BoolVar(p, name, *p, help) }
}

func valueFlag(value func(*Settings) flag.Value, help string) func(*Settings, *flag.FlagSet, string) {
	return func(s *Settings, fs *flag.FlagSet, name string) { fs.Var(value(s), name, help) }
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

// FormatProxies writes prefixes as BALDE_TRUSTED_PROXIES takes them.
func FormatProxies(ps []netip.Prefix) string {
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
