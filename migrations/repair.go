package migrations

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// ErrDirty means the schema is marked dirty at a version whose migration
// cannot be shown to have landed or not: Up refuses to run on it. The
// error that wraps it names the version and what is missing.
var ErrDirty = errors.New("migrations: the schema is dirty")

// repairResult is what Migrator.repair did.
type repairResult struct {
	// Version is the dirty version found; zero when the schema was clean.
	Version uint
	// Landed says the version was recorded clean, else the previous one was.
	Landed bool
	// Objects are the objects checked ("table balde_dict_lookups", ...).
	Objects []string
}

// repair clears the dirty flag a balde before docs/decisions/0070 could
// leave, checking the objects the dirty version's up file creates or drops
// (createdObjects; a migration lands whole or not at all): all as the
// migration leaves them records the version clean, none records the previous
// one so that Up runs it again, anything else changes nothing and returns an
// error wrapping ErrDirty naming what is missing. A clean schema gives a zero
// repairResult. Every repair is logged at warning level.
func (g *Migrator) repair(ctx context.Context) (repairResult, error) {
	version, dirty, err := g.Version()
	if err != nil || !dirty {
		return repairResult{}, err
	}
	rep := repairResult{Version: version}
	body, prev, err := upFile(g.engine, version)
	if err != nil {
		return rep, fmt.Errorf("%w at version %d: %w", ErrDirty, version, err)
	}
	objects := createdObjects(body)
	var present, missing []string
	for _, o := range objects {
		exists, err := o.exists(ctx, g.db, g.engine)
		if err != nil {
			return rep, fmt.Errorf("migrations: repair dirty version %d: %w", version, err)
		}
		rep.Objects = append(rep.Objects, o.String())
		if exists != o.dropped { // as the migration leaves it
			present = append(present, o.String())
		} else {
			missing = append(missing, o.String())
		}
	}
	logger := cmp.Or(g.Logger, slog.New(slog.DiscardHandler))
	switch {
	case len(objects) == 0:
		return rep, fmt.Errorf("%w at version %d, whose migration creates nothing that can be checked: "+
			"make the schema match a version by hand, then balde migrate force VERSION", ErrDirty, version)
	case len(missing) == 0:
		if err := g.Force(int(version)); err != nil {
			return rep, err
		}
		rep.Landed = true
		logger.Warn("repaired a dirty schema version: its migration had landed whole",
			slog.Uint64("version", uint64(version)), slog.Any("checked", rep.Objects))
	case len(present) == 0:
		if err := g.Force(prev); err != nil {
			return rep, err
		}
		logger.Warn("repaired a dirty schema version: its migration had not landed; it runs again",
			slog.Uint64("version", uint64(version)), slog.Int("recorded", prev), slog.Any("checked", rep.Objects))
	default:
		return rep, fmt.Errorf("%w at version %d and only part of its migration is there (missing: %s; present: %s): "+
			"restore a backup, or make the schema match a version by hand, then balde migrate force VERSION",
			ErrDirty, version, strings.Join(missing, ", "), strings.Join(present, ", "))
	}
	return rep, nil
}

// upFile returns the up migration of version and the version before it
// (-1 when it is the first).
func upFile(engine Engine, version uint) (body string, prev int, err error) {
	src, err := iofs.New(sqlFiles, string(engine))
	if err != nil {
		return "", 0, err
	}
	r, _, err := src.ReadUp(version)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, fmt.Errorf("no migration %d in this balde (the database is newer?)", version)
	}
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", 0, err
	}
	prev = -1
	if p, err := src.Prev(version); err == nil {
		prev = int(p)
	}
	return string(b), prev, nil
}

// schemaObject is a table, index or column a migration creates, or a
// table or index it drops.
type schemaObject struct {
	kind    string // "table", "index" or "column"
	table   string // the table of a column
	name    string
	dropped bool // the migration drops it: landed means absent
}

func (o schemaObject) String() string {
	name := o.kind + " " + o.name
	if o.kind == "column" {
		name = "column " + o.table + "." + o.name
	}
	if o.dropped {
		return "dropped " + name
	}
	return name
}

var (
	createTable  = regexp.MustCompile(`(?im)^\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?"?([A-Za-z0-9_]+)"?`)
	createIndex  = regexp.MustCompile(`(?im)^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(IF\s+NOT\s+EXISTS\s+)?"?([A-Za-z0-9_]+)"?`)
	dropObject   = regexp.MustCompile(`(?im)^\s*DROP\s+(TABLE|INDEX)\s+(IF\s+EXISTS\s+)?"?([A-Za-z0-9_]+)"?`)
	addColumn    = regexp.MustCompile(`(?im)^\s*ALTER\s+TABLE\s+"?([A-Za-z0-9_]+)"?\s+ADD\s+(?:COLUMN\s+)?(IF\s+NOT\s+EXISTS\s+)?"?([A-Za-z0-9_]+)"?`)
	sqlLineNotes = regexp.MustCompile(`--[^\n]*`)
)

// createdObjects lists the tables, indexes and columns body creates and
// the tables and indexes it drops, in order; IF NOT EXISTS and IF EXISTS
// ones are left out (their state proves nothing).
func createdObjects(body string) []schemaObject {
	body = sqlLineNotes.ReplaceAllString(body, "")
	type hit struct {
		at  int
		obj schemaObject
	}
	var hits []hit
	// find adds re's matches whose IF [NOT] EXISTS group ifx is absent.
	find := func(re *regexp.Regexp, ifx int, obj func(m []int) schemaObject) {
		for _, m := range re.FindAllStringSubmatchIndex(body, -1) {
			if m[ifx] < 0 {
				hits = append(hits, hit{m[0], obj(m)})
			}
		}
	}
	find(createTable, 2, func(m []int) schemaObject { return schemaObject{kind: "table", name: body[m[4]:m[5]]} })
	find(createIndex, 2, func(m []int) schemaObject { return schemaObject{kind: "index", name: body[m[4]:m[5]]} })
	find(addColumn, 4, func(m []int) schemaObject {
		return schemaObject{kind: "column", table: body[m[2]:m[3]], name: body[m[6]:m[7]]}
	})
	find(dropObject, 4, func(m []int) schemaObject {
		return schemaObject{kind: strings.ToLower(body[m[2]:m[3]]), name: body[m[6]:m[7]], dropped: true}
	})
	slices.SortFunc(hits, func(a, b hit) int { return a.at - b.at })
	out := make([]schemaObject, len(hits))
	for i, h := range hits {
		out[i] = h.obj
	}
	return out
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exists reports whether o is in the database, read through q (a pool or a
// transaction): the main database on SQLite, the first schema of the
// search_path on PostgreSQL.
func (o schemaObject) exists(ctx context.Context, q queryer, engine Engine) (bool, error) {
	var query string
	var args []any
	switch {
	case engine == SQLite && o.kind == "column":
		query, args = `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, []any{o.table, o.name}
	case engine == SQLite:
		query, args = `SELECT count(*) FROM sqlite_schema WHERE type = ? AND name = ?`, []any{o.kind, o.name}
	case o.kind == "column":
		query, args = `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`, []any{o.table, o.name}
	default:
		query, args = `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = current_schema() AND c.relname = $1`, []any{o.name}
	}
	var n int
	if err := q.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return false, fmt.Errorf("look for %s: %w", o, err)
	}
	return n > 0, nil
}
