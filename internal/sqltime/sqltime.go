// Package sqltime converts the times balde stores in SQL: integer
// nanoseconds since the Unix epoch, NULL for the zero time ("never"). The
// throttle's store and the SIFEN documents' store share it.
package sqltime

import (
	"database/sql"
	"time"
)

// Nanos is t as stored.
func Nanos(t time.Time) int64 { return t.UnixNano() }

// NullNanos is t as stored in a nullable column: NULL for the zero time.
func NullNanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// Time is the UTC time of a stored value.
func Time(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// NullTime is the time of a nullable column: the zero time for NULL.
func NullTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return Time(n.Int64)
}
