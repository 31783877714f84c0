package web_test

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// upload posts xml as the file of the upload form, with env.
func (e *env) upload(xml []byte, env string, opts ...reqOpt) *http.Response {
	e.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if env != "" {
		require.NoError(e.t, mw.WriteField("env", env))
	}
	if xml != nil {
		fw, err := mw.CreateFormFile("file", "lote.xml")
		require.NoError(e.t, err)
		_, err = fw.Write(xml)
		require.NoError(e.t, err)
	}
	require.NoError(e.t, mw.Close())
	opts = append([]reqOpt{withHeader("Content-Type", mw.FormDataContentType())}, opts...)
	return e.do(http.MethodPost, "/documents", &b, opts...)
}

// importDocs imports xml through the sender and returns the ids.
func (e *env) importDocs(xml []byte, env sifen.Env) []int64 {
	e.t.Helper()
	docs, err := e.sender.Import(context.Background(), xml, env)
	require.NoError(e.t, err)
	ids := make([]int64, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	return ids
}

func (e *env) doc(id int64) sifen.Document {
	e.t.Helper()
	d, err := e.sender.Get(context.Background(), id)
	require.NoError(e.t, err)
	return d
}

func (e *env) allDocs() []sifen.Document {
	e.t.Helper()
	docs, err := e.sender.List(context.Background(), sifen.Filter{})
	require.NoError(e.t, err)
	return docs
}

func docPath(id int64) string { return "/documents/" + strconv.FormatInt(id, 10) }

func (e *env) send(id int64, opts ...reqOpt) *http.Response {
	e.t.Helper()
	return e.post(docPath(id)+"/send", url.Values{}, append([]reqOpt{asAdmin}, opts...)...)
}

// banner is the text of a document page's banner.
func banner(t testing.TB, resp *http.Response) string {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return strings.TrimSpace(document(t, resp).Find(".banner .banner-text").Text())
}

// documentRows returns the document list's rows as id → cells by header.
func documentRows(t testing.TB, doc *goquery.Document) map[string]map[string]*goquery.Selection {
	t.Helper()
	var headers []string
	doc.Find("table.documents thead th").Each(func(_ int, s *goquery.Selection) { headers = append(headers, s.Text()) })
	out := map[string]map[string]*goquery.Selection{}
	doc.Find("table.documents tbody tr").Each(func(_ int, tr *goquery.Selection) {
		cells := map[string]*goquery.Selection{}
		tr.Find("td").Each(func(i int, td *goquery.Selection) { cells[headers[i]] = td })
		out[strings.TrimSpace(cells["Id"].Text())] = cells
	})
	return out
}

func TestDocumentsUploadAndList(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	lot := sifentest.Lote(sifentest.Docs("88888801", 1, 3)...)

	resp := e.upload(lot, "test", asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body(t, resp))
	require.Equal(t, "/documents?imported=3", resp.Header.Get("Location"))
	docs := e.allDocs()
	require.Len(t, docs, 3)

	resp = e.get("/documents?imported=3", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := document(t, resp)
	require.Contains(t, page.Find(".flash").Text(), "Imported 3 documents")
	rows := documentRows(t, page)
	require.Len(t, rows, 3)
	for _, d := range docs {
		r := rows[strconv.FormatInt(d.ID, 10)]
		require.Equal(t, "test", r["Env"].Text())
		require.Equal(t, "88888801-5", r["RUC"].Text())
		require.Equal(t, "draft", r["Status"].Text())
		require.Equal(t, d.CDC, r["CDC"].Text())
		action, _ := r["Send"].Find("form").Attr("action")
		require.Equal(t, docPath(d.ID)+"/send", action)
	}
	// The nav links to the documents page, marked current.
	current, _ := page.Find("header.top nav a[aria-current]").Attr("href")
	require.Equal(t, "/documents", current)

	// One DE goes straight to its page.
	resp = e.upload(sifentest.Doc{RUC: "80069563", Number: 9, Prod: true}.File(), "prod", asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body(t, resp))
	one := e.allDocs()[0]
	require.Equal(t, docPath(one.ID), resp.Header.Get("Location"))
	require.Equal(t, sifen.EnvProd, one.Env)

	filters := []struct {
		name  string
		query string
		want  int
	}{
		{"All", "", 4},
		{"RUCWithCheckDigit", "?ruc=88888801-5", 3},
		{"RUCNumber", "?ruc=80069563", 1},
		{"OtherRUC", "?ruc=99999999", 0},
		{"Env", "?env=prod", 1},
		{"Status", "?status=draft&env=test", 3},
		{"NoneSent", "?status=sent", 0},
	}
	for _, f := range filters {
		t.Run(f.name, func(t *testing.T) {
			resp := e.get("/documents"+f.query, asAdmin)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Len(t, documentRows(t, document(t, resp)), f.want)
		})
	}
}

func TestDocumentsListPagesByKeyset(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 5)...), sifen.EnvTest)

	var seen []string
	next := "/documents?limit=2"
	for pages := 0; next != ""; pages++ {
		require.Less(t, pages, 5, "the pager ends")
		page := document(t, e.get(next, asAdmin))
		page.Find("table.documents tbody tr td:first-child").Each(func(_ int, s *goquery.Selection) {
			seen = append(seen, strings.TrimSpace(s.Text()))
		})
		next, _ = page.Find(`.pager a[rel="next"]`).Attr("href")
		if next != "" {
			require.Contains(t, next, "limit=2")
		}
	}
	// Newest first, each once.
	var want []string
	for i := len(ids) - 1; i >= 0; i-- {
		want = append(want, strconv.FormatInt(ids[i], 10))
	}
	require.Equal(t, want, seen)
}

func TestDocumentsBadRequests(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}), withServer(func(s *web.Server) { s.UploadLimit = 64 << 10 }))
	valid := sifentest.Doc{RUC: "80069563"}.File()
	tests := []struct {
		name     string
		resp     func() *http.Response
		want     int
		wantText string
	}{
		{"MalformedXML", func() *http.Response { return e.upload([]byte("<rDE><unclosed>"), "test", asAdmin) }, http.StatusBadRequest, "malformed XML"},
		{"WrongCheckDigit", func() *http.Response {
			return e.upload(sifentest.Doc{RUC: "80069563", BadDV: true}.File(), "test", asAdmin)
		}, http.StatusBadRequest, "check digit"},
		{"MissingRUC", func() *http.Response { return e.upload(sifentest.Doc{NoRUC: true}.File(), "test", asAdmin) }, http.StatusBadRequest, "missing issuer RUC"},
		{"UnknownEnv", func() *http.Response { return e.upload(valid, "staging", asAdmin) }, http.StatusBadRequest, "invalid environment"},
		{"NoFile", func() *http.Response { return e.upload(nil, "test", asAdmin) }, http.StatusBadRequest, "choose the DE or lot XML file"},
		{"NotMultipart", func() *http.Response {
			return e.post("/documents", url.Values{"env": {"test"}, "file": {string(valid)}}, asAdmin)
		}, http.StatusBadRequest, "multipart/form-data"},
		{"TooLarge", func() *http.Response {
			return e.upload(sifentest.Doc{RUC: "80069563", Filler: 70 << 10}.File(), "test", asAdmin)
		}, http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
		{"BadRUCFilter", func() *http.Response { return e.get("/documents?ruc=%3Cscript%3E", asAdmin) }, http.StatusBadRequest, "invalid RUC"},
		{"WrongCheckDigitFilter", func() *http.Response { return e.get("/documents?ruc=88888801-4", asAdmin) }, http.StatusBadRequest, "the check digit of 88888801 is 5"},
		{"BadStatusFilter", func() *http.Response { return e.get("/documents?status=lost", asAdmin) }, http.StatusBadRequest, `status &#34;lost&#34;`},
		{"BadEnvFilter", func() *http.Response { return e.get("/documents?env=staging", asAdmin) }, http.StatusBadRequest, "invalid environment"},
		{"BadLimit", func() *http.Response { return e.get("/documents?limit=501", asAdmin) }, http.StatusBadRequest, "limit"},
		{"UnknownDocument", func() *http.Response { return e.get("/documents/999", asAdmin) }, http.StatusNotFound, "document not found"},
		{"SendUnknownDocument", func() *http.Response { return e.send(999) }, http.StatusNotFound, "document not found"},
		{"Unauthenticated", func() *http.Response { return e.upload(valid, "test") }, http.StatusUnauthorized, "authentication required"},
		{"CrossSiteUpload", func() *http.Response {
			return e.upload(valid, "test", asAdmin, withHeader("Sec-Fetch-Site", "cross-site"))
		}, http.StatusForbidden, "cross-origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.resp()
			require.Equal(t, tt.want, resp.StatusCode)
			require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
			b := body(t, resp)
			require.Contains(t, b, tt.wantText)
			require.NotContains(t, b, "<script>")
			require.Empty(t, e.allDocs(), "bad input stores nothing")
		})
	}
}

// TestSendDocumentBlockedRUC is seed 002: a second lot of one RUC within
// SIFEN_THROTTLE_SECONDS is refused before anything leaves, the document is
// marked with the reason and the exact wait, and the button answers a 303
// to the document, whose page says "blocked for RUC X in env Y, retry in
// N s".
func TestSendDocumentBlockedRUC(t *testing.T) {
	sqlstoretest.ForEachEngine(t, testSendDocumentBlockedRUC)
}

func testSendDocumentBlockedRUC(t *testing.T, engine sqlstore.Engine) {
	e := newEnv(t, withStore(engine), withSifen(sifenConfig{}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), sifen.EnvTest)

	resp := e.send(ids[0])
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body(t, resp))
	require.Equal(t, docPath(ids[0])+"?result=sent", resp.Header.Get("Location"))
	sent := e.doc(ids[0])
	require.Equal(t, sifen.StatusSent, sent.Status)
	require.Equal(t, "0300", sent.ResponseCode)
	require.Equal(t, "Sent: SIFEN queued lot "+sent.LotNumber+" (response code 0300).", banner(t, e.get(docPath(ids[0]), asAdmin)))

	// 3 s later the next document of the same RUC and env is refused: 7 s to go.
	e.clock.Advance(3 * time.Second)
	resp = e.send(ids[1])
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body(t, resp))
	require.Equal(t, docPath(ids[1])+"?result=blocked&wait=7", resp.Header.Get("Location"))
	blocked := e.doc(ids[1])
	require.Equal(t, sifen.StatusDraft, blocked.Status, "a refusal is shown as blocked, never as error")
	require.Equal(t, "blocked: cooldown, wait 7 s", blocked.Message)
	require.Equal(t, e.clock.Now().Add(7*time.Second), blocked.RetryAt)
	require.Equal(t, int64(1), e.sifenSends(t), "the refused lot never left")

	page := e.get(docPath(ids[1])+"?result=blocked&wait=7", asAdmin)
	require.Equal(t, "8", refreshSeconds(t, page), "the page reloads when the wait ends")
	require.Equal(t, "Blocked for RUC 88888801-5 in env test, retry in 7 s.", banner(t, page))

	// The wait counts down on reload, from the document's own mark.
	e.clock.Advance(5 * time.Second)
	require.Equal(t, "Blocked for RUC 88888801-5 in env test, retry in 2 s.", banner(t, e.get(docPath(ids[1]), asAdmin)))
	list := documentRows(t, document(t, e.get("/documents", asAdmin)))
	require.Contains(t, list[strconv.FormatInt(ids[1], 10)]["Status"].Text(), "retry in 2 s")

	// Once the wait is over the button sends it.
	e.clock.Advance(2 * time.Second)
	require.Contains(t, banner(t, e.get(docPath(ids[1]), asAdmin)), "the wait is over")
	resp = e.send(ids[1])
	require.Equal(t, docPath(ids[1])+"?result=sent", resp.Header.Get("Location"))
	require.Equal(t, sifen.StatusSent, e.doc(ids[1]).Status)
	require.Equal(t, int64(2), e.sifenSends(t))

	// The other environment is another bucket: a prod document of the same RUC goes at once.
	prod := e.importDocs(sifentest.Doc{RUC: "88888801", Number: 3, Prod: true}.File(), sifen.EnvProd)
	require.Equal(t, docPath(prod[0])+"?result=sent", e.send(prod[0]).Header.Get("Location"))
}

func refreshSeconds(t testing.TB, resp *http.Response) string {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b := body(t, resp)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(b))
	require.NoError(t, err)
	content, _ := doc.Find(`meta[http-equiv="refresh"]`).Attr("content")
	resp.Body = nopCloser{strings.NewReader(b)}
	return content
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func TestSendDocumentConflicts(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	ids := e.importDocs(sifentest.Doc{RUC: "80069563"}.File(), sifen.EnvTest)
	require.Equal(t, http.StatusSeeOther, e.send(ids[0]).StatusCode)

	// Sent already: pressing again is a conflict and changes nothing.
	resp := e.send(ids[0])
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body(t, resp), "cannot be sent now")
	require.Equal(t, int64(1), e.sifenSends(t))
	// The page of a sent document has no Send button.
	require.Zero(t, document(t, e.get(docPath(ids[0]), asAdmin)).Find("button#send").Length())

	// Importing its CDC again while it is sent is a conflict too.
	resp = e.upload(sifentest.Doc{RUC: "80069563"}.File(), "test", asAdmin)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body(t, resp), "CDC already sent")
}

func TestSendDocumentCSRF(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	ids := e.importDocs(sifentest.Doc{RUC: "80069563"}.File(), sifen.EnvTest)
	tests := []struct {
		name string
		opts []reqOpt
		want int
	}{
		{"CrossSite", []reqOpt{withHeader("Sec-Fetch-Site", "cross-site")}, http.StatusForbidden},
		{"OtherOrigin", []reqOpt{withHeader("Origin", "https://evil.example")}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, e.send(ids[0], tt.opts...).StatusCode)
			require.Equal(t, sifen.StatusDraft, e.doc(ids[0]).Status)
		})
	}
	resp := e.post(docPath(ids[0])+"/send", url.Values{})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Zero(t, e.sifenSends(t))
	require.Equal(t, http.StatusSeeOther, e.send(ids[0], withHeader("Sec-Fetch-Site", "same-origin")).StatusCode)
	require.Equal(t, int64(1), e.sifenSends(t))
}

// TestSendDocumentNotQueued: the local interval (1 s) is shorter than the
// simulator's (10 s): SIFEN answers 0301 and the page says so.
func TestSendDocumentNotQueued(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{policy: sifen.PolicyConfig{Interval: time.Second}}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), sifen.EnvTest)
	require.Equal(t, docPath(ids[0])+"?result=sent", e.send(ids[0]).Header.Get("Location"))
	e.clock.Advance(2 * time.Second)

	resp := e.send(ids[1])
	require.Equal(t, docPath(ids[1])+"?result=not_queued", resp.Header.Get("Location"))
	d := e.doc(ids[1])
	require.Equal(t, sifen.StatusError, d.Status)
	require.Equal(t, sifen.CodeLotNotQueued, d.ResponseCode)
	page := document(t, e.get(docPath(ids[1]), asAdmin))
	// Issue 11: the page never says "may be sent again" while the RUC is
	// blocked locally after the 0301 (10 minutes for the first).
	require.Equal(t, "Blocked for RUC 88888801-5 in env test, retry in 10m0s.", page.Find(".banner-text").Text())
	require.Contains(t, page.Find(".banner-detail").Text(), "SIFEN did not queue the lot: 0301")
	e.clock.Advance(10 * time.Minute)
	page = document(t, e.get(docPath(ids[1]), asAdmin))
	// Then it may be sent again, said with its name (decision 0142).
	require.Equal(t, "Not queued (0301): the RUC's block is over, it may be sent again.", page.Find(".banner-text").Text())
	require.Equal(t, 1, page.Find("button#send").Length(), "it may be sent again")
}

// fakeSender is a SifenSender with function fields.
type fakeSender struct {
	web.SifenSender
	SendFn func(ctx context.Context, ids ...int64) (sifen.LotSend, error)
}

func (f fakeSender) Send(ctx context.Context, ids ...int64) (sifen.LotSend, error) {
	return f.SendFn(ctx, ids...)
}

func TestSendDocumentOutcomes(t *testing.T) {
	tests := []struct {
		name         string
		out          sifen.LotSend
		err          error
		wantStatus   int
		wantLocation string
		wantText     string
	}{
		{"Failed", sifen.LotSend{Status: sifen.OutcomeFailed}, nil, http.StatusSeeOther, "?result=failed", ""},
		{"Unknown", sifen.LotSend{Status: sifen.OutcomeUnknown}, nil, http.StatusSeeOther, "?result=unknown", ""},
		{"LotTooBig", sifen.LotSend{}, sifen.ErrLotTooBig, http.StatusBadRequest, "", "lot message larger than 1000 KB"},
		{"AlreadySent", sifen.LotSend{}, sifen.ErrLotAlreadySent, http.StatusConflict, "", "lot already sent"},
		{"StoreDown", sifen.LotSend{}, throttle.ErrStoreUnavailable, http.StatusServiceUnavailable, "", "the store is unavailable"},
		{"SIFENFault", sifen.LotSend{}, &sifen.RemoteError{Service: "siRecepLoteDE", StatusCode: 500, Fault: "env:Receiver"}, http.StatusBadGateway, "", "SOAP fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			fake := fakeSender{SendFn: func(_ context.Context, ids ...int64) (sifen.LotSend, error) {
				got = ids
				return tt.out, tt.err
			}}
			e := newEnv(t, withSifen(sifenConfig{fake: &fake}))
			resp := e.send(42)
			require.Equal(t, []int64{42}, got)
			require.Equal(t, tt.wantStatus, resp.StatusCode)
			if tt.wantLocation != "" {
				require.Equal(t, docPath(42)+tt.wantLocation, resp.Header.Get("Location"))
			}
			if tt.wantText != "" {
				require.Contains(t, body(t, resp), tt.wantText)
			}
		})
	}
}

// TestDocumentPageEscapes: text from the document and from SIFEN is
// escaped, never markup.
func TestDocumentPageEscapes(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	xml := sifentest.Doc{RUC: "80069563"}.File()
	xml = bytes.Replace(xml, []byte("Cliente de prueba"), []byte("&lt;script&gt;alert(1)&lt;/script&gt;<!-- <b>x</b> -->"), 1)
	ids := e.importDocs(xml, sifen.EnvTest)

	resp := e.get(docPath(ids[0]), asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b := body(t, resp)
	require.NotContains(t, b, "<script>")
	require.NotContains(t, b, "<b>x</b>")
	require.Contains(t, b, "&amp;lt;script&amp;gt;", "the XML's own escapes are shown as written")
	require.Contains(t, b, "&lt;!-- &lt;b&gt;x&lt;/b&gt; --&gt;")
}

func TestDocumentsPagesOff(t *testing.T) {
	e := newEnv(t)
	require.Equal(t, http.StatusNotFound, e.get("/documents", asAdmin).StatusCode)
	require.Equal(t, http.StatusNotFound, e.send(1).StatusCode)
	nav := document(t, e.get("/admin/buckets", asAdmin)).Find("header.top nav a")
	require.Equal(t, []string{"Buckets", "Decisions", "What if"}, nav.Map(func(_ int, a *goquery.Selection) string { return a.Text() }),
		"only Buckets, Decisions and What if: no documents, no DICT lookup")
}

// TestSendAllDraftsOfRUC: issue 11, the "Send all drafts of RUC …" button:
// one lot of up to 50 drafts of one RUC and type, behind the same throttle
// check; a refusal shows as blocked with the wait, the drafts stay drafts.
func TestSendAllDraftsOfRUC(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 60)...), sifen.EnvTest)
	other := e.importDocs(sifentest.Lote(sifentest.Docs("80069563", 1, 2)...), sifen.EnvTest)

	page := document(t, e.get("/documents?ruc=88888801&env=test", asAdmin))
	require.Equal(t, "Send all drafts of RUC 88888801 in test", strings.TrimSpace(page.Find("button#send-ruc").Text()))
	require.Zero(t, document(t, e.get("/documents", asAdmin)).Find("button#send-ruc").Length(), "only on a list of one RUC and env")

	form := url.Values{"ruc": {"88888801-5"}, "env": {"test"}}
	resp := e.post("/documents/send-ruc", form, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body(t, resp))
	loc := resp.Header.Get("Location")
	require.Contains(t, loc, "result=sent")
	require.Contains(t, loc, "n=50")
	for i, id := range ids {
		want := sifen.StatusSent
		if i >= 50 {
			want = sifen.StatusDraft
		}
		require.Equal(t, want, e.doc(id).Status, "document %d", i+1)
	}
	require.Equal(t, sifen.StatusDraft, e.doc(other[0]).Status)
	flash := document(t, e.get(loc, asAdmin)).Find(".flash").Text()
	require.Contains(t, flash, "Sent a lot of 50 document(s)")
	require.Contains(t, flash, "10 more draft(s) wait for the RUC (its interval between lots, or a block): press the button again in 10 s.")

	// Pressed again at once: blocked, the wait shown, nothing sent, drafts stay drafts.
	resp = e.post("/documents/send-ruc", form, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc = resp.Header.Get("Location")
	require.Contains(t, loc, "result=blocked")
	require.Contains(t, loc, "wait=10")
	require.Equal(t, "Blocked for RUC 88888801 in env test, retry in 10 s: nothing was sent.", document(t, e.get(loc, asAdmin)).Find(".flash").Text())
	require.Equal(t, sifen.StatusDraft, e.doc(ids[55]).Status)
	require.Equal(t, int64(1), e.sifenSends(t))

	e.clock.Advance(10 * time.Second)
	resp = e.post("/documents/send-ruc", form, asAdmin)
	require.Contains(t, resp.Header.Get("Location"), "n=10")
	require.Equal(t, sifen.StatusSent, e.doc(ids[59]).Status)

	resp = e.post("/documents/send-ruc", form, asAdmin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no draft left")
}

// TestSendAllDraftsOfRUCTooBig: issue 11 audit, point 3. 40 drafts of one
// RUC whose lot message would exceed 1000 KB: the button sends the longest
// prefix that fits (as sifen-send splits), the rest stay drafts and the
// page says so; the next press, once the interval has passed, sends them.
func TestSendAllDraftsOfRUCTooBig(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	big := sifentest.Docs("800695", 1, 40)
	for i := range big {
		big[i].Filler = 40_000
	}
	ids := e.importDocs(sifentest.Lote(big...), sifen.EnvTest)
	form := url.Values{"ruc": {"800695-" + strconv.Itoa(big[0].DV())}, "env": {"test"}}

	sent := 0
	for press := 1; sent < len(ids); press++ {
		require.LessOrEqual(t, press, 4, "40 drafts of 40 KB go in a few presses")
		resp := e.post("/documents/send-ruc", form, asAdmin)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body(t, resp))
		loc := resp.Header.Get("Location")
		require.Contains(t, loc, "result=sent", loc)
		u, err := url.Parse(loc)
		require.NoError(t, err)
		n, err := strconv.Atoi(u.Query().Get("n"))
		require.NoError(t, err)
		require.Positive(t, n)
		for i, id := range ids {
			want := sifen.StatusDraft
			if i < sent+n {
				want = sifen.StatusSent
			}
			require.Equal(t, want, e.doc(id).Status, "press %d, document %d", press, i+1)
		}
		flash := document(t, e.get(loc, asAdmin)).Find(".flash").Text()
		require.Contains(t, flash, fmt.Sprintf("Sent a lot of %d document(s)", n))
		if left := len(ids) - sent - n; left > 0 {
			require.Less(t, n, len(ids))
			require.Contains(t, flash, fmt.Sprintf("%d more draft(s) stay drafts: with them the SOAP message would exceed 1000 KB.", left))
		} else {
			require.NotContains(t, flash, "stay drafts")
		}
		sent += n
		e.clock.Advance(10 * time.Second)
	}
	require.Equal(t, int64(0), e.sim.Stats().Count("siRecepLoteDE", "", "", sifen.CodeLotNotQueued), "SIFEN never refused a lot")
}

// TestUploadRefusesDeepNesting: issue 13 point 1. A DE nested 30,000 deep
// took seconds to parse (and 500,000 deep kept serve busy for minutes):
// it is refused at once with a 400, and nothing is stored.
func TestUploadRefusesDeepNesting(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	valid := sifentest.Doc{}.XML()
	i := bytes.Index(valid, []byte("<gDatRec>"))
	deep := append(append(bytes.Clone(valid[:i]), []byte(strings.Repeat("<x>", 30000)+strings.Repeat("</x>", 30000))...), valid[i:]...)
	start := time.Now()
	resp := e.upload(deep, "test", asAdmin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body(t, resp), "nested deeper than 64")
	require.Less(t, time.Since(start), 2*time.Second)
	docs, err := e.sender.List(context.Background(), sifen.Filter{})
	require.NoError(t, err)
	require.Empty(t, docs)
}

// An upload refused with a 4xx re-renders the documents page: the form
// keeps the environment chosen, names the file refused and shows why next
// to it; nothing is stored (issue 14 point 9: upload errors dropped the
// form).
func TestUploadErrorKeepsTheForm(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}), withServer(func(s *web.Server) { s.UploadLimit = 64 << 10 }))
	tests := []struct {
		name     string
		xml      []byte
		env      string
		want     int
		wantText string
	}{
		{"WrongCheckDigit", sifentest.Doc{RUC: "80069563", BadDV: true}.File(), "prod", http.StatusBadRequest, "check digit"},
		{"MalformedXML", []byte("<rDE><unclosed>"), "prod", http.StatusBadRequest, "malformed XML"},
		{"TooLarge", sifentest.Doc{RUC: "80069563", Filler: 70 << 10}.File(), "prod", http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
		{"NoFile", nil, "prod", http.StatusBadRequest, "choose the DE or lot XML file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.upload(tt.xml, tt.env, asAdmin)
			require.Equal(t, tt.want, resp.StatusCode)
			doc := document(t, resp)
			form := doc.Find(`section.upload form[enctype="multipart/form-data"]`)
			require.Equal(t, 1, form.Length(), "the upload form is on the page")
			selected, _ := form.Find(`select[name="env"] option[selected]`).Attr("value")
			require.Equal(t, tt.env, selected, "the environment chosen is kept")
			alert := strings.TrimSpace(doc.Find(`section.upload [role="alert"]`).Text())
			require.Contains(t, alert, tt.wantText)
			if tt.xml != nil && tt.want != http.StatusRequestEntityTooLarge {
				require.Contains(t, alert, "lote.xml", "the refused file is named")
			}
			require.Equal(t, 1, doc.Find(`form[method="get"] select[name="status"]`).Length(), "the list's filter is there too")
			require.Empty(t, e.allDocs(), "bad input stores nothing")
		})
	}
}

// Issue 22, item 2: a lot SIFEN answered 0301 is never built again as it
// was. The first press draws 0301 (another client of the RUC sent a lot
// just before: SIFEN's interval); after the block, the next press sends the
// first half of those drafts, and the press after the interval the other
// half. Before, the same lot of 50 was built again.
func TestSendAllDraftsAfter0301SendsHalves(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 50)...), sifen.EnvTest)
	other, err := sifen.ParseLote(sifentest.Lote(sifentest.Docs("88888801", 500, 1)...))
	require.NoError(t, err)
	packed, err := other.Pack()
	require.NoError(t, err)
	c, err := sifen.NewClient(sifen.ClientConfig{BaseURL: e.simURL + "/{env}", Timeout: 10 * time.Second})
	require.NoError(t, err)
	resp, err := c.RecepcionLote(context.Background(), sifen.EnvTest, packed.Zip)
	require.NoError(t, err)
	require.Equal(t, "0300", resp.Code)

	form := url.Values{"ruc": {"88888801-5"}, "env": {"test"}}
	press := func() url.Values {
		t.Helper()
		r := e.post("/documents/send-ruc", form, asAdmin)
		require.Equal(t, http.StatusSeeOther, r.StatusCode, body(t, r))
		u, err := url.Parse(r.Header.Get("Location"))
		require.NoError(t, err)
		return u.Query()
	}
	q := press()
	require.Equal(t, string(sifen.OutcomeNotQueued), q.Get("result"))
	require.Equal(t, "50", q.Get("n"))
	require.Equal(t, sifen.StatusError, e.doc(ids[0]).Status)

	e.clock.Advance(sifen.DefaultRemoteBlock)
	q = press()
	require.Equal(t, string(sifen.OutcomeSent), q.Get("result"))
	require.Equal(t, "25", q.Get("n"), "the first half, not the lot that drew 0301")
	e.clock.Advance(10 * time.Second)
	q = press()
	require.Equal(t, string(sifen.OutcomeSent), q.Get("result"))
	require.Equal(t, "25", q.Get("n"))
	for i, id := range ids {
		require.Equal(t, sifen.StatusSent, e.doc(id).Status, "document %d", i+1)
	}
	require.Equal(t, int64(1), e.sim.Stats().Count("siRecepLoteDE", "", "", sifen.CodeLotNotQueued))
}
