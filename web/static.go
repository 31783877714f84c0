package web

import (
	"bytes"
	_ "embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/templates"
)

// favicon is balde's icon (16x16, a bucket), served so that every page
// view does not also cost a 404.
//
//go:embed favicon.ico
var favicon []byte

// serveFavicon is GET /favicon.ico.
func (s *Server) serveFavicon(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "image/x-icon")
	http.ServeContent(w, r, "favicon.ico", time.Time{}, bytes.NewReader(favicon))
	return nil
}

// serveStatic is GET /static/{file}: the embedded stylesheet.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) error {
	name := strings.TrimPrefix(r.URL.Path, "/static/")
	if name == "" || !fs.ValidPath(name) {
		return errNotFound
	}
	b, err := fs.ReadFile(templates.FS, "static/"+name)
	if err != nil {
		return fmt.Errorf("%w: %s", errNotFound, r.URL.Path)
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	return nil
}
