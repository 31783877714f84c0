package pgxdriver_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore/internal/driverkit"
	"github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
)

// TestClassify: what each SQLSTATE the store acts on means (decision 0020's
// rules, unchanged by the move of the codes into this package).
func TestClassify(t *testing.T) {
	const (
		server    = driverkit.ClassServer
		transient = driverkit.ClassTransient
		race      = driverkit.ClassLostRace
		broken    = driverkit.ClassBrokenConn
		rolled    = driverkit.ClassCommitFailed
		timeout   = driverkit.ClassTimeout
	)
	for _, tc := range []struct {
		name string
		err  error
		want driverkit.ErrorClass
	}{
		{"SerializationFailure", &pgconn.PgError{Code: "40001"}, server | transient | race | rolled},
		{"Deadlock", &pgconn.PgError{Code: "40P01"}, server | transient | race | rolled},
		{"StatementCompletionUnknown", &pgconn.PgError{Code: "40003"}, server},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, server | race},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, server | transient | broken},
		{"CrashShutdown", &pgconn.PgError{Code: "57P02"}, server | transient | broken},
		{"CannotConnectNow", &pgconn.PgError{Code: "57P03"}, server | transient | broken},
		{"QueryCanceled", &pgconn.PgError{Code: "57014"}, server | timeout},
		{"LockTimeout", &pgconn.PgError{Code: "55P03"}, server | timeout},
		{"DivisionByZero", &pgconn.PgError{Code: "22012"}, server},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, server | transient | broken},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, server | transient},
		{"SyntaxError", &pgconn.PgError{Code: "42601"}, server},
		{"Wrapped", fmt.Errorf("write: %w", &pgconn.PgError{Code: "40001"}), server | transient | race | rolled},
		{"ConnectError", &pgconn.ConnectError{}, transient},
		{"NotPostgres", io.ErrUnexpectedEOF, 0},
		{"Plain", errors.New("something else"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, pgxdriver.Driver.Classify(tc.err))
		})
	}
}
