package web_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/templates"
)

// severityClasses returns every "sev-…" class the web package's code or
// the templates can emit.
func severityClasses(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\bsev-[a-z]+\b`)
	var classes []string
	add := func(src string) {
		for _, c := range re.FindAllString(src, -1) {
			if !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		add(string(src))
	}
	require.NoError(t, fs.WalkDir(templates.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".html") {
			return err
		}
		src, err := fs.ReadFile(templates.FS, path)
		add(string(src))
		return err
	}))
	require.Contains(t, classes, "sev-critical")
	return classes
}

// severityElement is an element of a template whose class a template
// action fills with a severity: its tag and its fixed classes.
type severityElement struct {
	tag     string
	classes []string
	at      string
}

// severityElements finds the elements whose class attribute takes a
// severity from the data (class="badge {{.SevClass}}", class="{{.Class}}",
// class="card{{if …}} sev-high{{end}}"), not a state or a banner kind.
func severityElements(t *testing.T) []severityElement {
	t.Helper()
	tagRe := regexp.MustCompile(`<([a-z0-9]+)\b[^>]*?\bclass="((?:[^"{]|\{\{[^}]*\}\})*)"`)
	sevRe := regexp.MustCompile(`(^|\s)\{\{\s*\$?\.(?:[A-Za-z.]*\.)?(Class|SevClass|StatusClass)\s*\}\}|sev-`)
	var out []severityElement
	require.NoError(t, fs.WalkDir(templates.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".html") {
			return err
		}
		src, err := fs.ReadFile(templates.FS, path)
		if err != nil {
			return err
		}
		for _, m := range tagRe.FindAllStringSubmatch(string(src), -1) {
			if !sevRe.MatchString(m[2]) {
				continue
			}
			fixed := regexp.MustCompile(`\{\{.*?\}\}`).ReplaceAllString(m[2], " ")
			var classes []string
			for _, c := range strings.Fields(fixed) {
				if !strings.HasPrefix(c, "sev-") {
					classes = append(classes, c)
				}
			}
			out = append(out, severityElement{tag: m[1], classes: classes, at: path + ": " + m[0]})
		}
		return nil
	}))
	return out
}

// cssSubjects returns the last compound selector of every rule of the
// stylesheet ("table.buckets tr.sev-high" → "tr.sev-high").
func cssSubjects(t *testing.T) []string {
	t.Helper()
	css, err := fs.ReadFile(templates.FS, "static/style.css")
	require.NoError(t, err)
	src := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(string(css), "")
	src = regexp.MustCompile(`@media[^{]*\{`).ReplaceAllString(src, "")
	var subjects []string
	for _, m := range regexp.MustCompile(`([^{}]+)\{[^{}]*\}`).FindAllStringSubmatch(src, -1) {
		for _, sel := range strings.Split(m[1], ",") {
			parts := strings.Fields(sel)
			if len(parts) > 0 {
				subjects = append(subjects, parts[len(parts)-1])
			}
		}
	}
	return subjects
}

// covers reports whether a compound selector (td.sev-critical,
// .badge.sev-high) styles the element carrying class: it names class and
// nothing the element lacks.
func covers(subject string, e severityElement, class string) bool {
	tag, rest, _ := strings.Cut(subject, ".")
	if tag != "" && tag != e.tag {
		return false
	}
	names := strings.Split(rest, ".")
	if !slices.Contains(names, class) {
		return false
	}
	for _, n := range names {
		if n != class && !slices.Contains(e.classes, n) {
			return false
		}
	}
	return true
}

// What was seen: the summary panel's "404 share 39.3 % suspicious"
// (sev-critical on a <td>) rendered in plain black, since the stylesheet
// had rules for .card, .badge, .fill-bar and table rows only.
func TestEverySeverityClassHasACSSRule(t *testing.T) {
	classes := severityClasses(t)
	elements := severityElements(t)
	require.NotEmpty(t, elements)
	subjects := cssSubjects(t)
	for _, e := range elements {
		for _, class := range classes {
			found := slices.ContainsFunc(subjects, func(s string) bool { return covers(s, e, class) })
			require.Truef(t, found, "no CSS rule styles %s on %s", class, e.at)
		}
	}
}
