package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
	"github.com/balde-throttle/balde/web"
)

// TestBrowserSummaryIsNeverStaleUnmarked drives, in a browser, the admin
// summary of a server whose count is slow (as when it takes 50 ms or more)
// on a fake clock. What was seen: after 45 s idle the first view showed the
// last summary, "0 Critical" while the API had 1. Now the first view after
// idle waits for the recount and shows 1; a recount that does not end
// within the wait leaves the old summary marked stale with its age, its
// numbers greyed; the next view after the count has the new numbers,
// unmarked. Screenshots: test-artifacts/summary_{fresh,stale}.png.
func TestBrowserSummaryIsNeverStaleUnmarked(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("chromium not found: install Debian's package (apt-get install -y chromium) or set BALDE_CHROMIUM; .ci/run installs it")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	clock := throttle.NewManualClock(time.Now().Truncate(time.Second))
	store := throttletest.NewMemStore(clock.Now)
	// P refills 10 tokens a minute: a bucket 100 below zero stays
	// Critical for minutes of the fake clock.
	limiter, err := throttle.NewLimiter(store, throttle.Resolvers{throttle.Policies{"P": throttle.PerMinute("P", 10, 10)}},
		throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	// hold, when set, keeps a count waiting until it is closed.
	var hold atomic.Pointer[chan struct{}]
	s := web.NewServer()
	s.Addr = "127.0.0.1:0"
	s.Limiter, s.Reader = limiter, inspect.New(limiter, store)
	s.Admin = web.Credentials{User: "ops", Password: "browser-pw"}
	s.SummaryTTL, s.SummaryFresh = 15*time.Second, -1 // the count is slow: the cache is used
	s.Panels = []web.PanelFunc{func(ctx context.Context) (web.Panel, error) {
		if ch := hold.Load(); ch != nil {
			select {
			case <-*ch:
			case <-ctx.Done():
				return web.Panel{}, ctx.Err()
			}
		}
		return web.Panel{Title: "count"}, nil
	}}
	require.NoError(t, s.Open())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	penalize := func(id string) {
		t.Helper()
		_, err := limiter.Adjust(context.Background(), throttle.Adjustment{Key: throttle.Key{Policy: "P", Env: "prod", Identifier: id}, Delta: -110, Reason: throttle.LedgerPenalty})
		require.NoError(t, err)
	}
	artifacts := artifactsDir(t)

	ctx := startBrowser(t, browserOptions(t, chromium), 60*time.Second)
	require.NoError(t, chromedp.Do(ctx, sendHeaders(network.Headers{"Authorization": basicAuth("ops", "browser-pw")}),
		chromedp.EmulateViewport(1280, 800)))
	type view struct {
		critical, stale string
		greyed          bool
	}
	look := func(shot string) view {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(s.URL()+"/admin/buckets"), chromedp.WaitVisible(chromedp.CSS(".summary"))))
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			const card = document.querySelector(".summary a.card.sev-critical, .summary a.card[href*='severity=critical']");
			const note = document.querySelector(".summary .stale-note");
			const shown = note && note.getBoundingClientRect().height > 0 ? note.textContent.trim() : "";
			const num = card.querySelector(".num");
			const muted = getComputedStyle(document.querySelector(".summary .card .label")).color;
			return [num.textContent.trim(), shown, String(getComputedStyle(num).color === muted)];
		})()`))
		require.NoError(t, err)
		if shot != "" {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(artifacts, shot), png, 0o644))
		}
		return view{critical: got[0], stale: got[1], greyed: got[2] == "true"}
	}
	require.Equal(t, view{critical: "0"}, look(""))

	penalize("drained")
	clock.Advance(45 * time.Second)
	require.Equal(t, view{critical: "1"}, look("summary_fresh.png"), "after 45 s idle the first view has the count of now")

	// The recount hangs: the old summary, marked with its age and greyed.
	release := make(chan struct{})
	hold.Store(&release)
	penalize("drained-2")
	clock.Advance(45 * time.Second)
	v := look("summary_stale.png")
	require.Equal(t, "1", v.critical)
	require.True(t, strings.HasPrefix(v.stale, "Stale: counted 45s ago."), v.stale)
	require.True(t, v.greyed, "a stale number is greyed")

	hold.Store(nil)
	close(release)
	require.Equal(t, view{critical: "2"}, look(""), "the count is done: new numbers, unmarked")
}
