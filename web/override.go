package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
)

// overridePage is sifen_override.html: the confirmation step of the
// override of SIFEN's 48 hours for a document left in sending
// (docs/decisions/0210).
type overridePage struct {
	layout
	Doc documentView
	// Claimed is when the send without answer took the document.
	Claimed     string
	ListURL     string
	DetailURL   string
	OverrideURL string
}

// confirmOverride is GET /documents/{id}/override: it states what the
// override does and its risk, and asks for a reason; the form posts to the
// same path. A document that is not in sending is a 409.
func (s *Server) confirmOverride(w http.ResponseWriter, r *http.Request) error {
	d, err := s.routeDocument(r)
	if err != nil {
		return err
	}
	if d.Status != sifen.StatusSending {
		return fmt.Errorf("%w: document %d is %s: only a document left in sending waits for SIFEN's 48 hours", sifen.ErrNotSendable, d.ID, d.Status)
	}
	l := s.layout(r, "documents", "sifen_override.html")
	ids := strconv.FormatInt(d.ID, 10)
	return s.render(w, http.StatusOK, overridePage{
		layout:      l,
		Doc:         s.newDocumentView(d, s.now(), l.T),
		Claimed:     view.WhenIn(l.T, l.T.Zoned, d.ClaimedAt, s.now()),
		ListURL:     s.path("documents"),
		DetailURL:   s.path("document", "id", ids),
		OverrideURL: s.path("overrideDocument", "id", ids),
	})
}

// overrideDocument is POST /documents/{id}/override with confirm=yes and
// reason= (required): sifen.Sender.Override asks SIFEN by CDC now. On 0420
// the document is a draft again and the answer is a redirect (303) to its
// page with ?result=overridden; on 0422 it is approved, nothing is
// overridden, and the answer is a 409 naming its dProtAut; any other
// answer or none changes nothing (502). Each is in the audit trail with
// the reason; no reason is a 400 and changes nothing.
func (s *Server) overrideDocument(w http.ResponseWriter, r *http.Request) error {
	id, err := documentID(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return fmt.Errorf("%w: an override must be confirmed (confirm=yes)", errBadRequest)
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		return fmt.Errorf("%w: an override needs a reason, recorded in the audit trail", errBadRequest)
	}
	o, err := s.Sifen.Override(r.Context(), id)
	if err != nil {
		return err
	}
	info := requestInfoFrom(r.Context())
	info.outcome = audit.OverrideOutcome(o.Code, o.AuthNumber, o.Done)
	s.Logger.Info("document override", slog.Int64("id", id), slog.String("code", o.Code), slog.Bool("done", o.Done),
		slog.String("user", info.user), slog.String("reason", reason))
	if !o.Done {
		return fmt.Errorf("%w: %s", sifen.ErrNotSendable, o.Refusal())
	}
	http.Redirect(w, r, s.pathWithQuery("document", url.Values{"result": {"overridden"}}, "id", strconv.FormatInt(id, 10)), http.StatusSeeOther)
	return nil
}
