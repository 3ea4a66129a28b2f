// walrelay console: reads the admin API of the relay that serves it, on its own
// origin, and nothing else. No library, no build step. The admin token, when the
// relay asks for one, is kept in sessionStorage: for this tab only.
"use strict";
(() => {
  const POLL_MS = 2000; // the page asks the relay at most this often
  const SLOW_POLL_MS = 10000; // and at least this often, whatever the stats interval
  const HOUR_MS = 3600 * 1000;
  const TOKEN_KEY = "walrelay-admin-token";
  const $ = (id) => document.getElementById(id);

  const st = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    database: "",
    samples: [],
    tab: "overview",
    dlq: { offset: 0, limit: 50, next: null, rows: [], selected: new Set(), total: null, seenDead: null },
    counted: null, // {key, total}: the dry run the Replay button stands for
    replay: null, // the replay under way: its id
    status: null,
    timer: 0,
    every: 0, // the polling's period now
    statsInterval: 0, // seconds between the relay's samples, from /overview
  };

  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function api(method, path, body) {
    const url = new URL(path, location.origin);
    if (st.database) url.searchParams.set("database", st.database);
    const headers = { Accept: "application/json" };
    if (st.token) headers.Authorization = "Bearer " + st.token;
    const init = { method, headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(url, init);
    } catch (_) {
      throw new APIError(0, "The relay does not answer at " + location.host + ": is it running? The page tries again every few seconds.");
    }
    let data = null;
    try { data = await resp.json(); } catch (_) { data = null; }
    if (resp.status === 401) {
      askToken(st.token ? "The relay refused that token; enter it again." : "");
      throw new APIError(401, "the relay asks for its admin token");
    }
    if (!resp.ok) throw new APIError(resp.status, (data && data.error) || resp.status + " " + resp.statusText);
    return data;
  }

  // --- messages ---------------------------------------------------------------
  function showError(err) {
    if (err && err.status === 401) return;
    const el = $("error");
    el.textContent = String(err && err.message ? err.message : err);
    el.hidden = false;
  }
  function clearError() { $("error").hidden = true; }

  function askToken(note) {
    clearInterval(st.timer); // no polling until there is a token to poll with
    st.timer = 0;
    $("main").hidden = true;
    const form = $("token-form");
    if (note) form.querySelector("p").textContent = note;
    if (form.hidden) {
      form.hidden = false;
      $("token").focus();
    }
  }

  // --- formatting -------------------------------------------------------------
  const int = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const dec = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
  function fmtBytes(n) {
    if (n < 10240) return int.format(n) + " B";
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return dec.format(v) + " " + units[i];
  }
  function fmtSeconds(s) {
    if (s === 0) return "0 s";
    if (s < 1) return dec.format(s * 1000) + " ms";
    if (s < 120) return dec.format(s) + " s";
    if (s < 7200) return dec.format(s / 60) + " min";
    return dec.format(s / 3600) + " h";
  }
  function fmtAgo(iso) {
    const t = Date.parse(iso);
    if (!t || t < 0) return "–";
    const s = Math.max(0, (Date.now() - t) / 1000);
    return fmtSeconds(Math.round(s)) + " ago";
  }
  const formats = {
    bytes: fmtBytes,
    seconds: fmtSeconds,
    count: (n) => int.format(n),
  };
  function setFigure(el, value, unit) {
    el.dataset.value = String(value);
    el.textContent = (formats[unit] || formats.count)(value);
    el.title = int.format(value) + (unit === "bytes" ? " bytes" : unit === "seconds" ? " seconds" : "");
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v;
      else if (k.startsWith("data-") || k === "aria-label" || k === "type" || k === "title" || k === "class") e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) if (c) e.append(c);
    return e;
  }

  // --- tabs ------------------------------------------------------------------
  function showTab(name) {
    st.tab = name;
    for (const b of document.querySelectorAll(".tab")) {
      if (b.dataset.tab === name) b.setAttribute("aria-current", "page");
      else b.removeAttribute("aria-current");
    }
    for (const s of document.querySelectorAll(".tabpanel")) s.hidden = s.id !== "tab-" + name;
    if (name === "overview") drawCharts();
    if (name === "dlq") loadDLQ().catch(showError);
    if (name === "replay") loadReplays().catch(showError);
  }

  // --- overview ----------------------------------------------------------------
  const stateWords = {
    streaming: "Streaming", paused: "Paused", standby: "Standby", broker_down: "Broker not acknowledging",
    stalled: "Stalled", not_ready: "Not ready",
  };

  function renderOverview(o) {
    const badge = $("state");
    badge.dataset.state = o.state;
    badge.textContent = stateWords[o.state] || o.state;
    const word = stateWords[o.state] || o.state;
    $("reason").textContent = o.reason && o.reason.toLowerCase() !== word.toLowerCase() ? o.reason : "";
    const banner = $("banner");
    if (o.paused) {
      banner.textContent = "Paused" + (o.paused_since ? " since " + new Date(o.paused_since).toLocaleString() : "") +
        (o.pause_reason ? ": " + o.pause_reason : "") + ". The relay reads and publishes nothing; its slot keeps WAL.";
      banner.dataset.kind = "pause";
      banner.hidden = false;
    } else if (banner.dataset.kind === "pause") {
      banner.hidden = true;
      banner.dataset.kind = "";
    }
    $("pause").hidden = o.paused;
    $("pause-reason").disabled = o.paused;
    $("resume").hidden = !o.paused;
    if (o.sink) {
      $("sink-kind").textContent = o.sink.kind || "–";
      $("sink-topic").textContent = o.sink.topic_template || "–";
      $("sink-brokers").textContent = (o.sink.brokers || []).join(", ") || "–";
    }
    if (o.build) {
      $("build-version").textContent = o.build.version || "–";
      $("build-revision").textContent = o.build.revision || "–";
    }
    const cutoff = Date.now() - HOUR_MS;
    st.samples = st.samples.concat(o.samples || []).filter((s) => Date.parse(s.at) >= cutoff);
    const latest = o.latest;
    if (latest) {
      $("tab-dlq-count").textContent = int.format(latest.dead_letters);
      for (const span of document.querySelectorAll("[data-live]")) {
        const k = span.dataset.live;
        const v = latest[k];
        span.dataset.value = String(v);
        span.textContent = k === "lag_bytes" ? fmtBytes(v) : k === "ack_latency_seconds" || k === "lag_seconds" ? fmtSeconds(v) :
          k === "events_per_second" ? dec.format(v) + "/s" : int.format(v);
      }
      if (st.dlq.seenDead !== null && st.dlq.seenDead !== latest.dead_letters && st.tab === "dlq") {
        loadDLQ().catch(showError); // the count moved: the list follows
      }
      st.dlq.seenDead = latest.dead_letters;
    }
    drawCharts();
  }

  function drawCharts() {
    drawChart($("chart-events_per_second"), "events_per_second", (v) => dec.format(v) + "/s");
    drawChart($("chart-ack_latency_seconds"), "ack_latency_seconds", fmtSeconds);
    drawChart($("chart-lag_bytes"), "lag_bytes", fmtBytes);
    drawChart($("chart-pending"), "pending", (v) => int.format(v));
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }

  function drawChart(svg, field, fmt) {
    const width = svg.getBoundingClientRect().width;
    if (width === 0) return; // not shown: drawn when its tab is
    const w = Math.max(Math.round(width), 100), h = 120, top = 14, bottom = h - 16;
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.replaceChildren();
    const now = Date.now(), from = now - HOUR_MS;
    const pts = st.samples.map((s) => [Date.parse(s.at), Number(s[field]) || 0]);
    let max = Math.max(0, ...pts.map((p) => p[1]));
    max = max > 0 ? niceCeil(max) : 1;
    for (const f of [0, 0.5, 1]) {
      const y = bottom - f * (bottom - top);
      svg.append(svgEl("line", { x1: 0, x2: w, y1: y, y2: y, class: "gridline" }));
    }
    const label = svgEl("text", { x: 2, y: 11 });
    label.textContent = fmt(max);
    svg.append(label);
    const axis = svgEl("text", { x: 2, y: h - 3 });
    axis.textContent = "−60 min";
    svg.append(axis);
    const nowLabel = svgEl("text", { x: w - 2, y: h - 3, "text-anchor": "end" });
    nowLabel.textContent = "now";
    svg.append(nowLabel);
    if (pts.length === 0) {
      const t = svgEl("text", { x: w / 2, y: h / 2, "text-anchor": "middle" });
      t.textContent = "no samples yet";
      svg.append(t);
      return;
    }
    const x = (t) => ((t - from) / HOUR_MS) * w;
    const y = (v) => bottom - (v / max) * (bottom - top);
    const line = pts.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
    const first = x(pts[0][0]).toFixed(1), last = x(pts[pts.length - 1][0]).toFixed(1);
    svg.append(svgEl("path", { d: `${line} L${last} ${bottom} L${first} ${bottom} Z`, class: "area" }));
    svg.append(svgEl("path", { d: line, class: "line" }));
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  async function loadStatus() {
    const s = await api("GET", "/status");
    st.status = s;
    for (const dd of document.querySelectorAll("[data-status]")) {
      const v = s[dd.dataset.status];
      if (typeof v === "number") setFigure(dd, v, dd.dataset.unit);
      else { dd.textContent = v == null || v === "" ? "–" : String(v); dd.dataset.value = String(v ?? ""); }
    }
    $("dlq-total").textContent = int.format(s.dead_letters);
    $("tab-dlq-count").textContent = int.format(s.dead_letters);
    st.dlq.total = s.dead_letters;
    $("status-at").textContent = "as of " + new Date().toLocaleTimeString();
    const problems = $("problems");
    problems.replaceChildren(...(s.problems || []).map((p) => el("li", { text: p.message })));
  }

  let lastSampleAt = "";
  async function poll() {
    if (document.hidden) return;
    try {
      const q = lastSampleAt ? "?since=" + encodeURIComponent(lastSampleAt) : "";
      const o = await api("GET", "/overview" + q);
      if (o.samples && o.samples.length) lastSampleAt = o.samples[o.samples.length - 1].at;
      st.statsInterval = o.stats_interval_seconds || 0;
      renderOverview(o);
      if (st.replay) await followReplay();
      clearError();
      if (st.timer) schedule();
    } catch (err) {
      showError(err);
    }
  }

  // The page polls as often as the relay takes a sample, its stats interval (the
  // figures change no more often), within POLL_MS and SLOW_POLL_MS, and every
  // POLL_MS while it follows a replay; an action polls at once. Each poll wakes an
  // idle relay, so fewer of them are what keeps an open console cheap
  // (docs/performance.md, "The console's share").
  function schedule() {
    const every = st.replay ? POLL_MS : Math.min(Math.max(st.statsInterval * 1000 || POLL_MS, POLL_MS), SLOW_POLL_MS);
    if (st.timer && st.every === every) return;
    clearInterval(st.timer);
    st.every = every;
    st.timer = setInterval(poll, every);
  }

  // --- dead letters ---------------------------------------------------------------
  async function loadDLQ() {
    const d = st.dlq;
    const page = await api("GET", `/dlq?offset=${d.offset}&limit=${d.limit}`);
    d.rows = page.dead_letters || [];
    d.next = page.next_offset ?? null;
    const ids = new Set(d.rows.map((r) => r.id));
    for (const id of [...d.selected]) if (!ids.has(id)) d.selected.delete(id);
    renderDLQ();
  }

  function renderDLQ() {
    const d = st.dlq;
    const body = $("dlq-rows");
    body.replaceChildren(...d.rows.map((r) => {
      const check = el("input", { type: "checkbox", "aria-label": "select " + r.id, checked: d.selected.has(r.id) });
      check.addEventListener("change", () => {
        if (check.checked) d.selected.add(r.id); else d.selected.delete(r.id);
        updateSelection();
      });
      const preview = el("button", { type: "button", text: "Preview", "data-action": "preview", "data-id": r.id });
      preview.addEventListener("click", () => showPreview(r.id).catch(showError));
      const retry = el("button", { type: "button", class: "primary", text: "Retry", "data-action": "retry", "data-id": r.id });
      retry.addEventListener("click", () => retryIDs([r.id]).catch(showError));
      const when = el("td", { "data-label": "When", title: r.dead_lettered_at, text: fmtAgo(r.dead_lettered_at) });
      return el("tr", { "data-id": r.id },
        el("td", { "data-label": "Select" }, check),
        el("td", { "data-label": "Id", class: "mono", text: r.id }),
        el("td", { "data-label": "Table", text: r.table }),
        el("td", { "data-label": "Type", text: r.event_type || "–" }),
        el("td", { "data-label": "Aggregate", text: r.aggregate_type + " " + r.aggregate_id }),
        el("td", { "data-label": "Attempts", class: "num", text: String(r.attempts) }),
        el("td", { "data-label": "Last error", class: "error-text", text: r.last_error || "–" }),
        when,
        el("td", { "data-label": "Actions" }, el("div", { class: "row-actions" }, preview, retry)));
    }));
    $("dlq-empty").hidden = d.rows.length > 0;
    $("dlq-prev").disabled = d.offset === 0;
    $("dlq-next").disabled = d.next === null;
    $("dlq-page").textContent = d.rows.length ? `${int.format(d.offset + 1)}–${int.format(d.offset + d.rows.length)}` : "";
    updateSelection();
  }

  function updateSelection() {
    const n = st.dlq.selected.size;
    $("dlq-retry-selected").disabled = n === 0;
    $("dlq-purge-selected").disabled = n === 0;
    $("dlq-retry-selected").textContent = n ? `Retry ${n} selected` : "Retry selected";
    $("dlq-purge-selected").textContent = n ? `Purge ${n} selected` : "Purge selected";
    const all = $("dlq-all");
    all.checked = n > 0 && n === st.dlq.rows.length;
    all.indeterminate = n > 0 && n < st.dlq.rows.length;
  }

  async function afterDLQChange() {
    await Promise.all([loadDLQ(), loadStatus()]);
  }

  async function retryIDs(ids) {
    const r = await api("POST", "/dlq/retry", { ids });
    for (const id of ids) st.dlq.selected.delete(id);
    await afterDLQChange();
    flash(`${int.format(r.reset)} dead letter${r.reset === 1 ? "" : "s"} queued for a retry.`);
  }

  function confirmDialog(title, text, ok) {
    const dlg = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = ok;
    return new Promise((resolve) => {
      dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
      dlg.returnValue = "";
      dlg.showModal();
      $("confirm-cancel").focus();
    });
  }

  async function purgeSelected() {
    const ids = [...st.dlq.selected];
    const n = ids.length;
    const ok = await confirmDialog("Purge dead letters",
      `Delete ${n} dead letter${n === 1 ? "" : "s"} for good? Their rows leave the outbox and cannot be retried or replayed.`,
      `Purge ${n}`);
    if (!ok) return;
    const r = await api("POST", "/dlq/purge", { ids, confirm: n });
    st.dlq.selected.clear();
    await afterDLQChange();
    flash(`${int.format(r.purged)} dead letter${r.purged === 1 ? "" : "s"} purged.`);
  }

  async function showPreview(id) {
    const p = await api("GET", "/dlq/" + encodeURIComponent(id) + "/record");
    $("preview-id").textContent = p.id;
    $("preview-topic").textContent = p.topic || "(the sink's own destination)";
    $("preview-key").textContent = bytesText(p.key);
    $("preview-headers").replaceChildren(...p.headers.map((h) => el("tr", {}, el("td", { text: h.key }), el("td", { class: "mono", text: bytesText(h.value) }))));
    let v = p.tombstone ? "(null: a tombstone)" : bytesText(p.value);
    if (!p.tombstone && p.value.encoding === "utf-8") {
      try { v = JSON.stringify(JSON.parse(p.value.text), null, 2); } catch (_) { /* not JSON: as it is */ }
    }
    $("preview-value").textContent = v;
    $("preview").hidden = false;
    $("preview").scrollIntoView({ block: "nearest" });
  }
  function bytesText(b) { return b.encoding === "base64" ? "base64: " + b.text : b.text; }

  function flash(text) {
    const b = $("banner");
    if (!b.hidden && b.dataset.kind === "pause") return; // the pause banner stays
    b.dataset.kind = "flash";
    b.textContent = text;
    b.hidden = false;
  }

  // --- replay ----------------------------------------------------------------------
  function replayFilters() {
    const f = new FormData($("replay-form"));
    const body = {};
    for (const k of ["since", "until", "aggregate_type", "aggregate_id", "event_type"]) {
      const v = String(f.get(k) || "").trim();
      if (v) body[k] = v;
    }
    const ids = String(f.get("ids") || "").split(/[\s,]+/).filter(Boolean);
    if (ids.length) body.ids = ids;
    const rate = Number(f.get("rate") || 0);
    if (rate > 0) body.rate = rate;
    return body;
  }

  function resetCount() {
    st.counted = null;
    $("replay-start").disabled = true;
    $("replay-start").textContent = "Replay";
    $("replay-counted").textContent = "";
  }

  async function countReplay() {
    resetCount();
    const filters = replayFilters();
    const key = JSON.stringify(filters);
    $("replay-counted").textContent = "Counting…";
    const job = await api("POST", "/replay", Object.assign({ dry_run: true }, filters));
    const p = await waitDone(job.id);
    if (p.error) throw new Error("dry run: " + p.error);
    st.counted = { key, total: p.total };
    $("replay-counted").textContent = `${int.format(p.total)} event${p.total === 1 ? "" : "s"} match` + (p.note ? ` (${p.note})` : "");
    $("replay-start").disabled = p.total === 0;
    $("replay-start").textContent = `Replay ${int.format(p.total)} event${p.total === 1 ? "" : "s"}`;
    loadReplays().catch(showError);
  }

  async function waitDone(id) {
    for (;;) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const p = await api("GET", "/replay/" + encodeURIComponent(id));
      if (p.done) return p;
    }
  }

  async function startReplay() {
    const filters = replayFilters();
    if (!st.counted || st.counted.key !== JSON.stringify(filters)) { resetCount(); return; }
    const job = await api("POST", "/replay", filters);
    st.replay = job.id;
    if (st.timer) schedule();
    $("replay-start").disabled = true;
    $("replay-progress").hidden = false;
    $("replay-bar").max = Math.max(st.counted.total, 1);
    $("replay-bar").value = 0;
    $("replay-figures").textContent = job.waiting === "paused" ? "Waiting for the resume: a paused relay publishes nothing." : "Starting…";
    loadReplays().catch(showError);
  }

  async function followReplay() {
    const p = await api("GET", "/replay/" + encodeURIComponent(st.replay));
    renderProgress(p);
    if (p.done) { st.replay = null; resetCount(); }
    await loadReplays();
  }

  function renderProgress(p) {
    const bar = $("replay-bar");
    bar.max = Math.max(p.total, p.sent, 1);
    bar.value = p.sent + p.failed + p.skipped;
    const parts = [`${int.format(p.sent)} of ${int.format(p.total)} sent`];
    if (p.failed) parts.push(`${int.format(p.failed)} failed`);
    if (p.events_per_second) parts.push(`${dec.format(p.events_per_second)} events/s`);
    if (p.eta && !p.done) parts.push(`about ${p.eta} left`);
    if (p.waiting === "paused") parts.push("waiting for the resume");
    if (p.stalled) parts.push(p.stalled);
    if (p.done) parts.push(p.error ? "ended: " + p.error : "done");
    $("replay-figures").textContent = parts.join(" · ");
  }

  async function loadReplays() {
    const r = await api("GET", "/replay");
    $("replay-rows").replaceChildren(...(r.replays || []).map((p) => el("tr", {},
      el("td", { "data-label": "Id", class: "mono", text: p.id }),
      el("td", { "data-label": "Filter", text: filterText(p.filter || {}) }),
      el("td", { "data-label": "Started", title: p.started_at, text: fmtAgo(p.started_at) }),
      el("td", { "data-label": "Sent", class: "num", text: int.format(p.sent) }),
      el("td", { "data-label": "Total", class: "num", text: int.format(p.total) }),
      el("td", { "data-label": "Outcome", text: outcome(p) }))));
  }
  function filterText(f) {
    const parts = [];
    if (f.since) parts.push("since " + new Date(f.since).toLocaleString());
    if (f.until) parts.push("until " + new Date(f.until).toLocaleString());
    for (const [k, label] of [["aggregate_type", "aggregate type"], ["aggregate_id", "aggregate id"], ["event_type", "event type"]]) {
      if (f[k]) parts.push(label + " " + f[k]);
    }
    if (f.ids && f.ids.length) parts.push(int.format(f.ids.length) + (f.ids.length === 1 ? " id" : " ids"));
    return parts.length ? parts.join(", ") : "every row";
  }
  function outcome(p) {
    if (!p.done) return p.waiting === "paused" ? "waiting for the resume" : "under way";
    if (p.error) return "failed: " + p.error;
    return p.dry_run ? "dry run: counted" : "done";
  }

  // --- pause -----------------------------------------------------------------------
  async function pause(ev) {
    ev.preventDefault();
    const reason = $("pause-reason").value.trim();
    await api("POST", "/pause", reason ? { reason } : undefined);
    $("pause-reason").value = "";
    await poll();
  }
  async function resume() {
    await api("POST", "/resume");
    await poll();
  }

  // --- start -----------------------------------------------------------------------
  async function loadDatabases() {
    const d = await api("GET", "/databases");
    const names = d.databases || [];
    if (names.length > 1) {
      const sel = $("database");
      sel.replaceChildren(...names.map((n) => el("option", { value: n, text: n })));
      const wanted = new URLSearchParams(location.search).get("database");
      st.database = names.includes(wanted) ? wanted : names[0];
      sel.value = st.database;
      $("db-picker").hidden = false;
    }
  }

  async function start() {
    $("main").hidden = false;
    $("token-form").hidden = true;
    await loadDatabases();
    await loadStatus();
    await poll();
    if (!st.timer) schedule();
    showTab(st.tab);
  }

  function wire() {
    for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => showTab(b.dataset.tab));
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      st.token = $("token").value.trim();
      sessionStorage.setItem(TOKEN_KEY, st.token);
      $("token").value = "";
      start().catch(showError);
    });
    $("database").addEventListener("change", () => {
      st.database = $("database").value;
      st.samples = []; lastSampleAt = ""; st.dlq.offset = 0; st.dlq.selected.clear(); st.dlq.seenDead = null;
      loadStatus().then(poll).then(() => showTab(st.tab)).catch(showError);
    });
    $("refresh-status").addEventListener("click", () => loadStatus().catch(showError));
    $("pause-form").addEventListener("submit", (ev) => pause(ev).catch(showError));
    $("resume").addEventListener("click", () => resume().catch(showError));
    $("dlq-all").addEventListener("change", () => {
      if ($("dlq-all").checked) for (const r of st.dlq.rows) st.dlq.selected.add(r.id);
      else st.dlq.selected.clear();
      renderDLQ();
    });
    $("dlq-retry-selected").addEventListener("click", () => retryIDs([...st.dlq.selected]).catch(showError));
    $("dlq-purge-selected").addEventListener("click", () => purgeSelected().catch(showError));
    $("dlq-prev").addEventListener("click", () => { st.dlq.offset = Math.max(0, st.dlq.offset - st.dlq.limit); loadDLQ().catch(showError); });
    $("dlq-next").addEventListener("click", () => { if (st.dlq.next !== null) { st.dlq.offset = st.dlq.next; loadDLQ().catch(showError); } });
    $("preview-close").addEventListener("click", () => { $("preview").hidden = true; });
    $("replay-form").addEventListener("submit", (ev) => { ev.preventDefault(); countReplay().catch((e) => { resetCount(); showError(e); }); });
    $("replay-form").addEventListener("input", () => { if (st.counted) resetCount(); });
    $("replay-start").addEventListener("click", () => startReplay().catch(showError));
    window.addEventListener("resize", drawCharts);
  }

  wire();
  start().catch(showError);
})();
