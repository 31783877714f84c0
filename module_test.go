package balde_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// adopterSteps are the steps the throwaway application runs, in order (see
// testdata/adopter/main.go).
var adopterSteps = []string{"app-schema", "sims", "migrate", "run", "handler", "middleware", "dict-transport",
	"dict-client", "sifen", "metrics", "untouched", "close", "logs"}

// Done-when of issue 10: a separate module, its go.mod replacing balde with
// this checkout, imports balde, migrates into a database that already has
// the application's own schema_migrations at version 57 and a documents
// table (both untouched after), mounts the handler and the middleware, on
// SQLite and PostgreSQL. Issue 19 adds: the engine's background jobs run
// (Engine.Run), SIFEN drafts reach approved through Run's lot polling
// against sifensim, the engine's DICT client sends through the
// application's own http.Client, the admin pages sit behind the application's own login
// inside the inbound middleware, balde's metrics are gathered from the
// application's registry beside the default one, and balde logs only
// through the application's logger. The module's requirements are balde's
// own, so it builds from what `go test ./...` here already fetched, on a
// fresh machine too.
func TestAdopterModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	checkout, err := os.Getwd()
	require.NoError(t, err)
	bin := buildAdopter(t, checkout)
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn := filepath.Join(t.TempDir(), "app.db")
		if engine == sqlstore.Postgres {
			dsn = sqlstoretest.PostgresSchema(t) // skips without BALDE_TEST_POSTGRES_DSN
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, string(engine), dsn, strings.Join(adopterSteps, ",")).CombinedOutput()
		require.NoError(t, err, "adopter: %s", out)
		var want strings.Builder
		for _, s := range adopterSteps {
			want.WriteString("ok " + s + "\n")
		}
		require.Equal(t, want.String(), string(out))
	})
}

// buildAdopter writes the throwaway module in a temporary directory and
// builds it, offline.
func buildAdopter(t *testing.T, checkout string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(checkout, "testdata", "adopter", "main.go"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644))
	sum, err := os.ReadFile(filepath.Join(checkout, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	gomod := adopterGoMod(t, checkout)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	goTool := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if os.Getenv("GOROOT") == "" {
		goTool = "go"
	}
	bin := filepath.Join(dir, "adopter")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// adopterGoMod is the throwaway module's go.mod: balde's own requirements
// (so that its module graph is the one `go test ./...` here already
// loaded, and nothing new is looked up) plus balde itself, replaced by
// this checkout. balde's tool block stays out: an adopter does not build
// balde's linters.
func adopterGoMod(t *testing.T, checkout string) string {
	t.Helper()
	own, err := os.ReadFile(filepath.Join(checkout, "go.mod"))
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString("module example.com/adopter\n\n")
	inTool := false
	for line := range strings.Lines(string(own)) {
		switch {
		case strings.HasPrefix(line, "module "):
			continue
		case strings.HasPrefix(line, "tool ("):
			inTool = true
			continue
		case inTool:
			inTool = strings.TrimSpace(line) != ")"
			continue
		case strings.HasPrefix(line, "tool "):
			continue
		}
		b.WriteString(line)
	}
	b.WriteString("\nrequire github.com/balde-throttle/balde v0.0.0\n\n")
	b.WriteString("replace github.com/balde-throttle/balde => " + checkout + "\n")
	return b.String()
}
