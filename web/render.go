package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
)

// pageFiles declares every page template in package templates; parsePages
// fails when the two differ. Each page defines "title" and "content",
// which layout.html's "base" calls.
var pageFiles = []string{
	"admin_audit.html",
	"admin_bucket.html",
	"admin_buckets.html",
	"admin_overview.html",
	"admin_reset.html",
	"admin_whatif.html",
	"dict_lookup.html",
	"error.html",
	"sifen_document.html",
	"sifen_documents.html",
	"sifen_override.html",
}

// page is the data of one page template: a struct embedding its layout.
type page interface {
	templateFile() string
}

// parsePages parses fsys's layout.html and partials/*.html once, then each
// declared page on a clone of them (Handler: templates.FS and pageFiles).
func parsePages(fsys fs.FS, declared []string) (map[string]*template.Template, error) {
	found, err := fs.Glob(fsys, "*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	found = slices.DeleteFunc(found, func(f string) bool { return f == "layout.html" })
	for _, f := range found {
		if !slices.Contains(declared, f) {
			return nil, fmt.Errorf("web: templates: page %s is not declared in web.pageFiles", f)
		}
	}
	base, err := template.New("layout.html").ParseFS(fsys, "layout.html", "partials/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	pages := make(map[string]*template.Template, len(declared))
	for _, f := range declared {
		if !slices.Contains(found, f) {
			return nil, fmt.Errorf("web: templates: declared page %s does not exist", f)
		}
		t, err := template.Must(base.Clone()).ParseFS(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("web: templates: %w", err)
		}
		for _, name := range []string{"title", "content"} {
			if t.Lookup(name) == nil {
				return nil, fmt.Errorf("web: templates: page %s does not define %q", f, name)
			}
		}
		pages[f] = t
	}
	return pages, nil
}

// execute runs the template name of p's page into memory, so that an
// error writes nothing (never half a page).
func (s *Server) execute(p page, name string) ([]byte, error) {
	t, ok := s.pages[p.templateFile()]
	if !ok {
		return nil, fmt.Errorf("web: render: page %s is not declared", p.templateFile())
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, p); err != nil {
		return nil, fmt.Errorf("web: render %s %s: %w", p.templateFile(), name, err)
	}
	return buf.Bytes(), nil
}

// render writes p with status; a template error writes nothing and is
// returned.
func (s *Server) render(w http.ResponseWriter, status int, p page) error {
	body, err := s.execute(p, "base")
	if err != nil {
		return err
	}
	writeBody(w, status, "text/html; charset=utf-8", body)
	return nil
}

// writeBody writes a response of status with its body.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// layout is the part of every page that layout.html and the navigation use.
type layout struct {
	// T translates the page's words and shows its times; Lang is its tag.
	T         *i18n.Printer
	Lang      string
	Nav       []navLink
	HomeURL   string
	StyleURL  string
	User      string
	ReadOnly  bool // a viewer: the admin-only actions are marked
	RequestID string
	Refresh   int         // when > 0, reload every Refresh seconds
	Live      *liveUpdate // when set, parts of the page update in place
	ZoneName  string      // of the page's times ("America/Asuncion (-03)")
	file      string      // the page's template
}

func (l layout) templateFile() string { return l.file }

// liveUpdate is how a page updates in place: every Every seconds
// static/live.js fetches URL, the fragments of Server.renderLive.
type liveUpdate struct {
	URL, ScriptURL string
	Every          int
}

const liveEverySeconds = 10

// live returns the live update of the page r shows: its URL with live=1.
func (s *Server) live(r *http.Request) *liveUpdate {
	q := r.URL.Query()
	q.Set("live", "1")
	u := *r.URL
	u.RawQuery = q.Encode()
	return &liveUpdate{URL: s.BasePath + u.RequestURI(), ScriptURL: s.path("static") + "live.js", Every: liveEverySeconds}
}

// liveFragments is the JSON answer of a live update: HTML by element id,
// and when it was rendered.
type liveFragments struct {
	Fragments map[string]string `json:"fragments"`
	At        string            `json:"at"`
}

// renderLive renders p, or for its live update (?live=1) the templates
// named in ids (by element id) as JSON; an error writes nothing, as
// render's.
func (s *Server) renderLive(w http.ResponseWriter, r *http.Request, p page, at string, ids map[string]string) error {
	if r.URL.Query().Get("live") != "1" {
		return s.render(w, http.StatusOK, p)
	}
	out := liveFragments{Fragments: make(map[string]string, len(ids)), At: at}
	for id, name := range ids {
		frag, err := s.execute(p, name)
		if err != nil {
			return err
		}
		out.Fragments[id] = string(frag)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("web: render live %s: %w", p.templateFile(), err)
	}
	writeBody(w, http.StatusOK, "application/json", body)
	return nil
}

type navLink struct {
	Label, URL string
	Current    bool
}

// layout fills the common page data for r; current is the route name of
// the navigation entry to highlight, file the page's template.
func (s *Server) layout(r *http.Request, current, file string) layout {
	info := requestInfoFrom(r.Context())
	tr := s.printer(r.Header.Get("Accept-Language"))
	l := layout{
		T:         tr,
		Lang:      tr.Lang(),
		HomeURL:   s.path("adminBuckets"),
		StyleURL:  s.path("static") + "style.css",
		User:      info.user,
		ReadOnly:  info.user != "" && info.role != RoleAdmin,
		RequestID: info.id,
		file:      file,
	}
	l.ZoneName = tr.ZoneName(time.Now()) // in force now; an error page may come before the Limiter
	if s.Limiter != nil {
		l.ZoneName = tr.ZoneName(s.now())
	}
	for _, rt := range s.table {
		if rt.nav == "" || (rt.needs != nil && !rt.needs(s)) {
			continue // not in the navigation, or its feature is not configured
		}
		l.Nav = append(l.Nav, navLink{Label: tr.Sprintf(rt.nav), URL: s.path(rt.name), Current: rt.name == current})
	}
	return l
}

// printer returns the translator for an Accept-Language header, showing
// times in Server.TimeZone (nil: local) next to UTC.
func (s *Server) printer(acceptLanguage string) *i18n.Printer {
	return i18n.FromAcceptLanguage(acceptLanguage, cmp.Or(s.TimeZone, time.Local))
}
