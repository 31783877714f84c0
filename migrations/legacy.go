package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
)

// legacyTables are the tables of a balde before the balde_ prefix, with the
// old version that created each: only those of the versions a database
// reached are balde's (a "documents" table at version 2 is the application's).
var legacyTables = []struct {
	name    string
	version int64
}{
	{"policies", 1}, {"buckets", 1},
	{"token_ledger", 2},
	{"documents", 3}, {"document_lots", 3},
	{"dict_lookups", 4}, {"dict_participants", 4},
}

// adoptLegacy upgrades in one transaction a database a balde before the
// prefix migrated (isLegacy): its version row moves from schema_migrations
// to VersionTable and its tables, with their indexes (and on PostgreSQL
// sequences and foreign keys), take the balde_ prefix. Adopting twice is a
// no-op.
func adoptLegacy(db *sql.DB, engine Engine) error {
	ctx := context.Background()
	legacy, err := isLegacy(ctx, db, engine)
	if err != nil || !legacy {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("adopt legacy schema: %w", err)
	}
	defer tx.Rollback()
	version, dirty, err := ReadVersion(ctx, tx, "schema_migrations")
	if err != nil {
		return fmt.Errorf("adopt legacy schema: read schema_migrations: %w", err)
	}
	prefix := prefixSQLiteIndexes
	if engine == Postgres {
		prefix = prefixPostgresObjects
	}
	for _, table := range legacyTables {
		if table.version > version {
			continue // not created yet by balde: a table of that name is the application's
		}
		name := table.name
		exists, err := schemaObject{kind: "table", name: name}.exists(ctx, tx, engine)
		if err != nil {
			return fmt.Errorf("adopt legacy schema: %w", err)
		}
		if !exists {
			continue
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s RENAME TO balde_%s`, name, name)); err != nil {
			return fmt.Errorf("adopt legacy schema: rename %s: %w", name, err)
		}
		if err := prefix(ctx, tx, "balde_"+name); err != nil {
			return fmt.Errorf("adopt legacy schema: %s: %w", name, err)
		}
	}
	for _, st := range []string{
		fmt.Sprintf(`CREATE TABLE %s (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL)`, VersionTable),
		fmt.Sprintf(`INSERT INTO %s (version, dirty) VALUES (%d, %t)`, VersionTable, version, dirty),
		`DROP TABLE schema_migrations`,
	} {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("adopt legacy schema: %w", err)
		}
	}
	return tx.Commit()
}

// legacyLatest is the last version the migrations had before the prefix:
// a schema_migrations beyond it belongs to somebody else.
const legacyLatest = 4

// isLegacy reports whether db holds a balde schema of before the prefix:
// schema_migrations at a version up to legacyLatest, "buckets" and
// "token_ledger", and no VersionTable.
func isLegacy(ctx context.Context, db *sql.DB, engine Engine) (bool, error) {
	for _, probe := range []struct {
		name string
		want bool
	}{{VersionTable, false}, {"schema_migrations", true}, {"buckets", true}, {"token_ledger", true}} {
		exists, err := schemaObject{kind: "table", name: probe.name}.exists(ctx, db, engine)
		if err != nil {
			return false, fmt.Errorf("adopt legacy schema: %w", err)
		}
		if exists != probe.want {
			return false, nil
		}
	}
	version, _, err := ReadVersion(ctx, db, "schema_migrations")
	if err != nil {
		return false, fmt.Errorf("adopt legacy schema: read schema_migrations: %w", err)
	}
	return version >= 1 && version <= legacyLatest, nil
}

// legacyIndexName finds the name in an index's CREATE statement as SQLite
// stores it (sqlite_master.sql), quoted or not.
var legacyIndexName = regexp.MustCompile(`(?i)^(\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?)("?)([^"\s(]+)("?)`)

// prefixSQLiteIndexes gives the balde_ prefix to the indexes of a renamed
// table (SQLite has no RENAME INDEX): each is dropped and created again from
// its stored definition under the new name; automatic indexes of
// constraints are left alone.
func prefixSQLiteIndexes(ctx context.Context, tx *sql.Tx, table string) error {
	indexes, err := queryPairs(ctx, tx,
		`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = $1 AND sql IS NOT NULL AND name NOT LIKE 'balde\_%' ESCAPE '\'`, table)
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	for _, ix := range indexes {
		name, def := ix[0], ix[1]
		m := legacyIndexName.FindStringSubmatchIndex(def)
		if m == nil {
			return fmt.Errorf("index %s: unexpected definition %q", name, def)
		}
		create := def[:m[6]] + "balde_" + def[m[6]:]
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`DROP INDEX %q`, name)); err != nil {
			return fmt.Errorf("drop index %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("%s: %w", create, err)
		}
	}
	return nil
}

// prefixPostgresObjects gives the balde_ prefix to the schema-wide names
// PostgreSQL derived from a table's old name: its indexes (so its primary-key
// and unique constraints), identity sequences and foreign keys.
func prefixPostgresObjects(ctx context.Context, tx *sql.Tx, table string) error {
	const objects = `
		SELECT 'INDEX', i.relname
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		WHERE x.indrelid = to_regclass($1) AND i.relname NOT LIKE 'balde\_%'
		UNION ALL
		SELECT 'SEQUENCE', s.relname
		FROM pg_depend d
		JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
		WHERE d.refobjid = to_regclass($1) AND s.relname NOT LIKE 'balde\_%'
		UNION ALL
		SELECT 'CONSTRAINT', c.conname
		FROM pg_constraint c
		WHERE c.conrelid = to_regclass($1) AND c.contype = 'f' AND c.conname NOT LIKE 'balde\_%'`
	derived, err := queryPairs(ctx, tx, objects, table)
	if err != nil {
		return fmt.Errorf("list derived names: %w", err)
	}
	for _, o := range derived {
		kind, name := o[0], o[1]
		stmt := fmt.Sprintf(`ALTER %s %q RENAME TO %q`, kind, name, "balde_"+name)
		if kind == "CONSTRAINT" {
			stmt = fmt.Sprintf(`ALTER TABLE %s RENAME CONSTRAINT %q TO %q`, table, name, "balde_"+name)
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// queryPairs returns the rows of a query selecting two text columns.
func queryPairs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([][2]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, p)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}
