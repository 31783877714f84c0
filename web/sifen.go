package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// sifenSender is what the documents pages need from SIFEN's send path,
// *sifen.Sender: the very Send the batch command calls, so the throttle of
// a RUC is one whoever sends.
type sifenSender interface {
	// Import stores the DEs of a DE or lot XML as drafts of env;
	// ImportReplacing also replaces the content of a draft or error
	// holding an uploaded CDC.
	Import(ctx context.Context, data []byte, env sifen.Env) ([]sifen.Document, error)
	ImportReplacing(ctx context.Context, data []byte, env sifen.Env) ([]sifen.Document, error)
	// Get returns one document with its XML (sifen.ErrNotFound).
	Get(ctx context.Context, id int64) (sifen.Document, error)
	// List returns documents newest first, without their XML.
	List(ctx context.Context, f sifen.Filter) ([]sifen.Document, error)
	// CountByStatus counts documents by status ("" env: both).
	CountByStatus(ctx context.Context, env sifen.Env) (map[sifen.Status]int64, error)
	// Send sends documents as one lot: throttle, SIFEN, record.
	Send(ctx context.Context, ids ...int64) (sifen.LotSend, error)
	// FitLot says how many of ids, from the first, fit in one lot message.
	FitLot(ctx context.Context, ids []int64) (int, error)
	// Override asks SIFEN for a document left sending and, on 0420, makes
	// it sendable again before SIFEN's 48 hours.
	Override(ctx context.Context, id int64) (sifen.Overridden, error)
	// RUCWait is the decision of the gate of ruc in env now, so that pages
	// never say "may be sent" while the RUC is held back.
	RUCWait(ctx context.Context, env sifen.Env, ruc sifen.RUC) (throttle.Decision, error)
	// Lots lists the lots waiting for their result, for the lots tab.
	Lots(ctx context.Context) ([]sifen.LotRef, error)
}

var _ sifenSender = (*sifen.Sender)(nil)

// rucHold is a RUC's gate refusing now, as the documents list says it.
// Wait is the reason and the wait in the page's language ("blocked 9m21s
// (block 1 in a row)", "cooldown 7s"); Blocked is set for a block after a
// 0301, not the interval.
type rucHold struct {
	RUC, Env string
	Wait     string
	Blocked  bool
	wait     time.Duration
}

// rucHoldIn is the refusal of the gate of ruc in env now (Sender.RUCWait),
// or nil when the RUC may send or the sender cannot tell. A block says its
// level, read from the same bucket when the server has the limiter.
func (s *Server) rucHoldIn(ctx context.Context, env sifen.Env, ruc sifen.RUC, tr *i18n.Printer) *rucHold {
	dec, err := s.Sifen.RUCWait(ctx, env, ruc)
	if err != nil || dec.Allowed || dec.RetryAfter <= 0 {
		return nil
	}
	h := &rucHold{RUC: ruc.String(), Env: string(env), wait: dec.RetryAfter}
	// The wait as a bucket's wait is said, from the reason alone.
	st := throttle.BucketState{RetryAfter: dec.RetryAfter}
	switch dec.Reason {
	case throttle.ReasonBlocked:
		h.Blocked = true
		st = throttle.BucketState{BlockLeft: dec.RetryAfter}
		if s.Limiter != nil {
			if cur, err := s.Limiter.State(ctx, sifen.RecepcionKey(env, ruc)); err == nil {
				st.BlockLevel = cur.BlockLevel
			}
		}
	case throttle.ReasonCooldown:
		st = throttle.BucketState{CooldownLeft: dec.RetryAfter}
	}
	h.Wait = view.FormatBucketWaitIn(tr, st)
	return h
}

const (
	defaultUploadLimit   = 8 << 20 // an uploaded DE or lot: room for 50 large DEs
	documentsPageSize    = 50
	documentsMaxPageSize = 500
	xmlShownBytes        = 64 << 10 // how much of a document's XML its page shows
)

// documentStatuses are the statuses the list filter offers, in the order
// a document goes through them.
var documentStatuses = []sifen.Status{
	sifen.StatusDraft, sifen.StatusSending, sifen.StatusSent,
	sifen.StatusApproved, sifen.StatusRejected, sifen.StatusError,
}

// documentView is one document as the pages show it: the document, and
// its cells in the page's language.
type documentView struct {
	sifen.Document
	Type        string
	Status      string
	StatusClass string
	Message     string
	LotHash     string
	// Wait is the local refusal while it lasts ("retry in 9m21s"), apart
	// from Message, the last answer.
	Wait     string
	Created  string
	Updated  string
	Sent     string
	Sendable bool
	// Held is the RUC's gate while it refuses: the Send button is off,
	// and says its wait.
	Held *rucHold

	URL, SendURL string
	OverrideURL  string // for a document left in sending
}

// newDocumentView renders d for a page in tr's language; SIFEN's own words
// stay as SIFEN wrote them.
func (s *Server) newDocumentView(d sifen.Document, now time.Time, tr *i18n.Printer) documentView {
	id := strconv.FormatInt(d.ID, 10)
	v := documentView{
		Document:    d,
		Type:        documentType(d.Type),
		Status:      tr.Text(string(d.Status)),
		StatusClass: statusClass(d.Status),
		Message:     documentMessageIn(tr, d.Message),
		LotHash:     d.LotHash[:min(len(d.LotHash), 16)],
		Created:     view.WhenIn(tr, tr.Zoned, d.CreatedAt, now),
		Updated:     view.WhenIn(tr, tr.Zoned, d.UpdatedAt, now),
		Sent:        view.WhenIn(tr, tr.Zoned, d.SentAt, now),
		Sendable:    d.Status.Sendable(),
		URL:         s.path("document", "id", id),
		SendURL:     s.path("sendDocument", "id", id),
	}
	if d.Status == sifen.StatusSending {
		v.OverrideURL = s.path("overrideConfirm", "id", id)
	}
	if wait := d.RetryAt.Sub(now); d.Status.Sendable() && wait > 0 {
		v.Wait = tr.Sprintf("retry in %s", waitText(wait))
	}
	if notQueued(d) {
		v.Status = tr.Sprintf(notQueuedLabel)
	}
	if d.Status == sifen.StatusApproved && d.Result == sifen.ResultApprovedWithObs {
		v.Status = tr.Sprintf("approved with observations")
	}
	return v
}

// notQueuedLabel names a document whose last lot drew a 0301 wherever one
// is shown, coloured as High (docs/decisions/0142). The store keeps it
// "error".
const notQueuedLabel = "not queued (0301)"

// notQueued reports whether SIFEN answered 0301 to d's last lot.
func notQueued(d sifen.Document) bool {
	return d.Status == sifen.StatusError && d.ResponseCode == sifen.CodeLotNotQueued
}

// countNotQueued counts, of the inError documents in error, those SIFEN
// did not queue, a page of 1,000 at a time.
func countNotQueued(ctx context.Context, docs sifenSender, inError int64) (int64, error) {
	var n, seen int64
	f := sifen.Filter{Statuses: []sifen.Status{sifen.StatusError}, Limit: 1000}
	for seen < inError {
		page, err := docs.List(ctx, f)
		if err != nil || len(page) == 0 {
			return n, err
		}
		for _, d := range page {
			if notQueued(d) {
				n++
			}
		}
		seen += int64(len(page))
		f.BeforeID = page[len(page)-1].ID
	}
	return n, nil
}

// notQueuedPrefixes are the formats of balde's messages on a document
// whose lot SIFEN did not queue, followed by SIFEN's own words.
var notQueuedPrefixes = []string{
	"SIFEN did not queue the lot, for the second time in this run: %s",
	"SIFEN did not queue the lot: %s",
}

// documentMessageIn renders a document's message in tr's language, without
// package prefixes; SIFEN's own words stay as they are.
func documentMessageIn(tr *i18n.Printer, msg string) string {
	for _, p := range publicPrefixes {
		msg = strings.ReplaceAll(msg, p, "")
	}
	for _, format := range notQueuedPrefixes {
		if rest, ok := strings.CutPrefix(msg, strings.TrimSuffix(format, "%s")); ok {
			return tr.Sprintf(format, rest)
		}
	}
	return msg
}

// waitText renders a wait as whole seconds under a minute ("7 s"), a
// duration past it ("9m21s").
func waitText(d time.Duration) string {
	s := ceilSeconds(d)
	if s < 60 {
		return strconv.FormatInt(s, 10) + " s"
	}
	return (time.Duration(s) * time.Second).String()
}

// waitParam is waitText of a query's whole seconds; a value that is no
// number is shown as it is.
func waitParam(v string) string {
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil || s < 0 {
		return v
	}
	return waitText(time.Duration(s) * time.Second)
}

// documentType renders a DE type (iTiDE) with its name.
func documentType(t int) string {
	names := map[int]string{
		1: "Factura electrónica",
		4: "Autofactura electrónica",
		5: "Nota de crédito electrónica",
		6: "Nota de débito electrónica",
		7: "Nota de remisión electrónica",
	}
	if n, ok := names[t]; ok {
		return fmt.Sprintf("%d · %s", t, n)
	}
	return strconv.Itoa(t)
}

// statusSeverities colour document statuses like severities.
var statusSeverities = map[sifen.Status]throttle.Severity{
	sifen.StatusSent:     throttle.SeverityHealthy,
	sifen.StatusApproved: throttle.SeverityHealthy,
	sifen.StatusSending:  throttle.SeverityMedium,
	sifen.StatusError:    throttle.SeverityHigh,
	sifen.StatusRejected: throttle.SeverityCritical,
}

// statusClass colours a document status like a severity.
func statusClass(st sifen.Status) string { return severityClass(statusSeverities[st]) }

// documentsPage is sifen_documents.html.
type documentsPage struct {
	layout
	Flash      string
	FlashClass string // "flash", "flash flash-warning" or "flash flash-error"
	// Holds are the RUCs of the listed drafts whose gate refuses now.
	Holds     []*rucHold
	Documents []documentView

	// The filter, as given.
	RUC, Env, Status string
	Limit            int
	Envs             []string
	Statuses         []string

	ListURL, ImportURL, NextURL, FirstURL string
	// SendRUC, when the list is filtered by RUC, is the "Send all drafts"
	// button, for the env filtered, else the env of the RUC's newest listed
	// document (test when none is listed).
	SendRUC *sendRUCForm
	Upload  uploadForm // the upload form as sent, when it was refused
}

// uploadForm is the upload form as read (Env: the env field as sent), and
// when it was refused, why: the page shows it again.
type uploadForm struct {
	Env, File, Error string
	Replace          bool // the "replace" box: a draft of the same CDC takes this content
	data             []byte
	env              sifen.Env
}

// sendRUCForm is the "Send all drafts of RUC …" button; Held, the RUC's
// gate while it refuses.
type sendRUCForm struct {
	URL, RUC, Env string
	Held          *rucHold
}

// listDocuments is GET /documents: the upload form and one page of
// documents, newest first, filtered (parseDocumentFilter) and paged by
// keyset (?before=).
func (s *Server) listDocuments(w http.ResponseWriter, r *http.Request) error {
	p, err := s.newDocumentsPage(r, r.URL.Query())
	if err != nil {
		return err
	}
	return s.render(w, http.StatusOK, p)
}

// newDocumentsPage builds the documents page for the list's query q.
func (s *Server) newDocumentsPage(r *http.Request, q url.Values) (documentsPage, error) {
	f, err := parseDocumentFilter(q)
	if err != nil {
		return documentsPage{}, err
	}
	limit := f.Limit
	f.Limit = limit + 1 // one more tells whether there is a next page
	docs, err := s.Sifen.List(r.Context(), f)
	if err != nil {
		return documentsPage{}, err
	}
	more := len(docs) > limit
	if more {
		docs = docs[:limit]
	}

	now := s.now()
	p := documentsPage{
		layout:    s.layout(r, "documents", "sifen_documents.html"),
		RUC:       q.Get("ruc"),
		Env:       q.Get("env"),
		Status:    q.Get("status"),
		Limit:     limit,
		Envs:      []string{string(sifen.EnvTest), string(sifen.EnvProd)},
		ListURL:   s.path("documents"),
		ImportURL: s.path("importDocuments"),
	}
	tr := p.T
	for _, st := range documentStatuses {
		p.Statuses = append(p.Statuses, string(st))
	}
	if n, err := strconv.Atoi(q.Get("imported")); err == nil && n > 0 {
		p.Flash = tr.Sprintf("Imported %d documents as drafts: they are at the top of the list.", n)
	}
	if f.RUC != "" {
		env := f.Env
		if i := slices.IndexFunc(docs, func(d sifen.Document) bool { return d.RUC.Number == f.RUC }); env == "" && i >= 0 {
			env = docs[i].Env
		}
		p.SendRUC = &sendRUCForm{URL: s.path("sendRUCDrafts"), RUC: f.RUC, Env: string(cmp.Or(env, sifen.EnvTest))}
	}
	p.FlashClass = "flash"
	switch q.Get("result") {
	case string(sifen.OutcomeSent):
		p.Flash = tr.Sprintf("Sent a lot of %s document(s): SIFEN queued lot %s.", q.Get("n"), q.Get("lot"))
	case string(sifen.OutcomeBlocked):
		p.FlashClass = "flash flash-warning"
		p.Flash = tr.Sprintf("Blocked for RUC %s in env %s, retry in %s: nothing was sent.", q.Get("ruc"), q.Get("env"), waitParam(q.Get("wait")))
	case "":
	case string(sifen.OutcomeNotQueued):
		if q.Get("code") == sifen.CodeLotNotQueued {
			p.FlashClass = "flash flash-warning"
			p.Flash = tr.Sprintf("The lot of %s document(s) was not queued (0301): they stay drafts, sent again when the RUC's block ends.", q.Get("n"))
			break
		}
		fallthrough
	default:
		p.FlashClass = "flash flash-error"
		p.Flash = tr.Sprintf("The lot of %s document(s) was not queued (%s): see each document.", q.Get("n"), q.Get("result"))
	}
	if n, err := strconv.Atoi(q.Get("toobig")); err == nil && n > 0 && q.Get("result") != "" {
		p.Flash += " " + tr.Sprintf("%d more draft(s) stay drafts: with them the SOAP message would exceed 1000 KB. Press the button again to send them.", n)
	}
	if n, err := strconv.Atoi(q.Get("later")); err == nil && n > 0 && q.Get("result") != "" {
		p.Flash += " " + tr.Sprintf("%d more draft(s) wait for the RUC (its interval between lots, or a block): press the button again in %s.", n, waitParam(q.Get("later_wait")))
	}
	// The gate of every RUC with a listed draft, read once per RUC. While
	// a RUC is held back, the page reloads when its wait ends (at most
	// every minute).
	holds := map[string]*rucHold{}
	held := func(env sifen.Env, ruc sifen.RUC) *rucHold {
		k := string(env) + "/" + ruc.Number
		h, seen := holds[k]
		if !seen {
			h = s.rucHoldIn(r.Context(), env, ruc, tr)
			holds[k] = h
			if h != nil {
				p.Holds = append(p.Holds, h)
				p.Refresh = min(cmp.Or(p.Refresh, 60), int(ceilSeconds(h.wait)+1))
			}
		}
		return h
	}
	for _, d := range docs {
		v := s.newDocumentView(d, now, tr)
		if d.Status.Sendable() {
			v.Held = held(d.Env, d.RUC)
		}
		p.Documents = append(p.Documents, v)
	}
	if p.SendRUC != nil {
		ruc := sifen.RUC{Number: p.SendRUC.RUC, DV: sifen.CheckDigit(p.SendRUC.RUC)}
		p.SendRUC.Held = held(sifen.Env(p.SendRUC.Env), ruc)
	}

	// Links keep the filter; the pager changes only ?before=.
	base := listLinkQuery(q, limit, documentsPageSize, "ruc", "env", "status")
	if f.BeforeID > 0 {
		p.FirstURL = s.pathWithQuery("documents", base)
	}
	if more {
		base.Set("before", strconv.FormatInt(docs[len(docs)-1].ID, 10))
		p.NextURL = s.pathWithQuery("documents", base)
	}
	return p, nil
}

// parseDocumentFilter reads the list's query: ruc (with or without its
// check digit), env, status, before and limit; a malformed value is a bad
// request naming it. status=draft lists every document that may be sent
// (draft and error).
func parseDocumentFilter(q url.Values) (sifen.Filter, error) {
	var f sifen.Filter
	if v := q.Get("env"); v != "" {
		env, err := sifen.ParseEnv(v)
		if err != nil {
			return f, err
		}
		f.Env = env
	}
	if v := strings.TrimSpace(q.Get("ruc")); v != "" {
		if strings.Contains(v, "-") {
			ruc, err := sifen.ParseRUC(v)
			if err != nil {
				return f, err
			}
			v = ruc.Number
		} else if err := sifen.ValidateRUCNumber(v); err != nil {
			return f, err
		}
		f.RUC = v
	}
	if v := q.Get("status"); v != "" {
		st := sifen.Status(v)
		if !slices.Contains(documentStatuses, st) {
			return f, fmt.Errorf("%w: status %q (want draft, sending, sent, approved, rejected or error)", errBadRequest, v)
		}
		f.Statuses = []sifen.Status{st}
		if st == sifen.StatusDraft {
			f.Statuses = append(f.Statuses, sifen.StatusError)
		}
	}
	if v := q.Get("before"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			return f, fmt.Errorf("%w: before %q is not a document id", errBadRequest, v)
		}
		f.BeforeID = id
	}
	var err error
	f.Limit, err = parseLimit(q.Get("limit"), documentsPageSize, documentsMaxPageSize)
	return f, err
}

// importDocuments is POST /documents (multipart/form-data): the DE or lot
// XML in "file" is stored as drafts of "env" (Sender.Import, all or
// nothing; with "replace" ticked, Sender.ImportReplacing). One document:
// 303 to its page; several: 303 to the list. A refused upload (400, 409,
// 413) shows the documents page again with that status and the form as
// sent, saying why.
func (s *Server) importDocuments(w http.ResponseWriter, r *http.Request) error {
	up, err := s.readUpload(w, r)
	if err == nil {
		importer := s.Sifen.Import
		if up.Replace {
			importer = s.Sifen.ImportReplacing
		}
		var docs []sifen.Document
		if docs, err = importer(r.Context(), up.data, up.env); err == nil {
			s.Logger.Info("documents imported", slog.Int("count", len(docs)), slog.String("env", string(up.env)),
				slog.String("user", requestInfoFrom(r.Context()).user))
			if len(docs) == 1 {
				http.Redirect(w, r, s.path("document", "id", strconv.FormatInt(docs[0].ID, 10)), http.StatusSeeOther)
				return nil
			}
			http.Redirect(w, r, s.pathWithQuery("documents", url.Values{"imported": {strconv.Itoa(len(docs))}}), http.StatusSeeOther)
			return nil
		}
	}
	pr := problemOf(r, err)
	if pr.status < 400 || pr.status >= 500 {
		return err
	}
	p, perr := s.newDocumentsPage(r, url.Values{})
	if perr != nil {
		return err
	}
	up.Error = strings.TrimSuffix(pr.message, ".")
	var taken *sifen.CDCError
	if errors.As(err, &taken) && taken.Document.Status.Sendable() {
		up.Error = p.T.Sprintf("CDC %s is already document %d, a draft (or an error) with other content: nothing was imported. To replace its content with this file, tick \"Replace a draft of the same CDC\" and upload it again",
			taken.CDC, taken.Document.ID)
	}
	p.Upload = up
	return s.render(w, s.prepareError(w, r, err).status, p)
}

// readUpload reads the multipart upload form; what could be read comes
// back with an error too, to show the form again.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (uploadForm, error) {
	var up uploadForm
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return up, fmt.Errorf("%w: upload a file with a multipart/form-data form (fields file and env)", errBadRequest)
	}
	limit := cmp.Or(max(s.UploadLimit, 0), defaultUploadLimit)
	r.Body = http.MaxBytesReader(w, r.Body, limit+maxFormBytes)
	if err := r.ParseMultipartForm(limit + maxFormBytes); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return up, fmt.Errorf("%w: the upload is larger than %d bytes", errTooLarge, limit)
		}
		return up, fmt.Errorf("%w: %v", errBadRequest, strings.TrimPrefix(err.Error(), "http: "))
	}
	defer r.MultipartForm.RemoveAll()
	up.Env = r.PostFormValue("env")
	up.Replace = r.PostFormValue("replace") != ""
	file, hdr, ferr := r.FormFile("file")
	if ferr == nil {
		defer file.Close()
		up.File = hdr.Filename
	}
	env, err := sifen.ParseEnv(up.Env)
	if err != nil {
		return up, err
	}
	up.env = env
	if ferr != nil {
		return up, fmt.Errorf("%w: choose the DE or lot XML file to upload (field file)", errBadRequest)
	}
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return up, fmt.Errorf("%w: read the upload: %v", errBadRequest, err)
	}
	if int64(len(data)) > limit {
		return up, fmt.Errorf("%w: the file is larger than %d bytes", errTooLarge, limit)
	}
	up.data = data
	return up, nil
}

// documentPage is sifen_document.html.
type documentPage struct {
	layout
	Doc          documentView
	Banner       *banner
	XML          string
	XMLTruncated bool

	ListURL    string
	RUCListURL string
}

// banner is the box at the top of a document page that says how its last
// send ended; Class is "ok", "warning" or "error".
type banner struct {
	Class, Text, Detail string
}

// showDocument is GET /documents/{id}: the document, how its last send
// ended (documentBanner; while a refusal lasts the page reloads itself
// when it ends), its Send button and its XML.
func (s *Server) showDocument(w http.ResponseWriter, r *http.Request) error {
	d, err := s.routeDocument(r)
	if err != nil {
		return err
	}
	now := s.now()
	l := s.layout(r, "documents", "sifen_document.html")
	if h := s.rucHoldIn(r.Context(), d.Env, d.RUC, l.T); d.Status.Sendable() && h != nil && now.Add(h.wait).After(d.RetryAt) {
		d.RetryAt = now.Add(h.wait) // the RUC is held back, whatever the document says
	}
	p := documentPage{
		layout:  l,
		Doc:     s.newDocumentView(d, now, l.T),
		Banner:  documentBanner(d, now, l.T),
		ListURL: s.path("documents"),
		RUCListURL: s.pathWithQuery("documents", url.Values{
			"ruc": {d.RUC.Number}, "env": {string(d.Env)},
		}),
	}
	p.XML = strings.ToValidUTF8(string(d.XML[:min(len(d.XML), xmlShownBytes)]), "\uFFFD")
	p.XMLTruncated = len(d.XML) > xmlShownBytes
	if wait := d.RetryAt.Sub(now); d.Status.Sendable() && wait > 0 {
		p.Refresh = int(min(ceilSeconds(wait)+1, 60))
	}
	return s.render(w, http.StatusOK, p)
}

// documentBanner says how the last send of d ended, from the document's
// own state, in tr's language, or nil for a draft never sent.
func documentBanner(d sifen.Document, now time.Time, tr *i18n.Printer) *banner {
	d.Message = documentMessageIn(tr, d.Message)
	if wait := d.RetryAt.Sub(now); d.Status.Sendable() && wait > 0 {
		detail := tr.Sprintf("Nothing was sent to SIFEN.")
		switch {
		case d.Status == sifen.StatusError:
			detail = tr.Sprintf("%s Until the RUC's wait ends nothing is sent.", d.Message)
		case d.Message != "":
			detail = tr.Sprintf("The throttle refused the send before anything left (%s). %s", d.Message, detail)
		}
		return &banner{Class: "warning",
			Text:   tr.Sprintf("Blocked for RUC %s in env %s, retry in %s.", d.RUC, d.Env, waitText(wait)),
			Detail: detail}
	}
	b := &banner{Detail: d.Message}
	switch {
	case notQueued(d):
		b.Class, b.Text = "warning", tr.Sprintf("Not queued (0301): the RUC's block is over, it may be sent again.")
	case d.Status.Sendable() && !d.RetryAt.IsZero():
		b.Class, b.Text = "warning", tr.Sprintf("The throttle refused the last send; the wait is over: it may be sent now.")
	case d.Status == sifen.StatusError:
		b.Class, b.Text = "error", tr.Sprintf("The last send did not succeed; the document may be sent again.")
	case d.Status == sifen.StatusSent:
		b.Class, b.Text = "ok", tr.Sprintf("Sent: SIFEN queued lot %s (response code %s).", d.LotNumber, d.ResponseCode)
	case d.Status == sifen.StatusSending:
		b.Class, b.Text = "warning", tr.Sprintf("Being sent, or the last send got no answer: it cannot be sent again until SIFEN is asked (Resolve).")
	case d.Status == sifen.StatusApproved:
		b.Class, b.Text = "ok", tr.Sprintf("Approved by SIFEN.")
		switch obs := d.Result == sifen.ResultApprovedWithObs; {
		case obs && d.AuthNumber != "":
			b.Text = tr.Sprintf("Approved by SIFEN with observations (dProtAut %s).", d.AuthNumber)
		case obs:
			b.Text = tr.Sprintf("Approved by SIFEN with observations.")
		case d.AuthNumber != "":
			b.Text = tr.Sprintf("Approved by SIFEN (dProtAut %s).", d.AuthNumber)
		}
	case d.Status == sifen.StatusRejected:
		b.Class, b.Text = "error", tr.Sprintf("Rejected by SIFEN: correct the DE and import it again (same CDC) to send it.")
	case d.Message != "":
		return &banner{Class: "warning", Text: d.Message} // a draft with a message: something did not succeed
	default:
		return nil
	}
	return b
}

// sendDocument is POST /documents/{id}/send: it sends the document as a
// lot of one (sifen.Sender.Send) and redirects (303) to its page, whatever
// the outcome: ?result= says which and, when blocked, ?wait= the whole
// seconds. A document that cannot be sent now is a 409; a lot rule it
// breaks, a 400.
func (s *Server) sendDocument(w http.ResponseWriter, r *http.Request) error {
	id, err := documentID(r)
	if err != nil {
		return err
	}
	out, err := s.Sifen.Send(r.Context(), id)
	if err != nil {
		return err
	}
	q := url.Values{"result": {string(out.Status)}}
	attrs := []slog.Attr{slog.Int64("id", id), slog.String("outcome", string(out.Status)),
		slog.String("user", requestInfoFrom(r.Context()).user)}
	if b := out.Blocked(); b != nil {
		q.Set("wait", strconv.FormatInt(b.WaitSeconds(), 10))
		attrs = append(attrs, slog.Duration("wait", b.Wait))
	}
	s.Logger.LogAttrs(r.Context(), slog.LevelInfo, "document send", attrs...)
	http.Redirect(w, r, s.pathWithQuery("document", q, "id", strconv.FormatInt(id, 10)), http.StatusSeeOther)
	return nil
}

// sendRUCDrafts is POST /documents/send-ruc, "Send all drafts of RUC …":
// the drafts (and documents in error) of one RUC in one env go through
// sifen.SendDocuments in one pass without waiting; the lots the RUC's gate
// refuses stay drafts with their wait. It redirects (303) to the RUC's
// list with ?result= and &n= the documents of the first lot (&toobig=,
// &later=, &lot=, &code=, &wait= when they apply). No draft, or every
// document failing a lot rule: 400; taken by another send meanwhile: 409.
func (s *Server) sendRUCDrafts(w http.ResponseWriter, r *http.Request) error {
	f, err := parseDocumentFilter(url.Values{"ruc": {r.PostFormValue("ruc")}, "env": {r.PostFormValue("env")}})
	if err != nil {
		return err
	}
	if f.RUC == "" || f.Env == "" {
		return fmt.Errorf("%w: the RUC and the environment are both needed", sifen.ErrInvalidRUC)
	}
	f.Statuses, f.Limit = []sifen.Status{sifen.StatusDraft, sifen.StatusError}, 1000
	docs, err := s.Sifen.List(r.Context(), f)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return fmt.Errorf("%w: no draft of RUC %s in %s", sifen.ErrLotEmpty, f.RUC, f.Env)
	}
	// The first lot that left, else the first refusal, is what the page says.
	var first *sifen.Event
	results, err := sifen.SendDocuments(r.Context(), s.Sifen, docs, sifen.BatchConfig{Clock: s.now,
		Progress: func(e sifen.Event) {
			if (e.Kind == sifen.EventLotSent && (first == nil || first.Kind != sifen.EventLotSent)) ||
				(e.Kind == sifen.EventRefused && first == nil) {
				first = &e
			}
		}})
	if err != nil {
		return err
	}
	if first == nil {
		return firstFailure(results)
	}
	out := first.LotSend
	q := url.Values{"ruc": {f.RUC}, "env": {string(f.Env)}, "result": {string(out.Status)}, "n": {strconv.Itoa(len(first.IDs))}}
	if first.TooBig > 0 {
		q.Set("toobig", strconv.Itoa(first.TooBig))
	}
	if later, wait := refusedLater(results, first); later > 0 {
		q.Set("later", strconv.Itoa(later))
		q.Set("later_wait", strconv.FormatInt(wait.WaitSeconds(), 10))
	}
	if out.LotNumber != "" {
		q.Set("lot", out.LotNumber)
	}
	if out.Status == sifen.OutcomeNotQueued && out.Code != "" {
		q.Set("code", out.Code)
	}
	if first.Blocked != nil {
		q.Set("wait", strconv.FormatInt(first.Blocked.WaitSeconds(), 10))
	}
	s.Logger.LogAttrs(r.Context(), slog.LevelInfo, "RUC drafts send", slog.String("ruc", f.RUC), slog.String("env", string(f.Env)),
		slog.Int("documents", len(first.IDs)), slog.String("outcome", string(out.Status)), slog.String("user", requestInfoFrom(r.Context()).user))
	http.Redirect(w, r, s.pathWithQuery("documents", q), http.StatusSeeOther)
	return nil
}

// refusedLater counts the documents of a "Send all drafts" pass that the
// RUC's gate refused, other than those of the first event's lot and those
// the first lot left out by size, with the shortest wait among them.
func refusedLater(results []sifen.DocResult, first *sifen.Event) (int, *sifen.Blocked) {
	n := -first.TooBig
	var soonest *sifen.Blocked
	for _, r := range results {
		if r.Result != sifen.BatchBlocked || r.Blocked == nil || slices.Contains(first.IDs, r.DocumentID) {
			continue
		}
		n++
		if soonest == nil || r.Blocked.Wait < soonest.Wait {
			soonest = r.Blocked
		}
	}
	return n, soonest
}

// firstFailure is the error of a "Send all drafts" that neither sent nor
// was refused: the first document's error (a lot rule: 400), or
// sifen.ErrNotSendable (409) when other sends took every draft.
func firstFailure(results []sifen.DocResult) error {
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	if len(results) > 0 {
		return fmt.Errorf("%w: %s", sifen.ErrNotSendable, results[0].Message)
	}
	return fmt.Errorf("%w: nothing to send", sifen.ErrLotEmpty)
}

// routeDocument is the document a document route names: 404 for a bad
// {id} or an unknown document.
func (s *Server) routeDocument(r *http.Request) (sifen.Document, error) {
	id, err := documentID(r)
	if err != nil {
		return sifen.Document{}, err
	}
	return s.Sifen.Get(r.Context(), id)
}

// documentID reads the {id} of a document route.
func documentID(r *http.Request) (int64, error) {
	vars, err := pathVars(r)
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(vars["id"], 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("%w: document id %q", errNotFound, vars["id"])
	}
	return id, nil
}
