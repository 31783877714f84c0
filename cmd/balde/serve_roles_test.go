package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/report"
)

// serve with users from BALDE_USERS and --users-file: the viewer reads and
// is refused a reset (403); the admin of the file resets with a reason,
// and the Audit page names who did it and why.
func TestServeUsersAndAudit(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "balde.db")
	users := filepath.Join(dir, "users")
	require.NoError(t, os.WriteFile(users, []byte("# the lead\nlead:admin:lead-pw\n"), 0o600))
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_USERS": "oncall:viewer:oncall-pw"},
		"--users-file", users)
	viewer := newAdminClient(t, sm.url, "oncall", "oncall-pw")
	lead := newAdminClient(t, sm.url, "lead", "lead-pw")
	admin := newAdminClient(t, sm.url, "admin", "pw")

	// A lookup drains the payer's bucket a little: a row to reset.
	resp, _ := admin.postForm("/dict/lookup", url.Values{"key": {"11144477735"}, "payer_id": {"52998224725"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	reset := "/admin/buckets/ENTRIES_READ_USER_ANTISCAN_V2/prod/52998224725/reset"

	resp, page := viewer.get("/admin/buckets")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Read-only")
	resp, page = viewer.postForm(reset, url.Values{"confirm": {"yes"}, "reason": {"try"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, page, "this action needs the admin role")

	resp, _ = lead.postForm(reset, url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a reset needs a reason")
	resp, _ = lead.postForm(reset, url.Values{"confirm": {"yes"}, "reason": {"payer fixed the typo"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	resp, page = viewer.get("/admin/audit?action=reset")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<td class="user">lead</td>`)
	require.Contains(t, page, "payer fixed the typo")
	_, page = viewer.get("/admin/audit?action=dict-lookup")
	require.Contains(t, page, `<td class="user">admin</td>`)
	require.Equal(t, ExitOK, sm.stop(t))
}

// balde prune counts (--dry-run) and removes the audit entries past the
// retention, by their own time.
func TestPruneAuditEntries(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	clock := newFakeTime(testEpoch)
	seedBuckets(t, db, clock)
	env := map[string]string{"BALDE_DB": db, "USER": "bob"}
	ctx := context.Background()
	code, _, stderr := runIn(ctx, clock, "", env, "buckets", "reset", "--yes", "--reason", "drill", seededParticipant.String())
	require.Equal(t, ExitOK, code, stderr)
	require.Len(t, auditTrail(t, db, clock), 1)

	clock.Advance(48 * time.Hour)
	code, stdout, stderr := runIn(ctx, clock, "", env, "prune", "--json", "--retention", "24h", "--dry-run")
	require.Equal(t, ExitOK, code, stderr)
	require.Equal(t, int64(1), decodeJSON[report.PruneRecord](t, stdout).AuditRows)
	require.Len(t, auditTrail(t, db, clock), 1, "a dry run removes nothing")
	code, stdout, stderr = runIn(ctx, clock, "", env, "prune", "--retention", "24h")
	require.Equal(t, ExitOK, code, stderr)
	require.Contains(t, stdout, "removed 1 audit entries older than 24h0m0s\n")
	require.Empty(t, auditTrail(t, db, clock))
}
