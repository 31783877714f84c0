package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
)

// chromiumPath finds Debian's chromium (BALDE_CHROMIUM overrides), or "".
func chromiumPath() string {
	if p := os.Getenv("BALDE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactsDir is test-artifacts/ at the module's root (gitignored).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "test-artifacts"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// TestBrowserSendTwiceIsBlocked drives a real browser against serve (on
// 127.0.0.1:0, a temporary SQLite file, the in-process simulators): it
// opens the admin page with basic auth, uploads a lot of two DEs of one
// RUC, presses Send to SIFEN on each, and sees the second refused with
// "blocked for RUC X in env Y, retry in N s". Screenshots go to
// test-artifacts/.
func TestBrowserSendTwiceIsBlocked(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("chromium not found: install Debian's package (apt-get install -y chromium) or set BALDE_CHROMIUM; .ci/run installs it")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	start := time.Now()
	sm := runServeMain(t, map[string]string{
		"BALDE_DB":             "sqlite://" + filepath.Join(t.TempDir(), "balde.db"),
		"BALDE_ADMIN_USER":     "ops",
		"BALDE_ADMIN_PASSWORD": "browser-pw",
	})
	lot := filepath.Join(t.TempDir(), "lote.xml")
	require.NoError(t, os.WriteFile(lot, sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), 0o644))
	artifacts := artifactsDir(t)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	ctx := startBrowser(t, opts, 45*time.Second)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err, sel)
		return strings.TrimSpace(s)
	}
	screenshot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG (less is JPEG)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(artifacts, name), shot, 0o644))
	}

	// Basic auth on every request the page makes (forms and stylesheet too).
	require.NoError(t, chromedp.Do(ctx,
		sendHeaders(network.Headers{"Authorization": basicAuth("ops", "browser-pw")}),
		chromedp.Navigate(sm.url+"/admin/buckets"),
		chromedp.WaitVisible(css("main h1")),
	))
	require.Equal(t, "Bucket states", text("main h1"))
	require.Contains(t, text("header.top .user"), "ops")

	// Upload the lot from the documents page.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`header.top nav a[href="/documents"]`)),
		chromedp.WaitVisible(css(`input[name="file"]`)),
		chromedp.SetUploadFiles(css(`input[name="file"]`), []string{lot}),
		chromedp.SetValue(css(`select[name="env"]`), "test"),
		chromedp.Click(css(`form[enctype="multipart/form-data"] button[type="submit"]`)),
		chromedp.WaitVisible(css(`table.documents`)),
	))
	require.Contains(t, text(".flash"), "Imported 2 documents")

	// Send the older document: SIFEN queues it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(css(`table.documents tbody tr:last-child form button`)),
		chromedp.WaitVisible(css(`.banner-text`)),
	))
	require.Regexp(t, `^Sent: SIFEN queued lot [0-9]{17} \(response code 0300\)\.$`, text(".banner-text"))

	// The list says the RUC cools down: its Send buttons are off.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(sm.url+"/documents"),
		chromedp.WaitVisible(css(`table.documents`)),
	))
	require.Contains(t, text(".ruc-hold .banner-text"), "RUC 88888801-5 in env test may not send now: cooldown")
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("table.documents tbody tr form button").disabled`))
	require.NoError(t, err)
	require.True(t, disabled, "Send is off while the RUC waits")

	// Sent anyway at once (a form submitted from an older page): the
	// throttle blocks the RUC, nothing leaves.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Submit(css(`table.documents tbody tr form`)),
		chromedp.WaitVisible(css(`h1 .badge`)),
		chromedp.WaitVisible(css(`.banner-warning`)),
	))
	blocked := text(".banner-warning .banner-text")
	m := regexp.MustCompile(`^Blocked for RUC 88888801-5 in env test, retry in ([0-9]+) s\.$`).FindStringSubmatch(blocked)
	require.NotNil(t, m, blocked)
	wait, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.True(t, wait >= 1 && wait <= 10, "the wait is what is left of the 10 s interval: %d", wait)
	location, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Regexp(t, `/documents/[0-9]+\?result=blocked&wait=[0-9]+$`, location)
	screenshot("browser_blocked.png")

	// The admin page now shows the RUC's bucket in its cooldown.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(sm.url+"/admin/buckets"),
		chromedp.WaitVisible(css(`table.buckets`)),
	))
	rows := strings.Join(strings.Fields(text("table.buckets tbody")), " ")
	require.Contains(t, rows, "SIFEN_RECEPCION_LOTE RUC 88888801 test")
	screenshot("browser_admin_buckets.png")
	t.Logf("browser test took %s; screenshots in %s", time.Since(start).Round(time.Millisecond), artifacts)
}

// browserOptions are the flags TESTING.md asks for, and a fresh profile.
// startBrowser starts chromium with opts and returns a context for its
// pages bounded by d; the browser stops when the test ends. The first run
// starts the browser, which lives as long as its own context: no timeout on
// that one, a bound on everything after.
func startBrowser(t *testing.T, opts []chromedp.ExecAllocatorOption, d time.Duration) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(browser))
	ctx, cancel := context.WithTimeout(browser, d)
	t.Cleanup(cancel)
	return ctx
}

// sendHeaders adds h to every request the page makes (forms and
// stylesheets too).
func sendHeaders(h network.Headers) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h})
		return err
	})
}

// basicAuth is the Authorization header of user and password.
func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func browserOptions(t *testing.T, chromium string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
}

// seedOperatorBuckets puts, at the real time, a Critical DICT user bucket
// (emptied), a negative one (a penalty), a participant bucket and a RUC
// cooling down into db, through the engine every command uses. The
// participant bucket holds 45 tokens, stored Healthy under the strictest
// category's capacity of 50 (no category learned yet); serve learns the
// simulator's category A (capacity 50,000), under which it is Critical.
// Category A refills 25,000 tokens a minute, which would make it High 12 s
// later: the participant's take is stamped 10 minutes ahead, and a bucket
// gains nothing until the clock passes its stamp, so it stays Critical for
// the whole test however slow the machine.
func seedOperatorBuckets(t *testing.T, db string) (critical, negative, participant throttle.Key) {
	t.Helper()
	ctx := context.Background()
	cfg := settings.Default()
	cfg.DB = db
	eng, err := openEngine(ctx, cfg, balde.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(ctx)) }()
	critical = throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: payerCPF}
	negative = throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "11144477735"}
	participant = throttle.Key{Policy: dict.PolicyEntriesReadParticipantAntiscan, Env: "prod", Identifier: "12345678"}
	for _, c := range []throttle.Charge{{Key: critical, Cost: 100}, {Key: negative, Cost: 100}, {Key: seededRUC, Cost: 1}} {
		d, err := eng.Limiter().Take(ctx, "seed", c)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	ahead, err := openEngine(ctx, cfg, balde.Config{Clock: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	require.NoError(t, err)
	d, err := ahead.Limiter().Take(ctx, "seed", throttle.Charge{Key: participant, Cost: 5})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.NoError(t, ahead.Close(ctx))
	_, err = eng.Limiter().Adjust(ctx, throttle.Adjustment{Key: negative, Delta: -20, Reason: throttle.LedgerPenalty, Ref: "seed-404"})
	require.NoError(t, err)
	st, err := eng.Limiter().State(ctx, participant)
	require.NoError(t, err)
	require.Equal(t, throttle.SeverityHealthy, st.Bucket.Severity, "stored Healthy: 45 of 50")
	return critical, negative, participant
}

// TestBrowserOperatorPages takes, in English, Portuguese and Spanish, at
// 1400 px and at a phone's 390 px, screenshots of the summary, the list
// filtered by a card, a bucket's chart and the documents page (saved in
// test-artifacts/operator_*.png), and asserts what an operator reads: the
// severity a row shows is the severity the API computes now, the cards'
// counts match the filtered list, the words are in the language asked for,
// and nothing is wider than the phone (document scrollWidth <= 390).
func TestBrowserOperatorPages(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("chromium not found: install Debian's package (apt-get install -y chromium) or set BALDE_CHROMIUM; .ci/run installs it")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	start := time.Now()
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	critical, negative, participant := seedOperatorBuckets(t, db)
	sm := runServeMain(t, map[string]string{
		"BALDE_DB":             db,
		"BALDE_ADMIN_USER":     "ops",
		"BALDE_ADMIN_PASSWORD": "browser-pw",
	})
	lot := filepath.Join(t.TempDir(), "lote.xml")
	require.NoError(t, os.WriteFile(lot, sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), 0o644))
	badLot := filepath.Join(t.TempDir(), "bad.xml")
	require.NoError(t, os.WriteFile(badLot, []byte("<rDE><unclosed>"), 0o644))
	artifacts := artifactsDir(t)

	ctx := startBrowser(t, browserOptions(t, chromium), 150*time.Second)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	headers := func(lang string) chromedp.Action[chromedp.Void] {
		return sendHeaders(network.Headers{"Authorization": basicAuth("ops", "browser-pw"), "Accept-Language": lang})
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err, sel)
		return strings.TrimSpace(s)
	}
	// Two documents on the documents page.
	require.NoError(t, chromedp.Do(ctx, headers("en"),
		chromedp.Navigate(sm.url+"/documents"),
		chromedp.WaitVisible(css(`input[name="file"]`)),
		chromedp.SetUploadFiles(css(`input[name="file"]`), []string{lot}),
		chromedp.SetValue(css(`select[name="env"]`), "test"),
		chromedp.Click(css(`form[enctype="multipart/form-data"] button[type="submit"]`)),
		chromedp.WaitVisible(css(`table.documents`)),
	))

	// severityNow is what GET /api/buckets/KEY computes now.
	severityNow := func(k throttle.Key) string {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(sm.url+"/api/buckets/"+k.Policy+"/"+k.Env+"/"+k.Identifier)))
		body := text("body")
		var b view.APIBucket
		require.NoError(t, json.Unmarshal([]byte(body), &b), body)
		return b.Severity
	}
	for _, lang := range []struct {
		accept, title string
	}{{"en", "Bucket states"}, {"pt-BR", "Estado dos baldes"}, {"es-PY", "Estado de los baldes"}} {
		tr := i18n.FromAcceptLanguage(lang.accept, nil)
		for _, width := range []int64{1400, 390} {
			shoot := func(page string) {
				t.Helper()
				// Measured before the screenshot: a full-page screenshot
				// resizes the emulated screen to the content.
				if width <= 390 {
					sw, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
					require.NoError(t, err)
					wide, werr := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => { const out = []; const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); let n; while ((n = w.nextNode())) { if (n.parentElement.closest(".scroll")) continue; const r = document.createRange(); r.selectNodeContents(n); const b = r.getBoundingClientRect(); if (b.right > window.innerWidth + 1) out.push(n.parentElement.tagName + "." + n.parentElement.getAttribute("class") + " " + Math.round(b.right) + " " + n.textContent.trim().slice(0, 40)); } for (const e of document.querySelectorAll("body *")) { if (e.closest(".scroll")) continue; const b = e.getBoundingClientRect(); if (b.right > window.innerWidth + 1) out.push(e.tagName + "." + e.getAttribute("class") + " " + Math.round(b.right)); } return out.slice(0, 10); })()`))
					require.LessOrEqual(t, sw, width, "%s in %s is wider than the phone; widest elements: %q %v", page, tr.Lang(), wide, werr)
				}
				png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(artifacts, fmt.Sprintf("operator_%s_%s_%d.png", page, tr.Lang(), width)), png, 0o644))
				require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)))
			}
			visit := func(path, wait string) {
				t.Helper()
				require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(sm.url+path), chromedp.WaitVisible(css(wait))))
			}
			require.NoError(t, chromedp.Do(ctx, headers(lang.accept), chromedp.EmulateViewport(width, 900)))

			// The severity the API computes now, read before the page.
			wantCritical, wantNegative := severityNow(critical), severityNow(negative)
			require.Equal(t, "Critical", wantCritical)
			wantParticipant := severityNow(participant)
			require.Equal(t, "Critical", wantParticipant, "45 tokens of category A's 50,000")

			visit("/admin/buckets", "main h1")
			require.Equal(t, lang.title, text("main h1"))
			htmlLang, err := chromedp.Run(ctx, chromedp.AttributeValue(css("html"), "lang"))
			require.NoError(t, err)
			require.Equal(t, tr.Lang(), htmlLang.Value)
			row := func(id string) string {
				return text(`table.buckets tbody tr:has(td.id a[href$="/` + id + `"]) .badge`)
			}
			require.Equal(t, tr.Sprintf(wantCritical), row(critical.Identifier), "the severity shown is the severity now")
			require.Equal(t, tr.Sprintf(wantNegative), row(negative.Identifier))
			require.Equal(t, tr.Sprintf(wantParticipant), row(participant.Identifier), "stored Healthy, Critical now")
			criticalCard := text(`.summary a.card.sev-critical .num`)
			shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
				`[...document.querySelectorAll("table.buckets tbody .badge")].map(e => e.textContent.trim())`))
			require.NoError(t, err)
			criticalRows := 0
			for _, b := range shown {
				if b == tr.Sprintf("Critical") {
					criticalRows++
				}
			}
			require.Equal(t, criticalCard, strconv.Itoa(criticalRows), "the Critical card counts the Critical rows the table shows: %q", shown)
			// What was seen: at 390 px the list's scroll box showed only
			// Policy and Scope, and at 1400 px the Sends column was cut off.
			// The operator's key cells — identifier, severity, tokens — of
			// every row are in view without a sideways swipe, and the list
			// does not need one at all.
			outside, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
				const out = [];
				for (const tr of document.querySelectorAll("table.buckets tbody tr")) {
					for (const sel of ["td.id", "td.sev .badge", "td.tokens"]) {
						const b = tr.querySelector(sel).getBoundingClientRect();
						if (b.width === 0 || b.left < 0 || b.right > window.innerWidth) out.push(tr.querySelector("td.id").textContent.trim() + " " + sel + " " + Math.round(b.left) + ".." + Math.round(b.right));
					}
				}
				const box = document.querySelector("table.buckets").parentElement;
				if (box.scrollWidth > box.clientWidth + 1) out.push("the list scrolls sideways: " + box.scrollWidth + " > " + box.clientWidth);
				return out;
			})()`))
			require.NoError(t, err)
			require.Empty(t, outside, "at %d px in %s", width, tr.Lang())
			shoot("summary")

			// The Critical card opens the list filtered on it.
			require.NoError(t, chromedp.Do(ctx, chromedp.Click(css(`.summary a.card.sev-critical`)),
				chromedp.WaitVisible(css(`table.buckets`))))
			badges, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
				`[...document.querySelectorAll("table.buckets tbody .badge")].map(e => e.textContent.trim())`))
			require.NoError(t, err)
			require.Equal(t, criticalCard, strconv.Itoa(len(badges)), "the card counts what its list shows")
			for _, b := range badges {
				require.Equal(t, tr.Sprintf("Critical"), b)
			}
			require.Equal(t, tr.Sprintf("Critical"), row(participant.Identifier), "the filtered list has the bucket stored Healthy")
			shoot("filtered")

			visit("/admin/buckets/"+critical.Policy+"/"+critical.Env+"/"+critical.Identifier+"?window=hour", "svg.chart")
			require.Equal(t, tr.Sprintf(wantCritical), text(`section.state .badge`))
			shoot("chart")

			// The documents page and a document's page: their own words in
			// the language asked for, SIFEN's terms (RUC, CDC, dProtAut) as
			// they are.
			visit("/documents", "table.documents")
			require.Equal(t, tr.Sprintf("SIFEN documents"), text("main h1"))
			require.Equal(t, tr.Sprintf("Upload a DE or a lot"), text("section.upload h2"))
			require.Equal(t, tr.Sprintf("Send to SIFEN"), text(`table.documents tbody tr:first-child button`))
			require.Equal(t, tr.Text("draft"), text(`table.documents tbody tr:first-child .badge`))
			require.Contains(t, text("table.documents thead"), "CDC")
			shoot("documents")
			// A refused upload keeps the form: the env chosen, the reason beside it.
			require.NoError(t, chromedp.Do(ctx,
				chromedp.SetUploadFiles(css(`input[name="file"]`), []string{badLot}),
				chromedp.SetValue(css(`section.upload select[name="env"]`), "prod"),
				chromedp.Click(css(`form[enctype="multipart/form-data"] button[type="submit"]`)),
				chromedp.WaitVisible(css(`section.upload [role="alert"]`)),
			))
			require.Contains(t, text(`section.upload [role="alert"]`), tr.Sprintf("Not imported")+": bad.xml")
			env, err := chromedp.Run(ctx, chromedp.Value(css(`section.upload select[name="env"]`)))
			require.NoError(t, err)
			require.Equal(t, "prod", env)
			shoot("upload_refused")
			visit("/documents/1", "section.state")
			require.Equal(t, tr.Sprintf("Document %d", 1)+" "+tr.Text("draft"), text("main h1"))
			dl := text("section.state dl")
			require.Contains(t, dl, tr.Sprintf("Lot number"))
			require.Contains(t, dl, "dProtAut")
			shoot("document")

			// The DICT lookup page: a lookup of a key the directory holds.
			visit("/dict/lookup", "main h1")
			require.Equal(t, tr.Sprintf("DICT lookup"), text("main h1"))
			require.Contains(t, text("form.filter label"), tr.Sprintf("Pix key (CPF, CNPJ, +phone, email or EVP)"))
			require.NoError(t, chromedp.Do(ctx,
				chromedp.SetValue(css(`input[name="key"]`), "11144477735"),
				chromedp.SetValue(css(`input[name="payer_id"]`), "11222333000181"),
				chromedp.Click(css(`#lookup`)),
				chromedp.WaitVisible(css(`#payment`)),
			))
			require.Equal(t, tr.Sprintf("Entry"), text("main h2"))
			require.Contains(t, text("section.state dl"), tr.Sprintf("Owner tax id"))
			require.Contains(t, text("section.state dl"), "EndToEndId")
			require.Equal(t, tr.Sprintf("Payment sent"), text("#payment"))
			require.Contains(t, text("main"), tr.Sprintf("The lookup's buckets now"))
			shoot("dictlookup")
		}
	}
	t.Logf("operator browser test took %s; screenshots in %s", time.Since(start).Round(time.Millisecond), artifacts)
}
