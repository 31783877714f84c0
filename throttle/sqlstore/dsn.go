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
// For SQLite the returned DSN carries the connection settings every
// connection needs (they must be in the DSN: a PRAGMA run with Exec reaches
// only one pooled connection): WAL, a 5 s busy timeout, foreign keys,
// synchronous=NORMAL (durable across a crash of the process; the last
// transactions may be lost on power loss), a checkpoint every 16,000 WAL
// pages instead of SQLite's 1,000 (fewer, cheaper checkpoints in the
// committing transaction; measured in docs/decisions/0008; Open turns it
// off on its writer and checkpoints in the background instead, decision
// 0112, unless the DSN sets its own), and a 64 MiB
// journal_size_limit so a WAL that grew under a burst is truncated back
// after the next checkpoint. Parameters given in the DSN come after these
// and win.
//
// SQLite's page cache stays at its default, 2 MB per connection
// (cache_size -2000), and memory-mapped reads stay off: a larger cache is
// heap memory on every connection of the store (its writer, up to
// MaxConns readers, its checkpointer), and a mapping turns a read error of
// the file into a crash of the process. Set them in the DSN, e.g.
// sqlite://balde.db?_pragma=cache_size(-65536)&_pragma=mmap_size(268435456)
// for a 64 MiB cache (in KiB when negative) and a 256 MiB map (bytes);
// docs/decisions/0119 measures both.
//
// Every wait on a lock is bounded (a session holding a bucket row
// FOR UPDATE blocked dict-lookup for 74 s): on PostgreSQL a statement that
// waits DefaultLockTimeout for a lock, or runs DefaultStatementTimeout,
// fails (55P03, 57014) and the call fails with throttle.ErrStoreUnavailable;
// on SQLite busy_timeout bounds one attempt at the write lock, and the
// store's retries stop once a call has spent 5 s (retry.go), so a call
// facing a stopped writer fails within about 5 s, at most 5 s plus
// busy_timeout. See docs/decisions/0071; a web or gateway request's
// writes share one 5 s bound in all (docs/decisions/0190).
func ParseDSN(dsn string) (Engine, string, error) {
	switch {
	case dsn == "":
		return "", "", fmt.Errorf("sqlstore: empty DSN")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return "", "", fmt.Errorf("sqlstore: bad PostgreSQL DSN: %w", err)
		}
		// balde's statements are prepared once per connection (pgx) and
		// their best plan does not depend on the values: a generic plan
		// saves re-planning the write statement (~1.3 ms) on every call.
		q := u.Query()
		for _, p := range [][2]string{
			{"plan_cache_mode", "force_generic_plan"},
			{"lock_timeout", defaultLockTimeout},
			{"statement_timeout", defaultStatementTimeout},
		} {
			if !q.Has(p[0]) {
				q.Set(p[0], p[1])
			}
		}
		u.RawQuery = q.Encode()
		return Postgres, u.String(), nil
	}
	path, query := dsn, ""
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		path = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "file:"):
		path = strings.TrimPrefix(dsn, "file:")
	case strings.Contains(dsn, "://"):
		return "", "", fmt.Errorf("sqlstore: unsupported DSN scheme in %q (want sqlite://, postgres:// or a file path)", dsn)
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query = path[:i], path[i+1:]
	}
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
