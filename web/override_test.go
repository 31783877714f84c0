package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/audit/auditsql"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// lossyFront loses the answers of siRecepLoteDE while lose is set (the
// simulator gets the lot when simTakes is set too), and answers siConsDE
// itself while consDE is set.
type lossyFront struct {
	mu             sync.Mutex
	lose, simTakes bool
	consDE         http.HandlerFunc
}

func (f *lossyFront) set(lose, simTakes bool, consDE http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose, f.simTakes, f.consDE = lose, simTakes, consDE
}

func (f *lossyFront) wrap(sim http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		lose, simTakes, consDE := f.lose, f.simTakes, f.consDE
		f.mu.Unlock()
		switch {
		case lose && strings.HasSuffix(r.URL.Path, sifen.RecepcionPath):
			if simTakes {
				sim.ServeHTTP(httptest.NewRecorder(), r)
			}
			w.WriteHeader(http.StatusGatewayTimeout)
		case consDE != nil && strings.HasSuffix(r.URL.Path, sifen.ConsultaPath):
			consDE(w, r)
		default:
			sim.ServeHTTP(w, r)
		}
	})
}

// The override of SIFEN's 48 hours on the documents pages: an admin
// confirms with a reason after reading the risk; balde asks SIFEN by CDC
// and overrides only on 0420 (the document is then sent by the normal
// Send); a 0422 is refused with the dProtAut and approves the document;
// another answer changes nothing; no reason is a 400; a viewer gets a 403,
// recorded as refused. Every tried override is in the audit trail.
func TestOverrideOnTheDocumentPages(t *testing.T) {
	var trail *auditsql.Store
	front := &lossyFront{}
	e := newEnv(t, withViewer(t), withAudit(t, &trail), withSifen(sifenConfig{front: front.wrap}))
	number := 0
	// sendLost sends a new document whose answer is lost: it stays in
	// sending.
	sendLost := func(simTakes bool) (int64, string) {
		number++
		front.set(true, simTakes, nil)
		id := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", number, 1)...), sifen.EnvTest)[0]
		e.clock.Advance(time.Minute) // the RUC's interval since its last lot
		require.Equal(t, http.StatusSeeOther, e.send(id).StatusCode)
		require.Equal(t, sifen.StatusSending, e.doc(id).Status)
		front.set(false, false, nil)
		e.clock.Advance(3 * time.Minute)
		return id, docPath(id) + "/override"
	}
	reason := url.Values{"confirm": {"yes"}, "reason": {"customer waiting, SIFEN says 0420"}}

	id, path := sendLost(false)
	page := document(t, e.get(docPath(id), asAdmin))
	require.Equal(t, path, page.Find(`a[href$="/override"]`).AttrOr("href", ""), "the document page offers the override")
	viewerPage := document(t, e.get(docPath(id), asViewer))
	require.Zero(t, viewerPage.Find(`a[href$="/override"]`).Length())
	_, disabled := viewerPage.Find("p.override button").Attr("disabled")
	require.True(t, disabled, "a viewer's is disabled")

	confirm := e.get(path, asAdmin)
	require.Equal(t, http.StatusOK, confirm.StatusCode)
	c := document(t, confirm)
	require.Contains(t, c.Find("p.warning").Text(), "SIFEN may still be processing the first send")
	_, required := c.Find(`form input[name="reason"]`).Attr("required")
	require.True(t, required)

	// A viewer: 403 on the page and the form, recorded; nothing changes.
	require.Equal(t, http.StatusForbidden, e.get(path, asViewer).StatusCode)
	require.Equal(t, http.StatusForbidden, e.post(path, reason, asViewer).StatusCode)
	// No reason: 400, nothing asked, nothing changes.
	resp := e.post(path, url.Values{"confirm": {"yes"}, "reason": {"  "}}, asAdmin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body(t, resp), "an override needs a reason")
	require.Equal(t, sifen.StatusSending, e.doc(id).Status)
	require.Zero(t, e.sim.Stats().Count(sifen.ServiceConsultaDE, "", "", ""), "SIFEN was not asked")

	// 0420: overridden, then sent by the document's Send button.
	resp = e.post(path, reason, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, docPath(id)+"?result=overridden", resp.Header.Get("Location"))
	require.Equal(t, sifen.StatusDraft, e.doc(id).Status)
	require.Contains(t, document(t, e.get(docPath(id), asAdmin)).Find(".banner").Text(), "override")
	send := e.send(id)
	require.Equal(t, http.StatusSeeOther, send.StatusCode)
	require.Contains(t, send.Header.Get("Location"), "result=sent")

	// 0422: refused with the authorisation number; the document follows
	// SIFEN's answer.
	found, foundPath := sendLost(true)
	resp = e.post(foundPath, reason, asAdmin)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	aut := regexp.MustCompile(`dProtAut ([0-9]+)`).FindStringSubmatch(body(t, resp))
	require.NotNil(t, aut, "the page names the authorisation number")
	require.Equal(t, sifen.StatusApproved, e.doc(found).Status)
	require.Equal(t, aut[1], e.doc(found).AuthNumber)

	// Another answer: nothing changes.
	other, otherPath := sendLost(false)
	front.set(false, false, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	resp = e.post(otherPath, reason, asAdmin)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Contains(t, body(t, resp), "nothing was overridden")
	require.Equal(t, sifen.StatusSending, e.doc(other).Status)

	var got []audit.Entry
	es, err := trail.List(t.Context(), audit.Query{})
	require.NoError(t, err)
	for _, en := range es {
		if en.Action == audit.ActionSifenOverride || en.Action == audit.ActionDenied {
			require.False(t, en.At.IsZero())
			got = append(got, audit.Entry{User: en.User, Action: en.Action, Target: en.Target, Reason: en.Reason, Outcome: en.Outcome})
		}
	}
	ids := strconv.FormatInt(id, 10)
	why := reason.Get("reason")
	denied := "error=this+action+needs+the+admin+role%3B+viewers+can+only+read&status=403"
	require.Equal(t, []audit.Entry{ // newest first
		{User: adminUser, Action: audit.ActionSifenOverride, Target: strconv.FormatInt(other, 10), Reason: why,
			Outcome: url.Values{"error": {"document " + strconv.FormatInt(other, 10) + `: siConsDE: HTTP 503: "down\n"; nothing was overridden`}, "status": {"502"}}.Encode()},
		{User: adminUser, Action: audit.ActionSifenOverride, Target: strconv.FormatInt(found, 10), Reason: why, Outcome: "auth=" + aut[1] + "&code=0422&result=found"},
		{User: adminUser, Action: audit.ActionSifenOverride, Target: ids, Reason: why, Outcome: "code=0420&result=overridden"},
		{User: viewerUser, Action: audit.ActionDenied, Target: "action=sifen-override&target=" + ids, Reason: why, Outcome: denied},
		{User: viewerUser, Action: audit.ActionDenied, Target: "action=sifen-override&target=" + ids, Outcome: denied},
	}, got)

	// The Audit page says it in words.
	a := document(t, e.get("/admin/audit?action=sifen-override", asAdmin)).Text()
	require.Contains(t, a, "SIFEN 48-hour override")
	require.Contains(t, a, "overridden: sendable again · code 0420")
	require.Contains(t, a, "found at SIFEN: approved, not overridden · code 0422 · dProtAut "+aut[1])
}
