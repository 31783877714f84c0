package balde_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsLinksResolve: every relative link of the README and the guides
// names a file of the repository (a reader following one lands somewhere).
func TestDocsLinksResolve(t *testing.T) {
	guides, err := filepath.Glob("docs/guides/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, guides)
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, doc := range append([]string{"README.md"}, guides...) {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(doc), target))
			require.NoError(t, err, "%s links to %s", doc, target)
		}
	}
}

// TestReadmeIsAFrontPage: the README stays a front page — at most 300
// lines, with the Go example in its first 100 — and links every guide.
func TestReadmeIsAFrontPage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Split(string(readme), "\n")
	require.LessOrEqual(t, len(lines), 300, "README.md: move detail into docs/guides")
	goBlock := -1
	for i, l := range lines {
		if l == "```go" {
			goBlock = i + 1
			break
		}
	}
	require.Positive(t, goBlock, "README.md shows Go code")
	require.LessOrEqual(t, goBlock, 100, "the Go example starts in the first 100 lines")

	guides, err := filepath.Glob("docs/guides/*.md")
	require.NoError(t, err)
	for _, g := range guides {
		require.Contains(t, string(readme), "("+g+")", "README.md links %s", g)
	}
}
