package migrations

import (
	"context"
	"database/sql"
)

// SetBeforeCommit makes f run in every migration's transaction of m just
// before it commits; an error from f rolls it back.
func SetBeforeCommit(m *Migrator, f func(*sql.Tx) error) { m.atomic.beforeCommit = f }

var FS = sqlFiles

type Repair = repairResult

// RepairOf is m.repair.
func RepairOf(ctx context.Context, m *Migrator) (Repair, error) { return m.repair(ctx) }
