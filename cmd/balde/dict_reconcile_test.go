package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
)

// newCategoryHSim is a DICT simulator whose participants are category H,
// served on loopback until the test ends.
func newCategoryHSim(t *testing.T) (*dictsim.Server, *httptest.Server) {
	t.Helper()
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
		Category: "H",
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	hs := httptest.NewServer(sim)
	t.Cleanup(func() {
		hs.Close()
		require.NoError(t, sim.Close())
	})
	return sim, hs
}

func TestDictReconcile(t *testing.T) {
	sim, hs := newCategoryHSim(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")

	// Another app spends one KEYS_CHECK token at the DICT.
	body, err := dict.Marshal(&dict.CheckKeysRequest{Keys: []string{"+5561988880000"}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, hs.URL+dict.APIPrefix+"/keys/check", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(dict.HeaderRequestingParticipant, "12345678")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	code, out, errOut := run(t, nil, "dict-reconcile", "--db", db, "--dict-url", hs.URL, "--dict-participant", "12345678")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "category H (changed); 28 policies at the DICT")
	require.Contains(t, out, "lowered KEYS_CHECK/prod/12345678 by 1 to 69")

	// The category was recorded: the next run starts from H.
	code, out, errOut = run(t, map[string]string{"BALDE_DICT_URL": hs.URL, "BALDE_DB": db}, "dict-reconcile")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "category H; 28 policies at the DICT, 0 local buckets lowered")

	// A catalog that allows one reconciliation: the policy differs from the
	// DICT's, and the second run is refused locally, sending nothing.
	policies := writeFile(t, t.TempDir(), "policies.json",
		[]byte(`{"dict": {"policies": {"POLICIES_LIST": {"capacity": 1, "refill_tokens": 1}}}}`))
	args := []string{"dict-reconcile", "--db", "sqlite://" + filepath.Join(t.TempDir(), "strict.db"), "--dict-url", hs.URL, "--policies", policies}
	code, out, errOut = run(t, nil, args...)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "mismatch POLICIES_LIST: local 1/60s capacity 1, remote 6/60s capacity 20\n")
	sent := sim.Stats().Count(dict.OpListBucketStates, http.StatusOK)
	code, out, errOut = run(t, nil, args...)
	require.Equal(t, ExitFailed, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "listBucketStates refused locally")
	require.Equal(t, sent, sim.Stats().Count(dict.OpListBucketStates, http.StatusOK))
}

// TestDictReconcilePoliciesHost: with --dict-policies-url, GET /policies/
// goes to that host (the DICT's rate-limit host in the public spec), not
// to --dict-url, where nothing listens here.
func TestDictReconcilePoliciesHost(t *testing.T) {
	sim, hs := newCategoryHSim(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	tests := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"Flag", nil, []string{"--dict-policies-url", hs.URL}},
		{"Env", map[string]string{"BALDE_DICT_POLICIES_URL": hs.URL + "/api/v2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := sim.Stats().Count(dict.OpListBucketStates, http.StatusOK)
			args := append([]string{"dict-reconcile", "--db", db, "--dict-url", "http://127.0.0.1:1"}, tt.args...)
			code, out, errOut := run(t, tt.env, args...)
			require.Equal(t, ExitOK, code, errOut)
			require.Contains(t, out, "28 policies at the DICT")
			require.Equal(t, before+1, sim.Stats().Count(dict.OpListBucketStates, http.StatusOK))
		})
	}
}

func TestDictReconcileUsage(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"NoURL", nil, nil, "no DICT URL configured (set --dict-url or BALDE_DICT_URL)"},
		{"BadParticipant", nil, []string{"--dict-url", "http://127.0.0.1:1", "--dict-participant", "1234"}, "--dict-participant"},
		{"BadCategory", nil, []string{"--dict-url", "http://127.0.0.1:1", "--dict-category", "A B"}, "--dict-category"},
		{"BadPolicyFile", nil, []string{"--dict-url", "http://127.0.0.1:1", "--policies", "missing.json"}, "invalid policy file"},
		{"BadURL", nil, []string{"--dict-url", "ftp://x", "--db", "sqlite://" + filepath.Join(t.TempDir(), "x.db")}, "not an http(s) URL"},
		{"Arguments", nil, []string{"now"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.env, append([]string{"dict-reconcile"}, tt.args...)...)
			require.Equal(t, ExitUsage, code)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			require.Len(t, lines, 1, errOut)
			require.Contains(t, lines[0], tt.want)
		})
	}

	code, helpOut, _ := run(t, nil, "dict-reconcile", "--help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, helpOut, "balde dict-reconcile --dict-url https://dict.pi.rsfn.net.br:16422 --dict-policies-url")
}
