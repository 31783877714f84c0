package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/report"
)

func TestSummaryExit(t *testing.T) {
	require.NoError(t, batchExit("x", report.Summary{Total: 2, Sent: 1, Skipped: 1}, i18n.New(i18n.English, nil)))
	err := batchExit("x", report.Summary{Total: 5, Sent: 1, Blocked: 2, Failed: 1, NotProcessed: 1, Interrupted: true}, i18n.New(i18n.English, nil))
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitFailed, ee.Code)
	require.EqualError(t, err, "x: 4 of 5 not done: 2 blocked, 1 failed, 1 not processed (interrupted)")
}
