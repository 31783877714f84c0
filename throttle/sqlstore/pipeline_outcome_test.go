package sqlstore_test

import (
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
)

// TestPipelineOutcome: a pipelined write and COMMIT is retried only when it
// certainly did not apply. A session terminated right after its COMMIT
// (FATAL 57P01 read where ReadyForQuery was expected) committed: before,
// that error was retried as transient and the decisions applied twice (a
// DICT refund twice under the 30 ms kill storm: the DICT answered 429).
func TestPipelineOutcome(t *testing.T) {
	terminated := &pgconn.PgError{Severity: "FATAL", Code: "57P01"}
	for _, tc := range []struct {
		name                          string
		writeErr, commitErr, closeErr error
		wantNil, wantInDoubt          bool
		wantTransient                 bool
	}{
		{name: "Committed", wantNil: true},
		{name: "CommittedThenTerminated", closeErr: terminated, wantNil: true},
		{name: "WriteRefusedRetried", writeErr: &pgconn.PgError{Code: "40001"}, wantTransient: true},
		{name: "TerminatedDuringWriteRetried", writeErr: terminated, wantTransient: true},
		{name: "WriteWithoutAnswerInDoubt", writeErr: io.ErrUnexpectedEOF, wantInDoubt: true},
		{name: "CommitRolledBackRetried", commitErr: &pgconn.PgError{Code: "40001"}, wantTransient: true},
		{name: "TerminatedAtCommitInDoubt", commitErr: terminated, wantInDoubt: true},
		{name: "CommitWithoutAnswerInDoubt", commitErr: io.EOF, closeErr: io.EOF, wantInDoubt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sqlstore.PipelineOutcome(pgxDriver(t), tc.writeErr, tc.commitErr, tc.closeErr)
			if tc.wantNil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, tc.wantInDoubt, errors.Is(err, sqlstore.ErrCommitInDoubt), "%v", err)
			require.Equal(t, tc.wantTransient, sqlstore.Transient(pgxDriver(t), err), "%v", err)
		})
	}
}
