package web_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/templates"
)

// untranslatedWords finds the words a reader sees in a template source
// that do not go through the catalog: the text between tags and the
// values of the attributes read out (aria-label, title, placeholder,
// alt), after removing every template action ({{...}}, whose strings go
// through .T.Sprintf or are data), <style> and <script>. Words in keep —
// names that are the same in every language — are allowed.
func untranslatedWords(src string, keep map[string]bool) []string {
	src = regexp.MustCompile(`(?s)\{\{.*?\}\}`).ReplaceAllString(src, " ")
	src = regexp.MustCompile(`(?is)<(style|script)\b.*?</(style|script)>`).ReplaceAllString(src, " ")
	var visible []string
	for _, m := range regexp.MustCompile(`(?i)\b(?:aria-label|title|placeholder|alt)="([^"]*)"`).FindAllStringSubmatch(src, -1) {
		visible = append(visible, m[1])
	}
	visible = append(visible, regexp.MustCompile(`(?s)<[^>]*>`).Split(src, -1)...)
	var out []string
	for _, text := range visible {
		text = regexp.MustCompile(`&[a-z]+;|&#\d+;`).ReplaceAllString(text, " ")
		for _, w := range regexp.MustCompile(`\p{L}[\p{L}'-]*`).FindAllString(text, -1) {
			if !keep[w] {
				out = append(out, w)
			}
		}
	}
	return out
}

// What was seen: the reset confirmation, the error page and parts of a
// bucket's page were English in every language. No page template may show
// a word that does not go through the catalog ({{.T.Sprintf "…"}}).
func TestTemplatesHaveNoUntranslatedText(t *testing.T) {
	// Names, not words: the same in every language.
	keep := map[string]bool{"balde": true, "DICT": true, "SIFEN": true, "RUC": true, "CDC": true, "UTC": true, "XML": true, "Id": true, "EndToEndId": true}
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"translated", `<p>{{.T.Sprintf "Reset this bucket?"}}</p>`, nil},
		{"plain text", `<h1>Reset this bucket?</h1>`, []string{"Reset", "this", "bucket"}},
		{"read-out attribute", `<nav aria-label="ledger pages">{{.X}}</nav>`, []string{"ledger", "pages"}},
		{"names and data", `<p>SIFEN {{.Status}} &middot; {{.T.Sprintf "Older »"}}</p>`, nil},
		{"inside a condition", `{{if .X}}<a>Older »</a>{{end}}`, []string{"Older"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, untranslatedWords(tc.src, keep))
		})
	}
	found := map[string][]string{}
	err := fs.WalkDir(templates.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".html") {
			return err
		}
		src, err := fs.ReadFile(templates.FS, path)
		require.NoError(t, err)
		if words := untranslatedWords(string(src), keep); len(words) > 0 {
			found[path] = words
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "templates showing words outside the catalog")
}
