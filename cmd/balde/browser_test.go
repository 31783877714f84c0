package main

import (
	"context"
	"encoding/base64"
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

	"github.com/balde-throttle/balde/sifen/sifentest"
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
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The first run starts the browser, which lives as long as its context:
	// no timeout on that one, a bound on everything after.
	require.NoError(t, chromedp.Do(browser))
	ctx, cancel := context.WithTimeout(browser, 45*time.Second)
	defer cancel()
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
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:browser-pw"))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
				Headers: network.Headers{"Authorization": auth},
			})
			return err
		}),
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

	// Send the other one at once: the throttle blocks the RUC, nothing leaves.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(sm.url+"/documents"),
		chromedp.WaitVisible(css(`table.documents`)),
		chromedp.Click(css(`table.documents tbody tr form button`)),
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
