package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// ErrDatabaseReplaced means the SQLite file the store opened is no longer
// at its path: deleted (the store keeps writing to the unlinked file, and
// the next start would create an empty database) or replaced by another
// file. It comes wrapped with throttle.ErrStoreUnavailable.
var ErrDatabaseReplaced = errors.New("sqlstore: the database file was deleted or replaced under the running process")

// Identity says which database a store opened, to be logged at start: for
// SQLite the file's path, device and inode; for PostgreSQL the server,
// database and schema.
type Identity struct {
	Engine Engine
	// Path, Device and Inode identify a SQLite file (empty/zero on
	// PostgreSQL).
	Path          string
	Device, Inode uint64
	// Server, Database and Schema identify a PostgreSQL database (empty on
	// SQLite).
	Server, Database, Schema string
}

// String renders the identity for a log line, e.g.
// "sqlite file /var/lib/balde/balde.db (device 2049, inode 131090)".
func (id Identity) String() string {
	if id.Engine == SQLite {
		return fmt.Sprintf("sqlite file %s (device %d, inode %d)", id.Path, id.Device, id.Inode)
	}
	return fmt.Sprintf("postgres database %s schema %s on %s", id.Database, id.Schema, id.Server)
}

// SQLitePath returns the file path of a SQLite driver DSN ("file:PATH?...",
// as ParseDSN returns it).
func SQLitePath(driverDSN string) string {
	p, _, _ := strings.Cut(strings.TrimPrefix(driverDSN, "file:"), "?")
	return p
}

// statFile returns the device and inode of path.
func statFile(path string) (dev, ino uint64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("sqlstore: no inode for %s on this system", path)
	}
	return uint64(st.Dev), uint64(st.Ino), nil
}

// loadIdentity fills s.identity once the store is open.
func (s *Store) loadIdentity(ctx context.Context, driverDSN string) error {
	s.identity = Identity{Engine: s.engine}
	if s.engine == SQLite {
		s.identity.Path = SQLitePath(driverDSN)
		dev, ino, err := statFile(s.identity.Path)
		if err != nil {
			return err
		}
		s.identity.Device, s.identity.Inode = dev, ino
		return nil
	}
	return s.read.QueryRowContext(ctx, `SELECT current_database(), COALESCE(current_schema(), ''),
		COALESCE(host(inet_server_addr()) || ':' || inet_server_port(), 'a local socket')`).
		Scan(&s.identity.Database, &s.identity.Schema, &s.identity.Server)
}

// Identity returns which database the store opened (see Identity).
func (s *Store) Identity() Identity { return s.identity }

// CheckIdentity returns an error wrapping ErrDatabaseReplaced when the
// SQLite file the store opened is no longer the file at its path (deleted,
// or another file moved there). Always nil on PostgreSQL and for a store
// made by OpenDB (whose file balde does not know). It costs one stat(2).
func (s *Store) CheckIdentity() error {
	if s.engine != SQLite || s.identity.Path == "" {
		return nil // PostgreSQL, or a pool given to OpenDB (no path known)
	}
	dev, ino, err := statFile(s.identity.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return formatError("check identity", fmt.Errorf("%w: %s is gone (it was inode %d)", ErrDatabaseReplaced, s.identity.Path, s.identity.Inode))
	case err != nil:
		return formatError("check identity", err)
	case dev != s.identity.Device || ino != s.identity.Inode:
		return formatError("check identity", fmt.Errorf("%w: %s is now inode %d on device %d, not inode %d on device %d",
			ErrDatabaseReplaced, s.identity.Path, ino, dev, s.identity.Inode, s.identity.Device))
	}
	return nil
}
