package sifensim_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsNoClientSide: the simulator is an oracle only if it shares no
// code with the client it judges (issue 11): no package of balde at all.
func TestImportsNoClientSide(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/balde-throttle/balde") && p != "github.com/balde-throttle/balde/sifen/sifensim" &&
			p != "github.com/balde-throttle/balde/internal/simkit" {
			ours = append(ours, p)
		}
	}
	require.Empty(t, ours, "sifensim must import nothing of balde (sifen, throttle, throttle/sqlstore, migrations, ...)")
}
