package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Against a DICT that is not a simulator nothing is assumed: serve,
// dict-lookup, dict-reconcile and gateway dict without the participant's
// ISPB, without GET /policies/'s host when the DICT's URL is not one it
// derives from, or without the certificate of the DICT's answers (nor
// --dict-unverified) exit 2 with one line naming the variable and its
// flag, before any database is created. Before, the example ISPB
// 12345678 was the default and answers went unverified.
func TestGoingLiveNeedsEveryValue(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.csv")
	require.NoError(t, os.WriteFile(keys, []byte("key,payer\nmaria@example.com,11144477735\n"), 0o600))
	commands := map[string][]string{
		"serve":          {"serve"},
		"dict-lookup":    {"dict-lookup", keys},
		"dict-reconcile": {"dict-reconcile"},
		"gateway dict":   {"gateway", "dict"},
	}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no ISPB", map[string]string{"BALDE_DICT_URL": "https://dict.pi.rsfn.net.br:16422", "BALDE_DICT_UNVERIFIED": "on"},
			"BALDE_DICT_PARTICIPANT (--dict-participant) is not set"},
		{"policies host not derivable", map[string]string{"BALDE_DICT_URL": "https://dict-proxy.psp.example:8443",
			"BALDE_DICT_PARTICIPANT": "60701190", "BALDE_DICT_UNVERIFIED": "on"},
			"BALDE_DICT_POLICIES_URL (--dict-policies-url) is not set"},
		{"answers unverified", map[string]string{"BALDE_DICT_URL": "https://dict.pi.rsfn.net.br:16422", "BALDE_DICT_PARTICIPANT": "60701190"},
			"BALDE_DICT_VERIFY_CERT is not set"},
	}
	for name, args := range commands {
		for _, tt := range cases {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "balde.db")
				env := map[string]string{"BALDE_DB": "sqlite://" + db, "BALDE_ADMIN_PASSWORD": "a-long-enough-password"}
				for k, v := range tt.env {
					env[k] = v
				}
				code, _, stderr := run(t, env, args...)
				require.Equal(t, ExitUsage, code, stderr)
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				require.Len(t, lines, 1, stderr)
				require.Contains(t, lines[0], tt.want)
				require.NoFileExists(t, db, "nothing created")
			})
		}
	}
}
