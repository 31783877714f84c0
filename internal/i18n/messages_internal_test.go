package i18n

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every message has both translations, with the same verbs as the key.
func TestCatalogIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range messages {
		require.False(t, seen[m[0]], "%q twice", m[0])
		seen[m[0]] = true
		for i, tr := range m[1:] {
			require.NotEmpty(t, tr, "%q has no translation %d", m[0], i+1)
			require.Equal(t, strings.Count(m[0], "%"), strings.Count(tr, "%"), "%q → %q: the verbs differ", m[0], tr)
		}
	}
}
