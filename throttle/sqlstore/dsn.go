package sqlstore

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/balde-throttle/balde/migrations"
)

// Engine is the database behind a Store.
type Engine = migrations.Engine

const (
	SQLite   = migrations.SQLite
	Postgres = migrations.Postgres
)

// ParseDSN tells the engine of a DSN and returns what its driver opens:
//
//	postgres://... or postgresql://...  PostgreSQL (passed to pgx, with
//	                                    plan_cache_mode=force_generic_plan,
//	                                    lock_timeout=5s and
//	                                    statement_timeout=30s, each unless
//	                                    the DSN sets it)
//	sqlite://PATH                       SQLite file PATH
//	file:PATH?...                       SQLite, URI form (query kept)
//	PATH                                SQLite file PATH
//
// For SQLite the returned DSN carries the settings every connection needs
// (a PRAGMA run with Exec reaches one pooled connection): WAL, a 5 s busy
// timeout, foreign keys, synchronous=NORMAL, wal_autocheckpoint 16,000
// pages (Open checkpoints in the background instead, decision 0112, unless
// the DSN sets its own) and a 64 MiB journal_size_limit
// (docs/decisions/0008). The page cache stays at SQLite's 2 MB per
// connection and memory-mapped reads stay off (docs/decisions/0119); set
// them in the DSN, e.g. ?_pragma=cache_size(-65536)&_pragma=mmap_size(268435456).
// Parameters given in the DSN come after these and win.
//
// Every wait on a lock is bounded (docs/decisions/0071, 0190): on
// PostgreSQL by DefaultLockTimeout and DefaultStatementTimeout (55P03,
// 57014: throttle.ErrStoreUnavailable); on SQLite by busy_timeout per
// attempt, and the retries stop once a call has spent 5 s (retry.go).
func ParseDSN(dsn string) (Engine, string, error) {
	switch {
	case dsn == "":
		return "", "", fmt.Errorf("sqlstore: empty DSN")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		driverDSN, err := postgresDSN(dsn, defaultStatementTimeout)
		if err != nil {
			return "", "", err
		}
		return Postgres, driverDSN, nil
	}
	path, ok := strings.CutPrefix(dsn, "sqlite://")
	if !ok {
		path, ok = strings.CutPrefix(dsn, "file:")
	}
	if !ok && strings.Contains(dsn, "://") {
		return "", "", fmt.Errorf("sqlstore: unsupported DSN scheme in %q (want sqlite://, postgres:// or a file path)", dsn)
	}
	path, query, _ := strings.Cut(path, "?")
	if path == "" {
		return "", "", fmt.Errorf("sqlstore: SQLite DSN %q has no file path", dsn)
	}
	return SQLite, sqliteDSN(path, query), nil
}

// PostgreSQL's bounds on waits, set as run-time parameters in the DSN
// unless it names them (lock_timeout=..., statement_timeout=...; "0"
// disables one). Migrations run without the statement bound (a migration
// on a large table may take longer) but with the lock bound.
const (
	defaultLockTimeout      = "5s"
	defaultStatementTimeout = "30s"
)

// postgresDSN returns the PostgreSQL dsn with balde's run-time parameters
// (statement_timeout: statementTimeout), each unless dsn sets it.
func postgresDSN(dsn, statementTimeout string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("sqlstore: bad PostgreSQL DSN: %w", err)
	}
	// balde's statements are prepared once per connection (pgx) and
	// their best plan does not depend on the values: a generic plan
	// saves re-planning the write statement (~1.3 ms) on every call.
	q := u.Query()
	for _, p := range [][2]string{
		{"plan_cache_mode", "force_generic_plan"},
		{"lock_timeout", defaultLockTimeout},
		{"statement_timeout", statementTimeout},
	} {
		if !q.Has(p[0]) {
			q.Set(p[0], p[1])
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sqlitePragmas are balde's connection settings for SQLite, in the order
// they are listed (the driver runs them sorted).
var sqlitePragmas = []string{
	"busy_timeout(5000)",
	"journal_mode(WAL)",
	"synchronous(NORMAL)",
	"foreign_keys(1)",
	"wal_autocheckpoint(16000)",
	"journal_size_limit(67108864)",
}

// sqliteDSN builds the modernc.org/sqlite DSN for path with balde's pragmas
// plus the user's query parameters; a pragma the user sets replaces balde's
// of the same name.
func sqliteDSN(path, extra string) string {
	mine := make(map[string]bool)
	if q, err := url.ParseQuery(extra); err == nil {
		for _, p := range q["_pragma"] {
			mine[pragmaName(p)] = true
		}
	}
	var parts []string
	for _, p := range sqlitePragmas {
		if !mine[pragmaName(p)] {
			parts = append(parts, "_pragma="+p)
		}
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	return "file:" + path + "?" + strings.Join(parts, "&")
}

// pragmaName returns the name of a pragma setting like "busy_timeout(5000)"
// or "cache_size=-2000".
func pragmaName(p string) string {
	if i := strings.IndexAny(p, "(= "); i >= 0 {
		p = p[:i]
	}
	return strings.ToLower(strings.TrimSpace(p))
}
