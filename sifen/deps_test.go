package sifen_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDomainImportsNoDatabaseDriver: importing sifen does not pull in a
// database driver or migrations (issue 10 item 8); the SQL lives in
// sifen/sifensql.
func TestDomainImportsNoDatabaseDriver(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/golang-migrate", "github.com/jmoiron/sqlx", "database/sql",
			"github.com/balde-throttle/balde/throttle/sqlstore", "github.com/balde-throttle/balde/migrations"} {
			if strings.HasPrefix(p, banned) {
				bad = append(bad, p)
			}
		}
	}
	require.Empty(t, bad)
}
