package migrations

import "database/sql"

// SetBeforeCommit makes f run in every migration's transaction of m just
// before it commits; an error from f rolls it back.
func SetBeforeCommit(m *Migrator, f func(*sql.Tx) error) { m.atomic.beforeCommit = f }
