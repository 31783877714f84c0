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

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// AddFlags registers on fs the command-line flags named (without dashes:
// "db", "dict-url", "sifen-throttle", ...), each setting a field of s,
// read with the parser of the field's environment variable so that a flag
// accepts exactly what its variable does, and described in --help with
// the variable's name. Register them after FromEnv or ParseEnv: the
// current value is the flag's default, and a flag given wins. A name
// FlagNames does not list panics (a programming error).
func (s *Settings) AddFlags(fs *flag.FlagSet, names ...string) {
	for _, n := range names {
		add, ok := settingFlags[n]
		if !ok {
			panic(fmt.Sprintf("settings: no setting flag %q", n))
		}
		add(s, fs)
	}
}

// FlagNames lists the names AddFlags knows, sorted.
func FlagNames() []string {
	names := make([]string, 0, len(settingFlags))
	for n := range settingFlags {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// settingFlags registers each setting's flag: its name, its field, its
// parser and format, its help naming the variable.
var settingFlags = map[string]func(s *Settings, fs *flag.FlagSet){
	"db": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DB, "db", s.DB, "database DSN: sqlite://FILE, a file path, or postgres://... (env BALDE_DB); "+
			"a SQLite file is integrity-checked at open and, by serve's /readyz, every "+formatPeriod(sqlstore.DefaultIntegrityEvery))
	},
	"dict-url": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DictURL, "dict-url", s.DictURL, "DICT base URL (env BALDE_DICT_URL)")
	},
	"dict-policies-url": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DictPoliciesURL, "dict-policies-url", s.DictPoliciesURL, "base URL of the DICT's GET /policies/, on its own host (default: derived from --dict-url as the DICT's spec names it, dict… → dict-ratelimit…; required for another host) (env BALDE_DICT_POLICIES_URL)")
	},
	"dict-participant": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DictParticipant, "dict-participant", s.DictParticipant, "this participant's ISPB, 8 digits; required against a DICT that is not a simulator (env BALDE_DICT_PARTICIPANT)")
	},
	"dict-unverified": func(s *Settings, fs *flag.FlagSet) {
		fs.BoolVar(&s.DictUnverified, "dict-unverified", s.DictUnverified, "run against a DICT without BALDE_DICT_VERIFY_CERT: its answers are not verified (logged, balde_dict_answers_unverified 1) (env BALDE_DICT_UNVERIFIED=on)")
	},
	"dict-sign-with-tls-key": func(s *Settings, fs *flag.FlagSet) {
		fs.BoolVar(&s.DictSignWithTLSKey, "dict-sign-with-tls-key", s.DictSignWithTLSKey, "sign DICT writes with the mutual-TLS pair BALDE_DICT_CERT/BALDE_DICT_KEY when BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY are unset (env BALDE_DICT_SIGN_WITH_TLS_KEY=on)")
	},
	"dict-category": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DictCategory, "dict-category", s.DictCategory, "participant category A..H until learned from the DICT's GET /policies/ (default: the strictest, H) (env BALDE_DICT_CATEGORY)")
	},
	"dict-env": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DictEnv, "dict-env", s.DictEnv, "env part of DICT bucket keys (env BALDE_DICT_ENV)")
	},
	"sifen-url": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.SifenURL, "sifen-url", s.SifenURL, `SIFEN base URL, "{env}" standing for test or prod, or "official" for SIFEN's endpoints (env BALDE_SIFEN_URL)`)
	},
	"sifen-throttle": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.SifenThrottle, ParseInterval, formatSeconds), "sifen-throttle", "seconds between two lots of one RUC and env (env SIFEN_THROTTLE_SECONDS)")
	},
	"sifen-throttle-prod": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.SifenThrottleProd, ParseInterval, formatSeconds), "sifen-throttle-prod", "override of --sifen-throttle for prod (env SIFEN_THROTTLE_SECONDS_PROD)")
	},
	"sifen-block-step": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.SifenBlockStep, ParseSifenBlockStep, nil), "sifen-block-step", "local block of a RUC after SIFEN's first 0301, one step longer at each recurrence within a day; at least 10m (env BALDE_SIFEN_BLOCK_STEP)")
	},
	"sifen-block-max": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.SifenBlockMax, ParseSifenBlockMax, nil), "sifen-block-max", "longest local block after repeated 0301s, at least --sifen-block-step (env BALDE_SIFEN_BLOCK_MAX)")
	},
	"policies": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.PolicyFile, "policies", s.PolicyFile, "JSON file overriding or adding policies (env BALDE_POLICY_FILE)")
	},
	"dict-reconcile-every": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.DictReconcileEvery, ParseReconcileEvery, formatReconcile), "dict-reconcile-every", `period of the background DICT reconciliation, "auto" (every minute against a real DICT, off against the simulator) or "off" (env BALDE_DICT_RECONCILE_EVERY)`)
	},
	"prune-every": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.PruneEvery, ParsePeriod, formatPeriod), "prune-every", `period of the background prune of old ledger rows, DICT lookups and idle buckets, or "off" (env BALDE_PRUNE_EVERY)`)
	},
	"addr": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.Addr, "addr", s.Addr, "address to listen on, HOST:PORT (env BALDE_ADDR)")
	},
	"admin-user": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.AdminUser, "admin-user", s.AdminUser, "admin user name; the password comes from BALDE_ADMIN_PASSWORD, BALDE_ADMIN_PASSWORD_BCRYPT or BALDE_ADMIN_PASSWORD_FILE, else DATA_DIR/admin-password, generated once (env BALDE_ADMIN_USER)")
	},
	"users-file": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.UsersFile, "users-file", s.UsersFile, "file of more admin-page users, NAME:ROLE:SECRET a line, ROLE viewer or admin, SECRET a bcrypt hash or a password (env BALDE_USERS_FILE; BALDE_USERS lists them inline)")
	},
	"dict-sim-addr": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.DictSimAddr, "dict-sim-addr", s.DictSimAddr, "where the built-in DICT simulator listens, loopback HOST:PORT (env BALDE_DICT_SIM_ADDR)")
	},
	"sifen-sim-addr": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.SifenSimAddr, "sifen-sim-addr", s.SifenSimAddr, "where the built-in SIFEN simulator listens, loopback HOST:PORT (env BALDE_SIFEN_SIM_ADDR)")
	},
	"trusted-proxies": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.TrustedProxies, ParseTrustedProxies, FormatProxies), "trusted-proxies", "CIDR prefixes whose X-Forwarded-For is believed (env BALDE_TRUSTED_PROXIES)")
	},
	"inbound-ip-limit": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.InboundIPLimit, ParseInboundIPLimit, nil), "inbound-ip-limit", "requests per window per client IP; 0 disables the inbound limiter (env BALDE_INBOUND_IP_LIMIT)")
	},
	"inbound-window": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.InboundWindow, ParseInboundWindow, nil), "inbound-window", "sliding window of the inbound limiter (env BALDE_INBOUND_WINDOW)")
	},
	"inbound-client-limit": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.InboundClientLimit, ParseInboundClientLimit, nil), "inbound-client-limit", "requests per window per gateway client, never blocked beyond its window (default 10000) (env BALDE_INBOUND_CLIENT_LIMIT)")
	},
	"clients": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.ClientsFile, "clients", s.ClientsFile, "file of the gateway's clients, a line each: NAME sha256:HEX (a bearer token's SHA-256), NAME token:TOKEN or NAME cn:NAME (a client certificate); reloaded on SIGHUP and when it changes (env BALDE_GATEWAY_CLIENTS_FILE)")
	},
	"tls-cert": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.TLSCert, "tls-cert", s.TLSCert, "PEM certificate the gateway serves HTTPS with, with --tls-key (env BALDE_GATEWAY_TLS_CERT)")
	},
	"tls-key": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.TLSKey, "tls-key", s.TLSKey, "PEM key of --tls-cert (env BALDE_GATEWAY_TLS_KEY)")
	},
	"client-ca": func(s *Settings, fs *flag.FlagSet) {
		fs.StringVar(&s.ClientCA, "client-ca", s.ClientCA, "PEM bundle of the CAs whose client certificates the gateway accepts, for clients listed as cn:NAME (env BALDE_GATEWAY_CLIENT_CA)")
	},
	"inbound-block": func(s *Settings, fs *flag.FlagSet) {
		fs.Var(FlagOf(&s.InboundBlock, ParseInboundBlock, nil), "inbound-block", "how long a client over its limit is refused (env BALDE_INBOUND_BLOCK)")
	},
}

// FlagOf is a flag.Value read with parse (on an error the value is
// unchanged) and shown in --help with format (nil: fmt.Sprint): with a
// Parse* function, a flag that accepts exactly what its variable does.
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

// String is the value in its format; flag's zero value (v nil, made by
// PrintDefaults) is "".
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

// Formats of the flags' defaults: seconds as the variables write them, a
// period with "off" for 0, the reconciliation's "auto", proxy prefixes
// separated by commas.
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

// FormatProxies writes trusted proxy prefixes as BALDE_TRUSTED_PROXIES
// takes them: comma-separated CIDR prefixes.
func FormatProxies(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// ParseDuration reads a Go duration that may not be negative ("1m"); the
// error says what was expected.
func ParseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 1m)", s)
	}
	return v, nil
}

// ParseFlags parses args with fs, with flags before, between or after
// the positional arguments ("migrate up --db X" as "migrate --db X up"),
// the way operators' other tools take them; "--" ends the flags, and
// everything after it is an argument. Afterwards fs.Args() holds the
// positional arguments in order. The usage is printed (to fs's output)
// only when asked for with -h or --help (flag.ErrHelp); a parse error is
// returned without it.
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
	// Leave the arguments in fs.Args(): a FlagSet parsing "--" first
	// keeps everything after it as arguments.
	_ = fs.Parse(append([]string{"--"}, pos...))
	return nil
}

// ParseTrustedProxies reads a comma- or space-separated list of CIDR
// prefixes or single addresses ("10.0.0.0/8, 127.0.0.1, ::1").
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
