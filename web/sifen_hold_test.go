package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// sendButton returns whether a document's row has a Send to SIFEN button,
// whether it is off, and the wait written beside it.
func sendButton(t *testing.T, rows map[string]map[string]*goquery.Selection, id int64) (present, disabled bool, wait string) {
	t.Helper()
	cells, ok := rows[strconv.FormatInt(id, 10)]
	require.True(t, ok, "document %d listed", id)
	b := cells["Send"].Find("button")
	_, disabled = b.Attr("disabled")
	return b.Length() == 1, disabled, strings.TrimSpace(cells["Send"].Find(".wait").Text())
}

// Issue 20: the documents list hid a RUC's block. What was seen: after a
// 0301 the drafts of the RUC kept an active "Send to SIFEN" button with no
// banner nor countdown, "Send all drafts of RUC" needed both the RUC and
// the env in the filter, and the "not queued" message was a green box.
// Now the list says the RUC's gate (Sender.RUCWait): a banner with the
// reason, the block level and the wait, counting down with the clock, and
// every Send button of that RUC off with the same words until it ends.
func TestDocumentsListShowsTheRUCsBlock(t *testing.T) {
	// balde's interval (1 s) is shorter than the simulator's (10 s): the
	// second lot draws 0301 and balde blocks the RUC for 10 minutes.
	e := newEnv(t, withSifen(sifenConfig{policy: sifen.PolicyConfig{Interval: time.Second}}))
	ids := e.importDocs(sifentest.Lote(sifentest.Docs("88888801", 1, 3)...), sifen.EnvTest)
	require.Equal(t, docPath(ids[0])+"?result=sent", e.send(ids[0]).Header.Get("Location"))
	e.clock.Advance(2 * time.Second)
	require.Equal(t, docPath(ids[1])+"?result=not_queued", e.send(ids[1]).Header.Get("Location"))

	// Filtered by RUC alone: the env is the RUC's documents'.
	list := document(t, e.get("/documents?ruc=88888801", asAdmin))
	hold := list.Find(".banner.ruc-hold")
	require.Equal(t, 1, hold.Length())
	require.True(t, hold.HasClass("banner-warning"), "the High colour of the RUC's block (decision 0142)")
	require.Equal(t, "RUC 88888801-5 in env test may not send now: blocked 10m0s (block 1 in a row).", hold.Find(".banner-text").Text())
	require.Contains(t, hold.Find(".banner-detail").Text(), "(0301)")
	rows := documentRows(t, list)
	for _, id := range ids[1:] { // the draft and the document in error
		present, disabled, wait := sendButton(t, rows, id)
		require.True(t, present && disabled, "document %d: Send is off", id)
		require.Equal(t, "blocked 10m0s (block 1 in a row)", wait)
	}
	sendAll := list.Find("#send-ruc")
	require.Equal(t, "Send all drafts of RUC 88888801 in test", sendAll.Text())
	_, disabled := sendAll.Attr("disabled")
	require.True(t, disabled)
	require.Contains(t, rows[strconv.FormatInt(ids[1], 10)]["Message"].Text(), "SIFEN did not queue the lot: 0301")

	// The countdown follows the clock.
	e.clock.Advance(39 * time.Second)
	list = document(t, e.get("/documents?ruc=88888801-5", asAdmin))
	require.Equal(t, "RUC 88888801-5 in env test may not send now: blocked 9m21s (block 1 in a row).", list.Find(".ruc-hold .banner-text").Text())
	_, _, wait := sendButton(t, documentRows(t, list), ids[2])
	require.Equal(t, "blocked 9m21s (block 1 in a row)", wait)

	// When the block ends, no banner, and the buttons are on again.
	e.clock.Advance(10 * time.Minute)
	list = document(t, e.get("/documents?ruc=88888801", asAdmin))
	require.Zero(t, list.Find(".ruc-hold").Length())
	present, disabled, wait := sendButton(t, documentRows(t, list), ids[2])
	require.True(t, present)
	require.False(t, disabled)
	require.Empty(t, wait)
	_, disabled = list.Find("#send-ruc").Attr("disabled")
	require.False(t, disabled)
}

// The outcome of "Send all drafts" is styled by what it was: a lot SIFEN
// did not queue is an error, but a 0301 (a warning, as its badge), a
// refusal a warning, a lot queued a success.
func TestDocumentsFlashIsStyledByOutcome(t *testing.T) {
	e := newEnv(t, withSifen(sifenConfig{}))
	for _, tc := range []struct{ query, class, role string }{
		{"result=not_queued&n=2", "flash flash-error", "alert"},
		{"result=not_queued&code=0301&n=2", "flash flash-warning", "alert"},
		{"result=failed&n=2", "flash flash-error", "alert"},
		{"result=blocked&ruc=88888801&env=test&wait=7", "flash flash-warning", "alert"},
		{"result=sent&n=2&lot=123", "flash", "status"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			resp := e.get("/documents?"+tc.query, asAdmin)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			flash := document(t, resp).Find("main p[role]").First()
			class, _ := flash.Attr("class")
			role, _ := flash.Attr("role")
			require.Equal(t, tc.class, class)
			require.Equal(t, tc.role, role)
		})
	}
}
