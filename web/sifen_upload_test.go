package web_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// uploadReplacing posts xml as the upload form's file, for env, with the
// "Replace a draft of the same CDC" box ticked.
func (e *env) uploadReplacing(xml []byte, env string, opts ...reqOpt) *http.Response {
	e.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	require.NoError(e.t, mw.WriteField("env", env))
	require.NoError(e.t, mw.WriteField("replace", "1"))
	fw, err := mw.CreateFormFile("file", "lote.xml")
	require.NoError(e.t, err)
	_, err = fw.Write(xml)
	require.NoError(e.t, err)
	require.NoError(e.t, mw.Close())
	opts = append([]reqOpt{withHeader("Content-Type", mw.FormDataContentType())}, opts...)
	return e.do(http.MethodPost, "/documents", &b, opts...)
}

// Issue 22 item 6: uploading a CDC a draft already holds, with other
// content, does not silently replace it (on the old code the second upload
// won, without a word): it is refused with a 409 that says what to do, and
// the box replaces it when ticked. The same file again is the same draft.
func TestUploadOfADraftsCDC(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	first := sifentest.Doc{RUC: "80069563"}
	second := first
	second.Filler = 10 // the same CDC, other content
	id := e.importDocs(first.File(), sifen.EnvTest)[0]

	resp := e.upload(first.File(), "test", asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the same file is the same draft")
	require.Equal(t, docPath(id), resp.Header.Get("Location"))

	resp = e.upload(second.File(), "test", asAdmin)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	page := document(t, resp)
	banner := page.Find(".upload .banner-error").Text()
	require.Contains(t, banner, fmt.Sprintf("CDC %s is already document %d, a draft (or an error) with other content: nothing was imported", first.CDC(), id))
	require.Contains(t, banner, `tick "Replace a draft of the same CDC" and upload it again`)
	require.Equal(t, string(first.XML()), string(e.doc(id).XML), "the draft keeps its content")
	require.Len(t, e.allDocs(), 1)

	resp = e.uploadReplacing(second.File(), "test", asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, docPath(id), resp.Header.Get("Location"))
	d := e.doc(id)
	require.Equal(t, string(second.XML()), string(d.XML))
	require.Equal(t, "content replaced by an import (was draft)", d.Message)
	require.Len(t, e.allDocs(), 1, "replaced, not added: "+strconv.Itoa(len(e.allDocs())))
}

// Replacing never reaches a document SIFEN may hold: a sent CDC is a
// conflict with the box ticked too.
func TestUploadReplacingASentCDCIsAConflict(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	doc := sifentest.Doc{RUC: "80069563"}
	id := e.importDocs(doc.File(), sifen.EnvTest)[0]
	require.Equal(t, http.StatusSeeOther, e.send(id).StatusCode)
	other := doc
	other.Filler = 10
	resp := e.uploadReplacing(other.File(), "test", asAdmin)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	page := document(t, resp)
	require.Contains(t, page.Find(".upload .banner-error").Text(), "CDC already sent")
	_, checked := page.Find(`input[name="replace"]`).Attr("checked")
	require.True(t, checked, "the box stays as the user left it")
	require.Equal(t, sifen.StatusSent, e.doc(id).Status)
}
