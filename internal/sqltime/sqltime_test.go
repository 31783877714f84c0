package sqltime_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/sqltime"
)

func TestRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 29, 5, 0, 0, 123456789, time.FixedZone("PYT", -3*3600))
	require.Equal(t, at.UTC(), sqltime.Time(sqltime.Nanos(at)))
	require.Equal(t, at.UTC(), sqltime.NullTime(sqltime.NullNanos(at)))
	require.Equal(t, sql.NullInt64{}, sqltime.NullNanos(time.Time{}), "never is NULL")
	require.True(t, sqltime.NullTime(sql.NullInt64{}).IsZero())
}
