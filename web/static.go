package web

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/balde-throttle/balde/templates"
)

// serveStatic is GET /static/{file}: the embedded stylesheet.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) error {
	name := strings.TrimPrefix(r.URL.Path, s.path("static"))
	if name == "" || !fs.ValidPath(name) {
		return ErrNotFound
	}
	b, err := fs.ReadFile(templates.FS, "static/"+name)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNotFound, r.URL.Path)
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	return nil
}
