package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
)

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
	// Lag in seconds, beside the slot's lag in bytes, is the newest sample's that
	// /overview gave: 0 here, every event delivered. The page polls on meanwhile, so
	// the figure is compared with the last answer until the two are of one poll.
	var lagShown, lagGiven string
	waitFor(t, 10*time.Second, "the overview's lag in seconds", func() bool {
		b.mu.Lock()
		ids := append([]network.RequestID(nil), b.overviewIDs...)
		b.mu.Unlock()
		if len(ids) == 0 {
			return false
		}
		res, err := chromedp.Call(b.ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: ids[len(ids)-1]})
		if err != nil {
			return false
		}
		var o struct {
			Latest *struct {
				LagSeconds *float64 `json:"lag_seconds"`
			} `json:"latest"`
		}
		if json.Unmarshal(res.Body, &o) != nil || o.Latest == nil || o.Latest.LagSeconds == nil {
			return false
		}
		lagGiven = strconv.FormatFloat(*o.Latest.LagSeconds, 'f', -1, 64)
		lagShown = eval[string](b, `(() => { const e = document.querySelector('dd[data-live="lag_seconds"]'); return e.dataset.value + "|" + e.textContent; })()`)
		return strings.HasPrefix(lagShown, lagGiven+"|")
	})
	if lagGiven != "0" || lagShown != "0|0 s" {
		t.Errorf("overview lag: shows %q, /overview gave %s; want 0 s with every event delivered", lagShown, lagGiven)
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
