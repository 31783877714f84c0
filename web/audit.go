package web

import (
	"cmp"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
)

// auditTarget is what an audited request acts on (audit.Entry.Target).
func auditTarget(r *http.Request, action audit.Action) string {
	switch action {
	case audit.ActionReset:
		if k, err := bucketKey(r); err == nil {
			return k.String()
		}
	case audit.ActionSifenSend, audit.ActionSifenOverride, audit.ActionShadow:
		if vars, err := pathVars(r); err == nil {
			return cmp.Or(vars["id"], vars["policy"]) // a document's route, or a policy's
		}
	case audit.ActionSifenSendAll:
		return url.Values{"ruc": {r.PostFormValue("ruc")}, "env": {r.PostFormValue("env")}}.Encode()
	case audit.ActionDictLookup:
		return r.PostFormValue("payer_id")
	}
	return r.URL.Path
}

// skipAudit reports whether a request that ended with err was refused
// before the action was tried (bad input, not found, not allowed).
func skipAudit(r *http.Request, err error) bool {
	return err != nil && slices.Contains([]int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, statusClientClosed}, problemOf(r, err).status)
}

// Names, in a denied entry's target, of write routes with no audit action.
const (
	deniedImport  = "sifen-import"
	deniedPayment = "dict-payment"
)

// recordDenied records a viewer's attempt at the write route rt, refused
// with errReadOnly (docs/decisions/0141). Only an urlencoded form is read
// for the target and reason.
func (s *Server) recordDenied(w http.ResponseWriter, r *http.Request, rt route) {
	if s.Audit == nil {
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
		_ = parseForm(w, r) // a bad form still records the attempt, without its fields
	}
	if r.PostForm == nil {
		r.PostForm = url.Values{} // so that auditTarget reads no other body
	}
	action := cmp.Or(rt.audit, rt.attempt, audit.Action(rt.name))
	target := url.Values{"action": {string(action)}}
	if slices.Contains(audit.Actions, action) {
		target.Set("target", auditTarget(r, action))
	}
	p := problemOf(r, errReadOnly)
	s.record(r, audit.Entry{
		User:    requestInfoFrom(r.Context()).user,
		Action:  audit.ActionDenied,
		Target:  target.Encode(),
		Reason:  r.PostForm.Get("reason"),
		Outcome: url.Values{"status": {strconv.Itoa(p.status)}, "error": {p.message}}.Encode(),
	})
}

// record writes e to the trail; a failure is logged at error level.
func (s *Server) record(r *http.Request, e audit.Entry) {
	if _, err := s.Audit.Record(r.Context(), e); err != nil {
		s.Logger.Error("audit: the action was done but not recorded",
			slog.String("request_id", requestInfoFrom(r.Context()).id), slog.String("action", string(e.Action)),
			slog.String("user", e.User), slog.String("target", e.Target), slog.Any("error", err))
	}
}

// recordAudit records the request of an audited route that its handler
// finished with err. The outcome is what the handler set
// (requestInfo.outcome), else the error, else the redirect's ?result=,
// else the status.
func (s *Server) recordAudit(w *statusWriter, r *http.Request, rt route, err error) {
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
	case e.Outcome != "":
	case err != nil:
		p := problemOf(r, err)
		e.Outcome = url.Values{"status": {strconv.Itoa(p.status)}, "error": {p.message}}.Encode()
	default:
		e.Outcome = url.Values{"status": {strconv.Itoa(w.status)}}.Encode()
		if loc, perr := url.Parse(w.Header().Get("Location")); perr == nil && loc.Query().Get("result") != "" {
			e.Outcome = listLinkQuery(loc.Query(), 0, 0, "result", "wait", "n").Encode()
		}
	}
	s.record(r, e)
}

// auditPage is admin_audit.html.
type auditPage struct {
	layout
	Entries []auditView
	Users   string // the user filter as typed
	Action  string
	Actions []option
	ListURL string
	NextURL string // the older page ("" on the last)
}

// auditView is one entry as the page shows it.
type auditView struct {
	audit.Entry
	When, WhenUTC, Action, Target, Outcome string
	TargetURL                              string // the target's page, when the server has it
}

// targetView renders e's target in tr's language, with a link to its page.
func (s *Server) targetView(tr *i18n.Printer, e audit.Entry) (text, link string) {
	switch e.Action {
	case audit.ActionReset:
		parts := strings.SplitN(e.Target, "/", 3)
		if len(parts) == 3 {
			return e.Target, s.path("adminBucket", "policy", parts[0], "env", parts[1], "identifier", parts[2])
		}
	case audit.ActionSifenSend, audit.ActionSifenOverride:
		if _, err := strconv.ParseInt(e.Target, 10, 64); err == nil {
			if s.Sifen != nil {
				link = s.path("document", "id", e.Target)
			}
			return tr.Sprintf("document %s", e.Target), link
		}
	case audit.ActionSifenSendAll:
		if q, err := url.ParseQuery(e.Target); err == nil && q.Get("ruc") != "" {
			if s.Sifen != nil {
				link = s.pathWithQuery("documents", q)
			}
			return "RUC " + q.Get("ruc") + " (" + q.Get("env") + ")", link
		}
	case audit.ActionDictLookup:
		return tr.Sprintf("payer %s", e.Target), ""
	case audit.ActionShadow:
		return e.Target, s.pathWithQuery("adminBuckets", url.Values{"policy": {e.Target}})
	case audit.ActionGateway:
		if q, err := url.ParseQuery(e.Target); err == nil {
			text = q.Get("service") + q.Get("op")
			if ruc := q.Get("ruc"); ruc != "" {
				text += " · RUC " + ruc + " (" + q.Get("env") + ") · " + tr.Sprintf("%s document(s)", q.Get("des"))
				if s.Sifen != nil {
					link = s.pathWithQuery("documents", url.Values{"ruc": {ruc}, "env": {q.Get("env")}})
				}
			}
			return text, link
		}
	case audit.ActionDenied:
		if q, err := url.ParseQuery(e.Target); err == nil && q.Get("action") != "" {
			attempted := audit.Action(q.Get("action"))
			text = actionLabel(tr, attempted)
			if t := q.Get("target"); t != "" {
				what, link := s.targetView(tr, audit.Entry{Action: attempted, Target: t})
				return text + " · " + what, link
			}
			return text, ""
		}
	}
	return e.Target, ""
}

// resultLabels are SIFEN's send results (sifen.LotSendStatus) in words,
// where the words are not the value itself (sent, blocked, failed).
var resultLabels = map[string]string{
	"not_queued": "not queued",
	"unknown":    "no answer",
	"overridden": "overridden: sendable again",
	"found":      "found at SIFEN: approved, not overridden",
}

// outcomeView renders an entry's outcome in tr's language; free text is
// shown as it is.
func outcomeView(tr *i18n.Printer, outcome string) string {
	if strings.ContainsAny(outcome, " ") {
		return outcome // free text, not fields
	}
	q, err := url.ParseQuery(outcome)
	if err != nil {
		return outcome
	}
	var parts []string
	switch {
	case q.Has("before") && q.Has("after"):
		parts = append(parts, tr.Sprintf("%s → %s tokens", q.Get("before"), q.Get("after")))
	case q.Get("shadow") == "on":
		parts = append(parts, tr.Sprintf("shadow mode on"))
	case q.Get("shadow") == "off":
		parts = append(parts, tr.Sprintf("enforcing again"))
	case q.Has("result"):
		parts = append(parts, tr.Sprintf(cmp.Or(resultLabels[q.Get("result")], q.Get("result"))))
		if n := q.Get("n"); n != "" {
			parts = append(parts, tr.Sprintf("%s document(s)", n))
		}
		if w, err := strconv.ParseInt(q.Get("wait"), 10, 64); err == nil && w > 0 {
			parts = append(parts, waitIn(tr, time.Duration(w)*time.Second))
		}
		if c := q.Get("code"); c != "" { // an override's answer from SIFEN
			parts = append(parts, "code "+c)
		}
		if a := q.Get("auth"); a != "" {
			parts = append(parts, "dProtAut "+a)
		}
	case q.Has("status"):
		parts = append(parts, q.Get("status"))
		if k := q.Get("refused"); k != "" {
			parts = append(parts, tr.Sprintf("refused locally by %s, not sent", k))
		}
		if e2e := q.Get("e2e"); e2e != "" {
			parts = append(parts, "EndToEndId "+e2e)
		}
		for _, k := range []string{"code", "lot", "state"} { // a gateway's SIFEN answer
			if v := q.Get(k); v != "" {
				parts = append(parts, k+" "+v)
			}
		}
		if msg := q.Get("error"); msg != "" {
			parts = append(parts, tr.Text(msg))
		}
	case q.Has("error"): // a failure of the CLI, which has no status
		parts = append(parts, tr.Text(q.Get("error")))
	default:
		return outcome
	}
	return strings.Join(parts, " · ")
}

// actionLabels are the actions' names on the page, in English.
var actionLabels = map[audit.Action]string{
	audit.ActionReset:         "Bucket reset",
	audit.ActionShadow:        "Shadow mode",
	audit.ActionSifenSend:     "SIFEN send",
	audit.ActionSifenSendAll:  "SIFEN send all drafts",
	audit.ActionSifenOverride: "SIFEN 48-hour override",
	audit.ActionDictLookup:    "DICT lookup",
	audit.ActionGateway:       "Gateway request",
	audit.ActionDenied:        "Refused to a viewer",
	deniedImport:              "DE or lot upload",
	deniedPayment:             "DICT payment sent",
}

// actionLabel is an action's name on the page, translated.
func actionLabel(tr *i18n.Printer, a audit.Action) string {
	if label, ok := actionLabels[a]; ok {
		return tr.Text(label)
	}
	return string(a)
}

// showAudit is GET /admin/audit: the audit trail, newest first, filtered
// by user= and action=, paged by limit= and before=.
func (s *Server) showAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), audit.DefaultLimit, audit.MaxLimit)
	if err != nil {
		return err
	}
	query := audit.Query{User: q.Get("user"), Limit: limit}
	if a := q.Get("action"); a != "" {
		if query.Action, err = audit.ParseAction(a); err != nil {
			return errors.Join(errBadRequest, err)
		}
	}
	if b := q.Get("before"); b != "" {
		if query.Before, err = strconv.ParseInt(b, 10, 64); err != nil || query.Before < 1 {
			return errBadRequest
		}
	}
	entries, err := s.Audit.List(r.Context(), query)
	if err != nil {
		return err
	}
	l := s.layout(r, "adminAudit", "admin_audit.html")
	p := auditPage{layout: l, Users: query.User, Action: string(query.Action), ListURL: s.path("adminAudit")}
	p.Actions = append(p.Actions, option{Value: "", Label: l.T.Sprintf("any"), Selected: query.Action == ""})
	for _, a := range audit.Actions {
		p.Actions = append(p.Actions, option{Value: string(a), Label: actionLabel(l.T, a), Selected: a == query.Action})
	}
	now := s.now()
	for _, e := range entries {
		v := auditView{
			Entry:   e,
			When:    view.WhenIn(l.T, l.T.Zoned, e.At, now),
			WhenUTC: e.At.UTC().Format(time.RFC3339),
			Action:  actionLabel(l.T, e.Action),
			Outcome: outcomeView(l.T, e.Outcome),
		}
		v.Target, v.TargetURL = s.targetView(l.T, e)
		p.Entries = append(p.Entries, v)
	}
	if len(entries) == limit {
		next := listLinkQuery(q, limit, audit.DefaultLimit, "user", "action")
		next.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		p.NextURL = s.pathWithQuery("adminAudit", next)
	}
	return s.render(w, http.StatusOK, p)
}
