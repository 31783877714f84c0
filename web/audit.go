package web

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/balde-throttle/balde/audit"
	"github.com/balde-throttle/balde/web/i18n"
)

// The audit trail: every route that changes state names its audit.Action
// (route.audit); chain records one entry per such request once its
// handler has run (recordAudit), with the user, the target read from the
// request, the reason typed in the form and the outcome. The Audit page
// (showAudit) lists the entries.

// auditedWriter remembers the status and the redirect a handler wrote,
// from which recordAudit reads the outcome.
type auditedWriter struct {
	http.ResponseWriter
	status int
}

func (w *auditedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *auditedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *auditedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditTarget is what an audited request acts on, read from its path and
// form.
func auditTarget(r *http.Request, action audit.Action) string {
	switch action {
	case audit.ActionReset:
		if k, err := bucketKey(r); err == nil {
			return k.String()
		}
	case audit.ActionSifenSend:
		if vars, err := pathVars(r); err == nil {
			return "document " + vars["id"]
		}
	case audit.ActionSifenSendAll:
		return "RUC " + r.PostFormValue("ruc") + " (" + r.PostFormValue("env") + ")"
	case audit.ActionDictLookup:
		return "payer " + r.PostFormValue("payer_id")
	}
	return r.URL.Path
}

// skipAudit reports whether a request that ended with err did nothing
// worth recording: bad input, not found, not allowed — refused before the
// action was tried. A refusal by a limit, a conflict or a failure of the
// remote side is recorded: the action was tried.
func skipAudit(r *http.Request, err error) bool {
	if err == nil {
		return false
	}
	switch problemOf(r, err).status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, statusClientClosed:
		return true
	}
	return false
}

// recordAudit records the request of an audited route that its handler
// finished with err (nil for success) after writing to w. The outcome is
// what the handler set (requestInfo.outcome), else the redirect's result
// (?result=sent), else the status. A failure to record is logged at error
// level: the action itself is done and cannot be taken back.
func (s *Server) recordAudit(w *auditedWriter, r *http.Request, rt route, err error) {
	if s.Audit == nil || skipAudit(r, err) || (err == nil && w.status == http.StatusBadRequest) {
		return // nothing was tried (a page that shows its own input error: 400)
	}
	info := requestInfoFrom(r.Context())
	e := audit.Entry{
		User:    info.user,
		Action:  rt.audit,
		Target:  auditTarget(r, rt.audit),
		Reason:  r.PostFormValue("reason"),
		Outcome: info.outcome,
	}
	switch {
	case err != nil:
		p := problemOf(r, err)
		e.Outcome = strconv.Itoa(p.status) + " " + p.message
	case e.Outcome != "":
	default:
		e.Outcome = strconv.Itoa(w.status)
		if loc, perr := url.Parse(w.Header().Get("Location")); perr == nil && loc.Query().Get("result") != "" {
			e.Outcome = loc.Query().Get("result")
			if wait := loc.Query().Get("wait"); wait != "" {
				e.Outcome += ", wait " + wait + " s"
			}
		}
	}
	if _, rerr := s.Audit.Record(r.Context(), e); rerr != nil {
		s.Logger.Error("audit: the action was done but not recorded",
			slog.String("request_id", info.id), slog.String("action", string(e.Action)),
			slog.String("user", e.User), slog.String("target", e.Target), slog.Any("error", rerr))
	}
}

// auditPage is admin_audit.html.
type auditPage struct {
	layout
	Entries []auditView
	Users   string // the user filter as typed
	Action  string
	Actions []auditOption
	// ListURL is the form's action; NextURL the older page ("" on the last).
	ListURL string
	NextURL string
}

func (auditPage) templateFile() string { return "admin_audit.html" }

type auditOption struct {
	Value, Label string
	Selected     bool
}

// auditView is one entry as the page shows it.
type auditView struct {
	When, WhenUTC                         string
	User, Action, Target, Reason, Outcome string
	CLI                                   bool
}

// actionLabel is an action's name on the page, translated.
func actionLabel(tr *i18n.Printer, a audit.Action) string {
	switch a {
	case audit.ActionReset:
		return tr.Sprintf("Bucket reset")
	case audit.ActionSifenSend:
		return tr.Sprintf("SIFEN send")
	case audit.ActionSifenSendAll:
		return tr.Sprintf("SIFEN send all drafts")
	case audit.ActionDictLookup:
		return tr.Sprintf("DICT lookup")
	}
	return string(a)
}

// showAudit is GET /admin/audit: the audit trail, newest first, a page of
// audit.DefaultLimit entries (limit=, up to 500), filtered by user= and
// action=, older pages by before= (an entry id). No trail configured
// (Server.Audit nil): 404.
func (s *Server) showAudit(w http.ResponseWriter, r *http.Request) error {
	if s.Audit == nil {
		return ErrNotFound
	}
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), audit.DefaultLimit, audit.MaxLimit)
	if err != nil {
		return err
	}
	query := audit.Query{User: q.Get("user"), Limit: limit}
	if a := q.Get("action"); a != "" {
		if query.Action, err = audit.ParseAction(a); err != nil {
			return errors.Join(ErrBadRequest, err)
		}
	}
	if b := q.Get("before"); b != "" {
		if query.Before, err = strconv.ParseInt(b, 10, 64); err != nil || query.Before < 1 {
			return ErrBadRequest
		}
	}
	entries, err := s.Audit.List(r.Context(), query)
	if err != nil {
		return err
	}
	l := s.layout(r, "adminAudit")
	p := auditPage{layout: l, Users: query.User, Action: string(query.Action), ListURL: s.path("adminAudit")}
	p.Actions = append(p.Actions, auditOption{Value: "", Label: l.T.Sprintf("any"), Selected: query.Action == ""})
	for _, a := range audit.Actions {
		p.Actions = append(p.Actions, auditOption{Value: string(a), Label: actionLabel(l.T, a), Selected: a == query.Action})
	}
	now := s.now()
	for _, e := range entries {
		p.Entries = append(p.Entries, auditView{
			When:    formatWhenIn(l.T, e.At, now),
			WhenUTC: e.At.UTC().Format(time.RFC3339),
			User:    e.User,
			Action:  actionLabel(l.T, e.Action),
			Target:  e.Target,
			Reason:  e.Reason,
			Outcome: e.Outcome,
			CLI:     len(e.User) > 4 && e.User[:4] == "cli:",
		})
	}
	if len(entries) == limit {
		next := url.Values{}
		if query.User != "" {
			next.Set("user", query.User)
		}
		if query.Action != "" {
			next.Set("action", string(query.Action))
		}
		if limit != audit.DefaultLimit {
			next.Set("limit", strconv.Itoa(limit))
		}
		next.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		p.NextURL = s.pathWithQuery("adminAudit", next)
	}
	return s.render(w, http.StatusOK, p)
}
