package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeRunMovesTheSimulators reads what "make run" would run (make -n):
// the binary built first and run directly (so that Ctrl-C ends it, not a
// "go run" that make reports as "Error 1"), the simulators on ports clear
// of the gateways' defaults, moved by make variables or by the
// environment's BALDE_*_SIM_ADDR.
func TestMakeRunMovesTheSimulators(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found")
	}
	tests := []struct {
		name       string
		args, env  []string
		dict, sifn string
	}{
		{"defaults", nil, nil, "127.0.0.1:8091", "127.0.0.1:8092"},
		{"make variables", []string{"DICT_SIM_ADDR=127.0.0.1:9191", "SIFEN_SIM_ADDR=127.0.0.1:9192"}, nil, "127.0.0.1:9191", "127.0.0.1:9192"},
		{"environment", nil, []string{"BALDE_DICT_SIM_ADDR=127.0.0.1:9291", "BALDE_SIFEN_SIM_ADDR=127.0.0.1:9292"}, "127.0.0.1:9291", "127.0.0.1:9292"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// --no-print-directory: under a make of its own (make
			// test-under-load) make would print "Entering directory" first.
			cmd := exec.Command("make", append([]string{"-s", "-n", "--no-print-directory", "-C", "../..", "run"}, tt.args...)...)
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.Contains(t, lines[0], "go build", "the binary is built first")
			last := lines[len(lines)-1]
			require.Equal(t, "./bin/balde serve --dict-sim-addr "+tt.dict+" --sifen-sim-addr "+tt.sifn, last)
			require.NotContains(t, last, DefaultGatewayAddr)
			require.NotContains(t, last, DefaultSifenGatewayAddr)
		})
	}
}
