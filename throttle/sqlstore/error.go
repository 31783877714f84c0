package sqlstore

import "github.com/balde-throttle/balde/internal/sqlkit"

// formatError is sqlkit.StoreError of package sqlstore.
func formatError(op string, err error) error { return sqlkit.StoreError("sqlstore", op, err) }
