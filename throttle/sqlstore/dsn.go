package sqlstore

import (
	"fmt"
	"net/url"
	"strings"

	"balde/migrations"
)

// Engine is the database behind a Store.
type Engine = migrations.Engine

const (
	SQLite   = migrations.SQLite
	Postgres = migrations.Postgres
)

// DefaultDSN is the embedded default: a SQLite file in the working directory.
const DefaultDSN = "sqlite://balde.db"

// ParseDSN tells the engine of a DSN and returns what its driver opens:
//
//	postgres://... or postgresql://...  PostgreSQL (passed to pgx unchanged)
//	sqlite://PATH                       SQLite file PATH
//	file:PATH?...                       SQLite, URI form (query kept)
//	PATH                                SQLite file PATH
//
// For SQLite the returned DSN carries the connection settings every
// connection needs (they must be in the DSN: a PRAGMA run with Exec reaches
// only one pooled connection): WAL, a 5 s busy timeout, foreign keys,
// synchronous=NORMAL (durable across a crash of the process; the last
// transactions may be lost on power loss — see docs/decisions), and a 64 MiB
// journal_size_limit so a WAL that grew under a burst is truncated back after
// the next checkpoint.
func ParseDSN(dsn string) (Engine, string, error) {
	switch {
	case dsn == "":
		return "", "", fmt.Errorf("sqlstore: empty DSN")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := url.Parse(dsn); err != nil {
			return "", "", fmt.Errorf("sqlstore: bad PostgreSQL DSN: %w", err)
		}
		return Postgres, dsn, nil
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

// sqliteDSN builds the modernc.org/sqlite DSN for path with balde's pragmas
// plus any extra query parameters the user gave.
func sqliteDSN(path, extra string) string {
	q := "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)" +
		"&_pragma=journal_size_limit(67108864)"
	if extra != "" {
		q += "&" + extra
	}
	return "file:" + path + "?" + q
}
