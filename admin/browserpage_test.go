package admin_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The console in a real browser: Debian's Chromium, headless (docs/operations.md,
// "Console"). `make setup` installs it; without it these tests fail under CI and
// skip elsewhere, saying why.

// screenshotsEnv names a directory the console's screenshots are written to, for the
// docs; unset, none are taken. No test looks at their pixels.
const screenshotsEnv = "WALRELAY_CONSOLE_SCREENSHOTS"

// chromium finds the browser, or ends the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: `make setup` installs Debian's chromium package (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: `make setup` installs it (apt-get install chromium)")
	return ""
}

// browserPage is one tab of a headless Chromium, with what it saw: console errors,
// exceptions, every request it sent, and failed responses.
type browserPage struct {
	t   *testing.T
	ctx context.Context

	mu          sync.Mutex
	errors      []string
	requests    []string
	failed      []string
	statusIDs   []network.RequestID // the responses of GET /status, in order
	overviewIDs []network.RequestID // the responses of GET /overview, in order
	overviewAt  []time.Time         // and when each came
}

// newBrowser starts Chromium (as root: without its sandbox; no background
// networking: the machine has no network) and opens a tab, closed when the test ends.
func newBrowser(t *testing.T) *browserPage {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication"),
		chromedp.Flag("no-pings", true),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser and the tab
		t.Fatalf("start chromium: %v", err)
	}
	b := &browserPage{t: t, ctx: ctx}
	listen(ctx, chromedp.Events(ctx, runtime.ConsoleAPICalled), func(ev runtime.EventConsoleAPICalled) {
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			b.note(&b.errors, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	})
	listen(ctx, chromedp.Events(ctx, runtime.ExceptionThrown), func(ev runtime.EventExceptionThrown) {
		b.note(&b.errors, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
	})
	listen(ctx, chromedp.Events(ctx, cdplog.EntryAdded), func(ev cdplog.EventEntryAdded) {
		// A response the page expects (the 401 that asks for the token) is logged by
		// the network; failedResponses judges those.
		if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
			b.note(&b.errors, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	})
	listen(ctx, chromedp.Events(ctx, network.RequestWillBeSent), func(ev network.EventRequestWillBeSent) {
		b.note(&b.requests, ev.Request.Method+" "+ev.Request.URL)
	})
	listen(ctx, chromedp.Events(ctx, network.ResponseReceived), func(ev network.EventResponseReceived) {
		u := ev.Response.URL
		if ev.Response.Status >= 400 {
			b.note(&b.failed, fmt.Sprintf("%d %s", ev.Response.Status, u))
		}
		if strings.Contains(u, "/status") && ev.Response.Status == http.StatusOK {
			b.mu.Lock()
			b.statusIDs = append(b.statusIDs, ev.RequestID)
			b.mu.Unlock()
		}
		if strings.Contains(u, "/overview") && ev.Response.Status == http.StatusOK {
			b.mu.Lock()
			b.overviewIDs = append(b.overviewIDs, ev.RequestID)
			b.overviewAt = append(b.overviewAt, time.Now())
			b.mu.Unlock()
		}
	})
	return b
}

// listen calls fn with each event of seq until the tab closes.
func listen[E any](ctx context.Context, seq func(func(E, error) bool), fn func(E)) {
	go func() {
		for ev, err := range seq {
			if err != nil || ctx.Err() != nil {
				return
			}
			fn(ev)
		}
	}()
}

func (b *browserPage) note(list *[]string, s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*list = append(*list, s)
}

func (b *browserPage) snapshot(list *[]string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), *list...)
}

// do runs steps, failing the test with what it was doing.
func (b *browserPage) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates expr in the page into v.
func eval[T any](b *browserPage, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %.80s: %v", expr, err)
	}
	return v
}

// waitJS waits until the JavaScript expression is true in the page.
func (b *browserPage) waitJS(what, expr string) {
	b.t.Helper()
	b.do("wait for "+what, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(45*time.Second))(ctx, t)
		return chromedp.Void{}, err
	})
}

// click clicks the element sel names.
func (b *browserPage) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// viewport sets the page's size, and its color scheme ("light" or "dark").
func (b *browserPage) viewport(w, h int64, scheme string) {
	b.t.Helper()
	b.do(fmt.Sprintf("emulate %dx%d, %s", w, h, scheme), func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := cdp.Call(ctx, t, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: w, Height: h, DeviceScaleFactor: 1, Mobile: w < 600}); err != nil {
			return chromedp.Void{}, err
		}
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return chromedp.Void{}, err
	})
}

// layoutProblems are what keeps the page from fitting a viewport W pixels wide: a
// document wider than that, and each visible control of the tab shown that cannot
// be brought into view whole and clicked (covered, or past the window's edge). A
// mobile viewport widens innerWidth to fit wider content, so W is the width asked.
const layoutProblems = `((W) => {
  const bad = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > innerWidth || innerWidth > W) bad.push("scrollWidth " + doc.scrollWidth + ", innerWidth " + innerWidth + ", viewport " + W);
  for (const el of document.querySelectorAll("button, input, select, textarea")) {
    if (el.closest("[hidden]") || el.closest("dialog:not([open])") || el.getClientRects().length === 0) continue;
    el.scrollIntoView({ block: "center", inline: "nearest" });
    const r = el.getBoundingClientRect();
    const name = el.id || el.name || el.dataset.action || el.textContent.trim() || el.outerHTML.slice(0, 60);
    if (r.width < 1 || r.height < 1) { bad.push(name + ": no size"); continue; }
    if (r.left < -0.5 || r.right > innerWidth + 0.5) { bad.push(name + ": outside the window, " + r.left + "-" + r.right); continue; }
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!hit || !(hit === el || el.contains(hit))) bad.push(name + ": covered by " + (hit ? hit.outerHTML.slice(0, 60) : "nothing"));
  }
  scrollTo(0, 0);
  return bad;
})`

// contrastProblems are the visible texts whose contrast with what is behind them is
// under 4.5:1 (WCAG 2's ratio, from the computed colors, backgrounds composited).
const contrastProblems = `(() => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let base = matchMedia("(prefers-color-scheme: dark)").matches ? [0, 0, 0, 1] : [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) base = over(layers[i], base);
    return base;
  };
  const bad = [];
  let checked = 0;
  const seen = new Set();
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const node = walk.currentNode;
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || seen.has(el)) continue;
    seen.add(el);
    if (el.closest("[hidden]") || el.getClientRects().length === 0) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility !== "visible") continue;
    let fg = parse(el instanceof SVGElement ? cs.fill : cs.color);
    if (!fg) { bad.push(node.textContent.trim().slice(0, 40) + ": color " + cs.color + " unreadable"); continue; }
    let opacity = 1;
    for (let e = el; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
    fg[3] *= opacity;
    const bg = background(el);
    const l1 = lum(over(fg, bg)), l2 = lum(bg);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    checked++;
    if (ratio < 4.5) bad.push(node.textContent.trim().slice(0, 40) + ": " + ratio.toFixed(2) + ":1 (" + cs.color + " on rgb(" + bg.slice(0, 3).map(Math.round).join(",") + "))");
  }
  return { checked, bad };
})()`

type contrastResult struct {
	Checked int      `json:"checked"`
	Bad     []string `json:"bad"`
}

// metric reads a gauge without labels from the relay's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
