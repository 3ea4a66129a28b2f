package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
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

	mu        sync.Mutex
	errors    []string
	requests  []string
	failed    []string
	statusIDs []network.RequestID // the responses of GET /status, in order
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

// The console driven in Chromium against a relay on a real PostgreSQL and kfake,
// with a dead letter: the page asks for the token; its overview shows what /status
// answered; a dead letter previewed and retried on the page reaches the broker and
// the count drops; a replay counted and started on the page reaches Kafka with the
// replay header; pause and resume on the page move walrelay_paused and show the
// reason. At 1280×800 and 390×844, light and dark, every tab fits the window with
// each control reachable, and its text keeps a contrast of 4.5:1. No console error,
// and no request leaves the relay's origin.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	dbURL, broker, conn := outboxWithBroker(t)
	const token = "browser-token"
	addr := freeAddr(t)
	start(t, dbURL, broker, "console_browser", func(c *config) {
		c.Registry, c.MetricsAddr, c.AdminToken = prometheus.NewRegistry(), addr, token
		c.StatsInterval = 250 * time.Millisecond
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	evs := testenv.WriteTx(t, conn, []string{"web-1", "web-2", "web-3"}, "order.created", 3, false)
	if !consumer.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(evs))
	}
	dead := evs[0]
	if _, err := conn.Exec(context.Background(), `UPDATE outbox_events SET attempts = 5, last_error = 'broker said no',
		dead_lettered_at = now() WHERE id = $1`, dead.ID); err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv(screenshotsEnv)
	if shots != "" {
		// A frozen clock: the times the page shows hold still between screenshots.
		b.do("freeze the clock", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
				Source: `(() => { const frozen = Date.now(); Date.now = () => frozen; })();`})
			return chromedp.Void{}, err
		})
	}

	// The token: asked for, kept for the tab.
	b.do("open the console", chromedp.Navigate(base+"/ui/"))
	b.waitJS("the token form", `!document.getElementById("token-form").hidden`)
	b.do("enter the token", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)))
	b.waitJS("the overview", `document.getElementById("state").dataset.state === "streaming" &&
		document.querySelector('[data-status="dead_letters"]').dataset.value === "1"`)
	if got := eval[string](b, `sessionStorage.getItem("walrelay-admin-token")`); got != token {
		t.Errorf("sessionStorage holds %q, want the token", got)
	}
	if got := eval[string](b, `localStorage.length + ":" + document.cookie`); got != "0:" {
		t.Errorf("the token went further than the tab: localStorage and cookies %q", got)
	}

	// The overview shows the numbers /status gave it, each as the page's figure.
	// status-at is written once the figures are: emptied, it says when the refresh's are.
	eval[string](b, `document.getElementById("status-at").textContent = ""`)
	b.click("#refresh-status")
	b.waitJS("the refreshed figures", `document.getElementById("status-at").textContent !== ""`)
	var statusBody []byte
	waitFor(t, 10*time.Second, "the page's /status response", func() bool {
		b.mu.Lock()
		ids := append([]network.RequestID(nil), b.statusIDs...)
		b.mu.Unlock()
		if len(ids) < 2 {
			return false
		}
		res, err := chromedp.Call(b.ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: ids[len(ids)-1]})
		statusBody = res.Body
		return err == nil
	})
	var status map[string]any
	if err := json.Unmarshal(statusBody, &status); err != nil {
		t.Fatalf("the page's /status: %v\n%s", err, statusBody)
	}
	shown := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("[data-status]")].map((e) => [e.dataset.status, e.dataset.value + "|" + e.textContent]))`)
	for field, v := range status {
		got, ok := shown[field]
		if !ok {
			continue
		}
		value, text, _ := strings.Cut(got, "|")
		want := fmt.Sprint(v)
		if n, isNum := v.(float64); isNum {
			want = strconv.FormatFloat(n, 'f', -1, 64)
		}
		if value != want || text == "" || text == "–" {
			t.Errorf("overview %s: shows %q (value %s), /status gave %s", field, text, value, want)
		}
	}
	for _, field := range []string{"dead_letters", "pending_rows", "lag_bytes", "oldest_pending_age_seconds", "slot"} {
		if _, ok := shown[field]; !ok {
			t.Errorf("the overview shows no %s", field)
		}
	}
	if n := strings.ReplaceAll(strings.Split(shown["dead_letters"], "|")[1], ",", ""); n != "1" {
		t.Errorf("overview dead letters: %q, want 1", n)
	}
	b.waitJS("the sink and the charts", `document.getElementById("sink-brokers").textContent === `+strconv.Quote(strings.Join(broker.ListenAddrs(), ", "))+
		` && document.querySelectorAll("#chart-events_per_second path.line").length === 1`)

	// Dead letters: the row, its record.
	b.click(`.tab[data-tab="dlq"]`)
	row := fmt.Sprintf(`tr[data-id=%q]`, dead.ID)
	b.waitJS("the dead letter's row", `document.querySelector(`+strconv.Quote(row)+`) !== null`)
	b.click(fmt.Sprintf(`button[data-action="preview"][data-id=%q]`, dead.ID))
	b.waitJS("the record preview", `document.getElementById("preview-topic").textContent === `+strconv.Quote("outbox.event."+dead.AggregateType)+
		` && document.getElementById("preview-key").textContent === `+strconv.Quote(dead.AggregateID))

	// Every tab, at both sizes, in both schemes.
	for _, size := range []struct{ w, h int64 }{{1280, 800}, {390, 844}} {
		for _, scheme := range []string{"light", "dark"} {
			b.viewport(size.w, size.h, scheme)
			for _, tab := range []string{"overview", "dlq", "replay"} {
				b.click(fmt.Sprintf(`.tab[data-tab=%q]`, tab))
				b.waitJS(tab+" shown", `!document.getElementById("tab-`+tab+`").hidden`)
				if bad := eval[[]string](b, fmt.Sprintf("%s(%d)", layoutProblems, size.w)); len(bad) > 0 {
					t.Errorf("%dx%d %s, %s tab: %s", size.w, size.h, scheme, tab, strings.Join(bad, "; "))
				}
				c := eval[contrastResult](b, contrastProblems)
				if c.Checked < 10 || len(c.Bad) > 0 {
					t.Errorf("%dx%d %s, %s tab: %d texts checked, under 4.5:1: %s", size.w, size.h, scheme, tab, c.Checked, strings.Join(c.Bad, "; "))
				}
				if shots != "" {
					png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
					if err != nil {
						t.Fatal(err)
					}
					name := filepath.Join(shots, fmt.Sprintf("console-%s-%dx%d-%s.png", tab, size.w, size.h, scheme))
					if err := os.WriteFile(name, png, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	b.viewport(1280, 800, "light")

	// Retry through the page: the broker gets the event again, the count drops.
	b.click(`.tab[data-tab="dlq"]`)
	b.click(fmt.Sprintf(`button[data-action="retry"][data-id=%q]`, dead.ID))
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(dead.ID) == 2 }) {
		t.Fatalf("the dead letter retried on the page was not delivered again (seen %d times)", consumer.Count(dead.ID))
	}
	b.waitJS("the count to drop", `document.getElementById("dlq-total").textContent === "0" &&
		document.querySelector(`+strconv.Quote(row)+`) === null && !document.getElementById("dlq-empty").hidden`)

	// A replay: counted first, then started; its records carry the replay header.
	b.click(`.tab[data-tab="replay"]`)
	b.do("fill the replay form", chromedp.SendKeys(chromedp.CSS(`#replay-form input[name="event_type"]`), "order.created"),
		chromedp.SendKeys(chromedp.CSS(`#replay-form input[name="since"]`), "1h"))
	b.click("#replay-count")
	b.waitJS("the dry run's count", `document.getElementById("replay-counted").textContent.startsWith("3 events match") &&
		!document.getElementById("replay-start").disabled`)
	b.click("#replay-start")
	replayed := func() (n int, id string) {
		for _, rec := range consumer.Records {
			if v := testenv.Header(rec, ops.ReplayHeader); v != "" {
				n++
				id = v
			}
		}
		return n, id
	}
	if !consumer.WaitFor(time.Minute, func() bool { n, _ := replayed(); return n == 3 }) {
		n, _ := replayed()
		t.Fatalf("the replay started on the page delivered %d records with %s, want 3", n, ops.ReplayHeader)
	}
	_, replayID := replayed()
	b.waitJS("the replay done", `document.getElementById("replay-figures").textContent.includes("3 of 3 sent") &&
		document.getElementById("replay-figures").textContent.includes("done") &&
		document.getElementById("replay-bar").value === 3 &&
		[...document.querySelectorAll("#replay-rows tr")].some((r) => r.textContent.includes(`+strconv.Quote(replayID)+`) && r.textContent.includes("done"))`)

	// Pause and resume, with a reason everyone sees.
	b.click(`.tab[data-tab="overview"]`)
	b.do("give a reason", chromedp.SendKeys(chromedp.CSS("#pause-reason"), "schema change on orders"))
	b.click("#pause")
	waitFor(t, 30*time.Second, "walrelay_paused 1", func() bool { return metric(t, base, "walrelay_paused") == 1 })
	b.waitJS("the pause banner", `document.getElementById("banner").textContent.includes("schema change on orders") &&
		document.getElementById("state").dataset.state === "paused" && !document.getElementById("resume").hidden`)
	b.click("#resume")
	waitFor(t, 30*time.Second, "walrelay_paused 0", func() bool { return metric(t, base, "walrelay_paused") == 0 })
	b.waitJS("the banner gone", `document.getElementById("banner").hidden && document.getElementById("state").dataset.state === "streaming"`)

	if errs := b.snapshot(&b.errors); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
	requests := b.snapshot(&b.requests)
	for _, r := range requests {
		_, u, _ := strings.Cut(r, " ")
		if !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("a request left the relay's origin: %s", r)
		}
	}
	for _, f := range b.snapshot(&b.failed) {
		if !strings.HasPrefix(f, "401 ") { // the request that asks for the token
			t.Errorf("a request failed: %s", f)
		}
	}
	polls := 0
	for _, r := range requests {
		if strings.Contains(r, "/overview") {
			polls++
		}
	}
	if polls == 0 {
		t.Errorf("the page never polled /overview")
	}
}

// With the listener on 0.0.0.0 and no token the admin API is off, and so is the
// console: the page is refused, saying what to set.
func TestConsoleRefusedWithoutToken(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	dbURL, broker, _ := outboxWithBroker(t)
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	start(t, dbURL, broker, "console_refused", func(c *config) {
		c.Registry, c.MetricsAddr = prometheus.NewRegistry(), net.JoinHostPort("0.0.0.0", port)
	})
	base := "http://" + net.JoinHostPort("127.0.0.1", port)
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	resp, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(base+"/ui/"))
	if err != nil {
		t.Fatalf("open the console: %v", err)
	}
	text := eval[string](b, `document.body.innerText`)
	if resp.Status != http.StatusForbidden || !strings.Contains(text, "--admin-token") || strings.Contains(text, "Dead letters") {
		t.Fatalf("the console on 0.0.0.0 without a token: %d %q, want 403 naming --admin-token and no page", resp.Status, text)
	}
	for _, r := range b.snapshot(&b.requests) {
		if strings.Contains(r, "console.js") || strings.Contains(r, "/status") {
			t.Errorf("the refused page still loaded %s", r)
		}
	}
}
