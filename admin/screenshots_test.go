package admin_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/walrelay/walrelay/admin"
)

// screenshotClock is the frozen time of the screenshots, the fixed data dated from it.
var screenshotClock = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// TestConsoleScreenshots writes the screenshots of docs/console/ into the directory
// WALRELAY_CONSOLE_SCREENSHOTS names, and is skipped without it: each tab at
// 1280×800 and 390×844, light and dark, from fixed figures (admin.FixedConsole)
// with the page's clock frozen, its time zone UTC and its locale en-US, so that
// they are the same each time apart from rendering. No test looks at their pixels;
// the page must still load with no console error and no request off its origin.
func TestConsoleScreenshots(t *testing.T) {
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		t.Skip(screenshotsEnv + " names no directory: no screenshots asked for")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	url := fixedConsole(t, screenshotClock)

	frozen := fmt.Sprintf(`(() => {
  const T = %d, D = Date;
  class Frozen extends D {
    constructor(...a) { super(...(a.length ? a : [T])); }
    static now() { return T; }
  }
  globalThis.Date = Frozen;
})();`, screenshotClock.UnixMilli())
	b.do("freeze the clock, the time zone and the locale", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		if _, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: frozen}); err != nil {
			return chromedp.Void{}, err
		}
		if _, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "UTC"}); err != nil {
			return chromedp.Void{}, err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "en-US"})
		return chromedp.Void{}, err
	})
	b.viewport(1280, 800, "light")
	b.do("open the console", chromedp.Navigate(url+"/ui/"))
	b.waitJS("the overview", `document.getElementById("state").dataset.state === "streaming" &&
		document.querySelector('dd[data-live="lag_seconds"]').dataset.value !== undefined &&
		document.querySelectorAll("svg path.line").length === 4`)
	b.click(`.tab[data-tab="dlq"]`)
	b.waitJS("the dead letters", `document.querySelectorAll("#dlq-rows tr").length === 3`)
	b.click(`button[data-action="preview"]`)
	b.waitJS("the record preview", `!document.getElementById("preview").hidden`)
	b.click(`.tab[data-tab="replay"]`)
	b.waitJS("the recent replays", `document.querySelectorAll("#replay-rows tr").length === 3`)

	for _, size := range []struct{ w, h int64 }{{1280, 800}, {390, 844}} {
		for _, scheme := range []string{"light", "dark"} {
			b.viewport(size.w, size.h, scheme)
			for _, tab := range []string{"overview", "dlq", "replay"} {
				b.click(fmt.Sprintf(`.tab[data-tab=%q]`, tab))
				b.waitJS(tab+" shown", `!document.getElementById("tab-`+tab+`").hidden`)
				eval[bool](b, `(scrollTo(0, 0), true)`)
				png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
				if err != nil {
					t.Fatal(err)
				}
				name := filepath.Join(dir, fmt.Sprintf("console-%s-%dx%d-%s.png", tab, size.w, size.h, scheme))
				if err := os.WriteFile(name, png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// fixedConsole serves admin.FixedConsole dated from now on a loopback port until
// the test ends, and returns its URL.
func fixedConsole(t *testing.T, now time.Time) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(admin.FixedConsole(ln.Addr(), now))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
