package web

import (
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/templates"
)

func pagesFS(pages map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"layout.html":       {Data: []byte(`{{define "base"}}<title>{{template "title" .}}</title>{{template "content" .}}{{end}}`)},
		"partials/nav.html": {Data: []byte(`{{define "nav"}}{{end}}`)},
	}
	for name, text := range pages {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}

const okPage = `{{define "title"}}t{{end}}{{define "content"}}{{.Message}}{{end}}`

func TestParsePages(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		declared []string
		want     string
	}{
		{"Undeclared", map[string]string{"a.html": okPage, "b.html": okPage}, []string{"a.html"}, "b.html is not declared"},
		{"Missing", map[string]string{"a.html": okPage}, []string{"a.html", "c.html"}, "c.html does not exist"},
		{"NoContent", map[string]string{"a.html": `{{define "title"}}t{{end}}`}, []string{"a.html"}, `does not define "content"`},
		{"Syntax", map[string]string{"a.html": `{{define "title"}}{{.X`}, []string{"a.html"}, "a.html"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePages(pagesFS(tt.files), tt.declared)
			require.ErrorContains(t, err, tt.want)
		})
	}
	// The real templates parse.
	_, err := parsePages(templates.FS, pageFiles)
	require.NoError(t, err)
}

type brokenPage struct{ Message string }

func (brokenPage) templateFile() string { return "broken.html" }

func TestRenderErrorWritesNothing(t *testing.T) {
	// The page calls a method the data lacks: an execution error after
	// some output was produced.
	pages, err := parsePages(pagesFS(map[string]string{
		"broken.html": `{{define "title"}}t{{end}}{{define "content"}}{{.Message}} and {{.Missing}}{{end}}`,
	}), []string{"broken.html"})
	require.NoError(t, err)
	s := &Server{pages: pages}
	rec := httptest.NewRecorder()
	err = s.render(rec, http.StatusOK, brokenPage{Message: "half"})
	require.ErrorContains(t, err, "broken.html")
	require.Zero(t, rec.Body.Len(), "not half a page")
	require.Empty(t, rec.Header().Get("Content-Type"))
}

func TestErrorFallsBackToText(t *testing.T) {
	// Without error.html the error page cannot render: plain text instead.
	s := NewServer()
	s.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	s.pages = map[string]*template.Template{}
	rec := httptest.NewRecorder()
	s.Error(rec, httptest.NewRequest("GET", "/admin/buckets", nil), errors.New("boom"))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, "500 Internal Server Error: internal error\n", rec.Body.String())
}
