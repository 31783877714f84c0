package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/migrations"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// lineWriter hands every line written to it to lines, so a test can wait
// for what a running command prints.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 100)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // not a whole line yet
			return len(p), nil
		}
		select {
		case w.lines <- strings.TrimSuffix(line, "\n"):
		default: // nobody is reading: drop
		}
	}
}

// waitLine returns the first group of the first line matching re, failing
// the test after 10 s.
func (w *lineWriter) waitLine(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line := <-w.lines:
			if m := re.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		case <-deadline:
			t.Fatalf("no line matching %s within 10 s", re)
		}
	}
}

// servingMain is "balde serve" running in the test process, the way
// wtf's and litestream's main_test start their binaries.
type servingMain struct {
	url    string
	stdout *lineWriter
	cancel context.CancelFunc
	done   chan int
	// before are the lines printed before "listening on".
	before []string
}

var (
	listeningLine = regexp.MustCompile(`^balde: listening on (http://\S+)$`)
	passwordLine  = regexp.MustCompile(`generated password .*: (\S+)$`)
)

// runServeMain starts serve on 127.0.0.1:0 with env and waits until it
// listens. It is stopped at cleanup (the context is canceled, as Ctrl-C
// does) and must exit 0.
func runServeMain(t *testing.T, env map[string]string, args ...string) *servingMain {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sm := &servingMain{stdout: newLineWriter(), cancel: cancel, done: make(chan int, 1)}
	m := NewMain(strings.NewReader(""), sm.stdout, io.Discard, func(k string) string { return env[k] })
	// --create: each test's database is new (serve refuses to create one
	// without it, see TestServeRefusesToCreateAMissingDatabase).
	go func() { sm.done <- m.Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--create"}, args...)) }()
	urlCh := make(chan string, 1)
	go func() {
		for line := range sm.stdout.lines {
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				urlCh <- m[1]
				return
			}
			sm.before = append(sm.before, line)
		}
	}()
	select {
	case sm.url = <-urlCh:
	case code := <-sm.done:
		cancel()
		t.Fatalf("serve exited with %d before listening", code)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("serve did not listen within 10 s")
	}
	t.Cleanup(func() { require.Equal(t, ExitOK, sm.stop(t)) })
	return sm
}

// stop cancels serve and returns its exit code (once; later calls return
// the same code).
func (sm *servingMain) stop(t *testing.T) int {
	t.Helper()
	sm.cancel()
	select {
	case code := <-sm.done:
		sm.done <- code
		return code
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15 s")
		return -1
	}
}

func get(t *testing.T, url, user, pass string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestServeEndToEnd(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{
		"BALDE_DB":             db,
		"BALDE_ADMIN_USER":     "ops",
		"BALDE_ADMIN_PASSWORD": "pa55word",
	})

	resp, page := get(t, sm.url+"/admin/buckets", "ops", "pa55word")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Bucket states")
	require.Contains(t, page, "signed in as <strong>ops</strong>")
	// The admin's own request went through the inbound limiter, charged
	// to the admin's generous bucket rather than the public per-IP one.
	require.Equal(t, `"admin";q=1200;w=60`, resp.Header.Get("RateLimit-Policy"))

	resp, _ = get(t, sm.url+"/admin/buckets", "ops", "wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, _ = get(t, sm.url+"/api/buckets?policy=INBOUND_IP", "ops", "pa55word")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, body := get(t, sm.url+"/healthz", "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	resp, body = get(t, sm.url+"/metrics", "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `balde_throttle_decisions_total{policy="INBOUND_IP",result="allowed"}`)

	// serve applied the migrations.
	require.NoError(t, alldrivers.Migrate(t.Context(), db, func(m *migrations.Migrator) error {
		v, dirty, err := m.Version()
		require.False(t, dirty)
		latest, _ := migrations.Latest(sqlstore.SQLite)
		require.Equal(t, latest, v)
		return err
	}))

	require.Equal(t, ExitOK, sm.stop(t))
	_, err := http.Get(sm.url + "/healthz")
	require.Error(t, err, "stopped")
}

func TestServeGeneratesAPassword(t *testing.T) {
	sm := runServeMain(t, map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "b.db")})
	password := sm.stdout.waitLine(t, passwordLine)
	require.GreaterOrEqual(t, len(password), 20)

	resp, _ := get(t, sm.url+"/admin/buckets", "admin", password)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get(t, sm.url+"/admin/buckets", "admin", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the admin is never open")
}

func TestServeFlagsOverrideEnv(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("# monitors\nmon-token=7/30s\n"), 0o600))
	sm := runServeMain(t, map[string]string{
		"BALDE_DB":                  "sqlite://" + filepath.Join(t.TempDir(), "env.db"),
		"BALDE_ADMIN_PASSWORD":      "pw",
		"BALDE_INBOUND_IP_LIMIT":    "50",
		"BALDE_INBOUND_TOKENS_FILE": tokens,
	}, "--inbound-ip-limit", "9", "--admin-user", "flaguser")

	// An anonymous request is charged to its IP (an authenticated admin is
	// charged to the admin's bucket only).
	resp, err := http.Get(sm.url + "/policies/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, `"ip";q=9;w=60`, resp.Header.Get("RateLimit-Policy"))
	resp, _ = get(t, sm.url+"/api/buckets", "flaguser", "pw")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, resp.Header.Get("RateLimit-Policy"), `"ip"`)

	// A request with an API token (and no admin credential) is charged to
	// the token.
	req, err := http.NewRequest(http.MethodGet, sm.url+"/policies/", nil)
	require.NoError(t, err)
	req.Header.Set("API_KEY", "mon-token")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, `"token";q=7;w=30`, resp.Header.Get("RateLimit-Policy"))
}

func TestServeUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"BadWindow", map[string]string{"BALDE_INBOUND_WINDOW": "soon"}, nil, "BALDE_INBOUND_WINDOW"},
		{"BadTokens", map[string]string{"BALDE_INBOUND_TOKENS": "tok=lots"}, nil, "BALDE_INBOUND_TOKENS"},
		{"BadProxies", map[string]string{"BALDE_TRUSTED_PROXIES": "the proxy"}, nil, "BALDE_TRUSTED_PROXIES"},
		{"BadFailMode", map[string]string{"BALDE_INBOUND_FAIL": "maybe"}, nil, "BALDE_INBOUND_FAIL"},
		{"BadPath", map[string]string{"BALDE_INBOUND_PATHS": "api"}, nil, "BALDE_INBOUND_PATHS"},
		{"IPLimitTooBig", nil, []string{"--inbound-ip-limit", "20000"}, `"20000" is not a number of requests in 0..10000`},
		{"WindowFlagZero", nil, []string{"--inbound-window", "0"}, "-inbound-window"},
		{"UnknownFlag", nil, []string{"--inbound-limit", "5"}, "flag provided but not defined: -inbound-limit (see balde serve --help)"},
		{"MissingTokensFile", map[string]string{"BALDE_INBOUND_TOKENS_FILE": "/nonexistent/tokens"}, nil, "BALDE_INBOUND_TOKENS_FILE"},
		{"BadBcrypt", map[string]string{"BALDE_ADMIN_PASSWORD_BCRYPT": "plain"}, nil, "hash"},
		{"ExtraArgument", nil, []string{"now"}, `unexpected argument "now"`},
		{"BadDSN", nil, []string{"--db", "mysql://x"}, "unsupported DSN scheme"},
		{"BadParticipant", map[string]string{"BALDE_DICT_PARTICIPANT": "1234"}, nil, "--dict-participant"},
		{"BadCategory", nil, []string{"--dict-category", "Z!"}, "--dict-category"},
		{"ReconcileTooOften", map[string]string{"BALDE_DICT_RECONCILE_EVERY": "1s"}, nil, "BALDE_DICT_RECONCILE_EVERY"},
		{"BadPrune", map[string]string{"BALDE_PRUNE_EVERY": "sometimes"}, nil, "BALDE_PRUNE_EVERY"},
		{"BadSifenURL", nil, []string{"--sifen-url", "ftp://sifen/{env}"}, "--sifen-url"},
		{"BadDictURL", map[string]string{"BALDE_DICT_URL": "dict.example"}, nil, `BALDE_DICT_URL (--dict-url) "dict.example" is not an http(s) URL with a host`},
		{"BadBlockStep", map[string]string{"BALDE_SIFEN_BLOCK_STEP": "ten minutes"}, nil, "BALDE_SIFEN_BLOCK_STEP"},
		{"BlockMaxBelowStep", map[string]string{"BALDE_SIFEN_BLOCK_STEP": "30m"}, []string{"--sifen-block-max", "20m"}, "BALDE_SIFEN_BLOCK_MAX (--sifen-block-max) 20m0s is shorter than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"BALDE_DB": "sqlite://" + filepath.Join(t.TempDir(), "u.db")}
			for k, v := range tt.env {
				env[k] = v
			}
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--create"}, tt.args...)
			code, _, errOut := run(t, env, args...)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, tt.want)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "one line on stderr")
		})
	}
}

func TestServeStoreUnavailable(t *testing.T) {
	code, _, errOut := run(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	require.Equal(t, ExitUnavailable, code, errOut)
}

func TestStoreHealth(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		dsn := sqlstoretest.DSN(t, engine)
		eng, err := balde.Open(t.Context(), balde.Config{DB: dsn})
		require.NoError(t, err)
		defer eng.Close(t.Context())
		store, health := eng.Store(), eng.CheckHealth
		require.NoError(t, health(t.Context()))

		// One migration behind: unhealthy.
		require.NoError(t, alldrivers.Migrate(t.Context(), dsn, func(m *migrations.Migrator) error { return m.Down() }))
		require.ErrorContains(t, health(t.Context()), "want")
		require.NoError(t, alldrivers.Migrate(t.Context(), dsn, func(m *migrations.Migrator) error { return m.Up() }))
		require.NoError(t, health(t.Context()))

		// The store is gone: unhealthy, as a store failure.
		require.NoError(t, store.Close())
		require.ErrorIs(t, health(t.Context()), throttle.ErrStoreUnavailable)
	})
}
