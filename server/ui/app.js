// strata's operator page: plain JavaScript, no build step. Data comes only
// from the query API (/api/v1/series, /api/v1/query_range) and the status
// endpoint (/api/v1/status/strata), each request carrying the token in the
// Authorization header, never in a URL.
"use strict";
(function () {
  const STATUS_EVERY_MS = 5000; // live figures and latest values
  const CHART_EVERY_MS = 30000; // chart of a relative range
  const MAX_POINTS = 1000; // per series and chart; the step follows
  const TOKEN_KEY = "strata.token";
  const COLORS = ["#0b5fcc", "#d1495b", "#2a9d8f", "#e9a23b", "#6a4c93", "#1982c4", "#8ac926", "#ff595e", "#3d405b", "#b5838d"];
  const STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];
  const TZ = (Intl.DateTimeFormat().resolvedOptions().timeZone) || "local time";

  const $ = (id) => document.getElementById(id);
  const el = (tag, props, ...kids) => {
    const e = document.createElement(tag);
    if (props) for (const [k, v] of Object.entries(props)) {
      if (k === "dataset") Object.assign(e.dataset, v);
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("aria-") || k === "role") e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  };

  // Exposed for the browser test and for a curious operator's console.
  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    measurements: [],
    measurement: "",
    series: [], // of the current measurement: {key, name, labels, selector}
    latest: new Map(), // key -> [sec, "value"]
    selected: new Map(), // key -> {key, name, labels, selector}
    range: 3600,
    zoom: null, // {from, to} in s, or null for the last `range` seconds
    plot: null,
    plotKeys: "",
    chartRaw: [], // per charted series: null, or index -> ±Inf or NaN (plotted as a gap)
    draws: [], // {points, ms} of each chart update
    timers: [],
    statusBusy: false,
    statusAgain: false, // a status refresh was asked for while one ran
  };
  window.strata = state;

  // ---- requests ---------------------------------------------------------

  class Unauthorized extends Error {}

  async function api(path, params) {
    const body = new URLSearchParams();
    for (const [k, v] of params || []) body.append(k, v);
    const headers = { "Content-Type": "application/x-www-form-urlencoded" };
    if (state.token) headers.Authorization = "Token " + state.token;
    const r = await fetch(path, { method: "POST", headers, body, cache: "no-store", credentials: "omit" });
    if (r.status === 401) throw new Unauthorized("unauthorized");
    let j;
    try { j = await r.json(); } catch (e) { throw new Error(path + ": HTTP " + r.status); }
    if (j.status !== "success") throw new Error(j.error || (path + ": HTTP " + r.status));
    return j;
  }

  function fail(err) {
    if (err instanceof Unauthorized) return askToken(state.token ? "That token was not accepted." : "");
    $("error").textContent = String(err && err.message || err);
  }

  // ---- token ------------------------------------------------------------

  function askToken(msg) {
    stopTimers();
    $("main").hidden = true;
    $("signout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = msg || "";
    setHealth("token needed", "");
    $("token").focus();
  }

  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("token").value.trim();
    $("token").value = "";
    sessionStorage.setItem(TOKEN_KEY, state.token);
    start();
  });

  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = "";
    askToken("");
  });

  // ---- formatting -------------------------------------------------------

  // sampleValue reads a sample value as the query API and the status
  // endpoint write it (Prometheus' form, a string): Number() takes a
  // decimal but none of "+Inf", "-Inf" and "NaN" (it knows "Infinity").
  function sampleValue(s) {
    switch (s) {
      case "+Inf": case "Inf": return Infinity;
      case "-Inf": return -Infinity;
      case "NaN": return NaN;
      default: return Number(s);
    }
  }
  // special is how a value that is no finite number shows: "–" when it is
  // missing (null or undefined), else as Prometheus shows it; "" for a
  // finite number.
  function special(v) {
    if (v == null) return "–";
    if (v === Infinity) return "+Inf";
    if (v === -Infinity) return "-Inf";
    if (Number.isNaN(v)) return "NaN";
    return "";
  }

  const nf = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 4 });
  function fmtNum(v) {
    const sp = special(v);
    if (sp) return sp;
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e15 || a < 1e-4)) return v.toExponential(3);
    return nf.format(v);
  }
  const intf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
  const fmtInt = (v) => (v == null ? "–" : intf.format(v)); // counts, exact
  function fmtBytes(v) {
    const sp = special(v);
    if (sp) return sp;
    const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0, x = Math.abs(v);
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return (v < 0 ? "-" : "") + nf.format(x) + " " + u[i];
  }
  function fmtSeconds(v) {
    const sp = special(v);
    if (sp) return sp;
    const a = Math.abs(v);
    if (a === 0) return "0 s";
    if (a < 1e-3) return nf.format(v * 1e6) + " µs";
    if (a < 1) return nf.format(v * 1e3) + " ms";
    if (a < 120) return nf.format(v) + " s";
    if (a < 7200) return nf.format(v / 60) + " min";
    if (a < 172800) return nf.format(v / 3600) + " h";
    return nf.format(v / 86400) + " d";
  }
  function fmtRate(v) { return fmtNum(v == null ? v : Math.round(v * 10) / 10) + " /s"; }
  const tf = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });
  function fmtTime(sec) { return tf.format(new Date(sec * 1000)); }
  function fmtAgo(sec) {
    const d = Math.round(Date.now() / 1000 - sec);
    const a = Math.abs(d);
    const s = a < 60 ? a + " s" : a < 3600 ? Math.round(a / 60) + " min" : a < 86400 ? Math.round(a / 3600) + " h" : Math.round(a / 86400) + " d";
    return d < 0 ? "in " + s : s + " ago";
  }

  // The unit of a series, guessed from Prometheus' naming conventions.
  const UNITS = [
    [/(^|_)bytes(_total)?$/, "bytes", fmtBytes],
    [/(^|_)seconds(_total)?$/, "s", fmtSeconds],
    [/(^|_)(celsius|temperature|temp)$/, "°C", (v) => fmtNum(v) + " °C"],
    [/(^|_)(percent|pct|humidity)$/, "%", (v) => fmtNum(v) + " %"],
    [/(^|_)ratio$/, "ratio", fmtNum],
    [/(^|_)(volts|voltage)$/, "V", (v) => fmtNum(v) + " V"],
    [/(^|_)(amperes|current)$/, "A", (v) => fmtNum(v) + " A"],
    [/(^|_)(watts|power)$/, "W", (v) => fmtNum(v) + " W"],
    [/(^|_)hertz$/, "Hz", (v) => fmtNum(v) + " Hz"],
  ];
  function unitOf(name) {
    const n = String(name).toLowerCase();
    for (const [re, unit, fmt] of UNITS) if (re.test(n)) return { unit, fmt };
    return { unit: "", fmt: fmtNum };
  }

  // ---- series names and selectors ---------------------------------------

  const quote = (s) => '"' + String(s).replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
  // promStr is a PromQL string literal of s. PromQL's lexer refuses U+FFFD
  // as it is (it takes it for invalid UTF-8), so it goes as an escape.
  const promStr = (s) => quote(s).replace(/\uFFFD/g, "\\uFFFD");
  const reEscape = (s) => String(s).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

  function seriesKey(labels) {
    const ks = Object.keys(labels).filter((k) => k !== "__name__").sort();
    return (labels.__name__ || "") + "{" + ks.map((k) => k + "=" + quote(labels[k])).join(",") + "}";
  }

  // selectorOf picks exactly this series: its labels, and "" for each
  // other tag key of its measurement.
  function selectorOf(labels, allKeys) {
    const parts = ["__name__=" + promStr(labels.__name__)];
    for (const k of Object.keys(labels).sort()) if (k !== "__name__") parts.push(k + "=" + promStr(labels[k]));
    for (const k of allKeys) if (!(k in labels)) parts.push(k + '=""');
    return "{" + parts.join(",") + "}";
  }

  // The measurement of a metric name: the longest measurement m with
  // name == m or name == m + "_" + field.
  function measurementOf(name) {
    let best = "";
    for (const m of state.measurements) {
      if ((name === m || name.startsWith(m + "_")) && m.length > best.length) best = m;
    }
    return best;
  }

  const measSelector = (m) => "{__name__=~" + promStr(reEscape(m) + "|" + reEscape(m) + "_.+") + "}";

  // ---- live figures -----------------------------------------------------

  function setHealth(text, cls) {
    const h = $("health");
    h.textContent = text;
    h.className = "pill " + (cls || "");
  }

  // cards fills dl with [label, value, class, id, group] items.
  function cards(dl, items) {
    dl.replaceChildren(...items.map(([label, value, cls, id, group]) =>
      el("div", { dataset: { stat: id }, className: group ? "group" : "" }, el("dt", { text: label }), el("dd", { text: value, className: cls || "" }))));
  }

  // refreshStatus runs one request at a time. The timer's call is skipped
  // while one is under way; a call with again (another measurement was
  // selected) runs once it is done, as its answer may be for the
  // measurement before.
  async function refreshStatus(again) {
    if (state.statusBusy) { if (again === true) state.statusAgain = true; return; }
    state.statusBusy = true;
    state.statusAgain = false;
    try {
      const params = [["limit", "1000"]];
      if (state.measurement) params.push(["match[]", measSelector(state.measurement)]);
      const j = await api("/api/v1/status/strata", params);
      showStatus(j.data);
      $("error").textContent = "";
    } catch (e) {
      setHealth("unreachable", "bad");
      fail(e);
    } finally {
      state.statusBusy = false;
      if (state.statusAgain && $("login").hidden) refreshStatus(true); // not while asking for the token
    }
  }

  function showStatus(d) {
    const db = d.db;
    setHealth(db.stalled ? "writes stalled" : "ok", db.stalled ? "bad" : "ok");
    $("updated").textContent = "updated " + new Date(d.time).toLocaleTimeString();
    const levels = (d.levels || []).map((l, i) => [i, l.segments]).filter(([, n]) => n > 0);
    const segs = levels.reduce((a, [, n]) => a + n, 0);
    const items = [
      ["Ingest", fmtRate(db.pointsPerSecond), "", "ingest"],
      ["Samples", fmtRate(db.samplesPerSecond), "", "samples"],
      ["Series", fmtInt(db.series), "", "series"],
      ["Disk", fmtBytes(db.diskBytes), "", "disk"],
      ["Bytes / sample", db.bytesPerSample ? nf.format(db.bytesPerSample) + " B" : "–", "", "bps"],
      ["WAL", fmtBytes(db.walBytes), "", "wal"],
      ["Memtable", fmtBytes(db.memTableBytes) + (db.immutableMemTables ? " +" + db.immutableMemTables : ""), db.immutableMemTables > 1 ? "bad" : "", "memtable"],
      ["Segments", segs + (levels.length ? " (" + levels.map(([l, n]) => "L" + l + ":" + n).join(" ") + ")" : ""), "", "segments"],
      ["Compactions", fmtInt(db.compactions), "", "compactions"],
      ["Compaction due", fmtBytes(db.pendingCompactionBytes), "", "pending"],
      ["Write stalls", fmtInt(db.writeStalls), db.writeStalls ? "bad" : "", "stalls"],
      ["Written", fmtInt(db.pointsWritten) + " pts", "", "points"],
    ];
    const fw = d.forward;
    if (fw) {
      items.push(
        ["Forward lag", fmtSeconds(fw.lagSeconds), fw.lagSeconds > 60 ? "bad" : "", "fwd-lag", true],
        ["Backlog", fmtInt(fw.backlogSamples), "", "fwd-backlog", true],
        ["Backlog bytes", fmtBytes(fw.backlogBytes), "", "fwd-backlog-bytes", true],
        ["Forwarded", fmtInt(fw.samplesSent), "", "fwd-sent", true],
        ["Fwd dropped", fmtInt(fw.samplesDropped), fw.samplesDropped ? "bad" : "", "fwd-dropped", true],
        ["Fwd retries", fmtInt(fw.retries), "", "fwd-retries", true],
        ["Fwd success", fw.lastSuccess ? fmtAgo(Date.parse(fw.lastSuccess) / 1000) : "never", "", "fwd-success", true]);
      if (fw.lastError) items.push(["Fwd error", fw.lastError, "bad", "fwd-error", true]);
    }
    const mq = d.mqtt;
    if (mq) {
      items.push(
        ["MQTT", mq.connected ? "connected" : "disconnected", mq.connected ? "ok" : "bad", "mqtt-state", true],
        ["Broker", mq.broker || "–", "", "mqtt-broker", true],
        ["MQTT messages", fmtInt(mq.messages), "", "mqtt-messages", true],
        ["MQTT points", fmtInt(mq.points), "", "mqtt-points", true],
        ["MQTT errors", fmtInt(mq.errors), mq.errors ? "bad" : "", "mqtt-errors", true],
        ["Last message", mq.lastMessage ? fmtAgo(Date.parse(mq.lastMessage) / 1000) : "never", "", "mqtt-last", true]);
      if (mq.lastError) items.push(["MQTT error", mq.lastError, "bad", "mqtt-error", true]);
    }
    cards($("stats"), items);
    if (JSON.stringify(d.measurements) !== JSON.stringify(state.measurements)) {
      state.measurements = d.measurements;
      renderMeasurements();
    }
    state.latest = new Map();
    for (const s of d.latest || []) state.latest.set(seriesKey(s.metric), s.value);
    updateLatest();
  }

  // ---- measurements and series ------------------------------------------

  function renderMeasurements() {
    const ul = $("measurements");
    ul.replaceChildren(...state.measurements.map((m) => el("li", null,
      el("button", { type: "button", dataset: { measurement: m }, "aria-current": String(m === state.measurement), onclick: () => selectMeasurement(m) },
        el("span", { className: "name", text: m })))));
    if (!state.measurements.length) ul.append(el("li", { className: "muted", text: "no data yet" }));
  }

  let measSeq = 0;
  async function selectMeasurement(m) {
    const seq = ++measSeq;
    state.measurement = m;
    for (const b of $("measurements").querySelectorAll("button")) b.setAttribute("aria-current", String(b.dataset.measurement === m));
    try {
      const j = await api("/api/v1/series", [["match[]", measSelector(m)], ["limit", "5000"]]);
      if (seq !== measSeq) return; // another measurement was selected since
      const rows = j.data.filter((ls) => measurementOf(ls.__name__) === m);
      const keys = new Set();
      for (const ls of rows) for (const k of Object.keys(ls)) if (k !== "__name__") keys.add(k);
      const allKeys = [...keys].sort();
      state.series = rows.map((ls) => ({ key: seriesKey(ls), name: ls.__name__, labels: ls, selector: selectorOf(ls, allKeys) }));
      state.series.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      $("series-count").textContent = "(" + state.series.length + (j.warnings ? ", truncated" : "") + ")";
      renderTagFilters(allKeys);
      renderSeries();
      await refreshStatus(true); // latest values of this measurement
    } catch (e) { if (seq === measSeq) fail(e); }
  }

  function renderTagFilters(keys) {
    const box = $("tagfilters");
    box.replaceChildren();
    for (const k of keys) {
      const values = [...new Set(state.series.map((s) => s.labels[k] || ""))].sort();
      if (values.length < 2) continue;
      const id = "tag-" + k;
      const sel = el("select", { id, dataset: { tag: k }, onchange: renderSeries },
        el("option", { value: "\u0000", text: "any" }), ...values.map((v) => el("option", { value: v, text: v === "" ? "(none)" : v })));
      box.append(el("label", { htmlFor: id, text: k }), sel);
    }
  }

  function visibleSeries() {
    const q = $("filter").value.trim().toLowerCase();
    // The first option is "any"; a tag value may be anything, NUL too.
    const tagSel = [...$("tagfilters").querySelectorAll("select")].filter((s) => s.selectedIndex > 0);
    return state.series.filter((s) =>
      (!q || s.key.toLowerCase().includes(q)) && tagSel.every((sel) => (s.labels[sel.dataset.tag] || "") === sel.value));
  }

  function renderSeries() {
    const ul = $("series");
    const shown = visibleSeries();
    ul.replaceChildren(...shown.map((s) => el("li", null,
      el("button", {
        type: "button", "aria-pressed": String(state.selected.has(s.key)), dataset: { key: s.key },
        onclick: (ev) => toggleSeries(s, ev.currentTarget),
      }, el("span", { className: "name", text: s.key }), el("span", { className: "value" })))));
    if (!shown.length) ul.append(el("li", { className: "muted", text: state.series.length ? "no series match" : "" }));
    updateLatest();
  }

  function updateLatest() {
    for (const b of $("series").querySelectorAll("button")) {
      const v = state.latest.get(b.dataset.key);
      const span = b.querySelector(".value");
      if (!v) { span.textContent = ""; delete b.dataset.value; delete b.dataset.time; continue; }
      b.dataset.value = v[1];
      b.dataset.time = String(v[0]);
      const u = unitOf(b.dataset.key.slice(0, b.dataset.key.indexOf("{")));
      span.replaceChildren(u.fmt(sampleValue(v[1])), el("small", { text: fmtAgo(v[0]), title: fmtTime(v[0]) }));
    }
  }

  function toggleSeries(s, button) {
    if (state.selected.has(s.key)) state.selected.delete(s.key);
    else state.selected.set(s.key, s);
    button.setAttribute("aria-pressed", String(state.selected.has(s.key)));
    loadChart();
  }

  $("filter").addEventListener("input", renderSeries);

  // ---- chart ------------------------------------------------------------

  function niceStep(raw) {
    for (const s of STEPS) if (s >= raw) return s;
    return Math.ceil(raw / 86400) * 86400;
  }

  function chartRange() {
    if (state.zoom) return [state.zoom.from, state.zoom.to];
    const end = Date.now() / 1000;
    return [end - state.range, end];
  }

  let chartSeq = 0;
  async function loadChart() {
    const seq = ++chartSeq;
    const sel = [...state.selected.values()];
    $("chart-empty").hidden = sel.length > 0;
    if (!sel.length) {
      if (state.plot) { state.plot.destroy(); state.plot = null; state.plotKeys = ""; }
      $("chart-note").textContent = "";
      return;
    }
    let [from, to] = chartRange();
    // A round step, and a range aligned to it so that refreshes plot the
    // same instants.
    const step = niceStep((to - from) / MAX_POINTS);
    const start = Math.floor(from / step) * step, end = Math.ceil(to / step) * step;
    try {
      const res = await Promise.all(sel.map((s) => api("/api/v1/query_range",
        [["query", s.selector], ["start", String(start)], ["end", String(end)], ["step", String(step)]])));
      if (seq !== chartSeq) return; // a newer request is under way
      const n = Math.round((end - start) / step) + 1;
      const x = new Array(n);
      for (let i = 0; i < n; i++) x[i] = start + i * step;
      // ys are plotted; raws hold the values that are no finite number
      // (±Inf, NaN), which the chart cannot place and shows as gaps, for
      // its legend.
      const raws = [];
      const ys = sel.map((s, i) => {
        const y = new Array(n).fill(null);
        let raw = null;
        const r = res[i].data.result;
        const one = r.find((e) => seriesKey(e.metric) === s.key) || r[0];
        if (one) for (const [t, v] of one.values) {
          const k = Math.round((t - start) / step);
          if (k < 0 || k >= n) continue;
          const f = sampleValue(v);
          if (Number.isFinite(f)) { y[k] = f; continue; }
          y[k] = null;
          (raw || (raw = new Map())).set(k, f);
        }
        raws.push(raw);
        return y;
      });
      state.chartRaw = raws;
      draw(x, ys, sel.map((s) => ({ key: s.key, name: s.name })));
      $("chart-note").textContent = "step " + fmtSeconds(step) + " · times in " + TZ;
      $("error").textContent = "";
    } catch (e) { fail(e); }
  }

  function chartSize() {
    const w = Math.max(200, $("chart").clientWidth);
    return { width: w, height: Math.round(Math.min(380, Math.max(220, w * 0.42))) };
  }

  // draw plots x and ys, creating the plot when the series changed and
  // otherwise only replacing its data. It returns the time setData took.
  function draw(x, ys, series) {
    const keys = series.map((s) => s.key).join("\n");
    if (!state.plot || state.plotKeys !== keys) {
      if (state.plot) state.plot.destroy();
      state.plot = new uPlot(plotOptions(series), [[], ...ys.map(() => [])], $("chart"));
      state.plotKeys = keys;
    }
    const t0 = performance.now();
    state.plot.batch(() => state.plot.setData([x, ...ys]));
    const ms = performance.now() - t0;
    state.draws.push({ points: x.length * ys.length, ms });
    if (state.draws.length > 50) state.draws.shift();
    return ms;
  }

  function plotOptions(series) {
    const units = [];
    const scaleOf = series.map((s) => {
      const u = unitOf(s.name);
      let i = units.findIndex((x) => x.unit === u.unit);
      if (i < 0) { units.push(u); i = units.length - 1; }
      return Math.min(i, 1); // two value axes at most
    });
    const mixed = units.length > 2;
    const axis = (i) => {
      const u = mixed && i === 1 ? { unit: "", fmt: fmtNum } : units[i];
      return {
        scale: "y" + i, side: i ? 1 : 3, size: 64,
        values: (self, splits) => splits.map(u.fmt), // the values carry their unit
        grid: { show: i === 0 },
      };
    };
    const { width, height } = chartSize();
    return {
      width, height,
      scales: { x: { time: true } },
      series: [{ label: "time (" + TZ + ")", value: (self, v) => (v == null ? "–" : fmtTime(v)) }].concat(series.map((s, i) => ({
        label: s.key, scale: "y" + scaleOf[i], stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false,
        value: (self, v, si, idx) => {
          if (v == null && idx != null) { // a gap: missing, or ±Inf or NaN
            const raw = state.chartRaw[i];
            if (raw && raw.has(idx)) v = raw.get(idx);
          }
          return v == null ? "–" : unitOf(s.name).fmt(v);
        },
        points: { show: false },
      }))),
      axes: [{ values: axisTimes, space: 80 }].concat(units.slice(0, 2).map((u, i) => axis(i))),
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: { setSelect: [onSelect] },
      legend: { live: true },
    };
  }

  // Times on the x axis, in the browser's zone: the date where it changes.
  const hm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const hms = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  const md = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
  function axisTimes(self, splits, axisIdx, foundSpace, foundIncr) {
    let prevDay = "";
    return splits.map((t) => {
      const d = new Date(t * 1000);
      const day = md.format(d);
      let s = foundIncr < 60 ? hms.format(d) : hm.format(d);
      if (foundIncr >= 86400) s = day;
      else if (day !== prevDay) s += "\n" + day;
      prevDay = day;
      return s;
    });
  }

  function onSelect(u) {
    const s = u.select;
    if (s.width < 3) return;
    const from = u.posToVal(s.left, "x"), to = u.posToVal(s.left + s.width, "x");
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    if (to - from < 0.01) return;
    state.zoom = { from, to };
    $("unzoom").hidden = false;
    loadChart();
  }

  $("unzoom").addEventListener("click", () => {
    state.zoom = null;
    $("unzoom").hidden = true;
    loadChart();
  });
  $("range").addEventListener("change", (ev) => {
    state.range = Number(ev.target.value);
    state.zoom = null;
    $("unzoom").hidden = true;
    loadChart();
  });

  new ResizeObserver(() => { if (state.plot) state.plot.setSize(chartSize()); }).observe($("chart"));

  // benchDraw draws n synthetic points through the same path as real data
  // and returns the milliseconds setData took; the real chart comes back
  // with the next load of the chart.
  state.benchDraw = function (n) {
    const x = new Array(n), y = new Array(n);
    const t0 = Math.floor(Date.now() / 1000) - n;
    for (let i = 0; i < n; i++) { x[i] = t0 + i; y[i] = Math.sin(i / 50) * 10 + (i % 7); }
    return draw(x, [y], [{ key: "bench{}", name: "bench" }]); // a new plot the first time only
  };

  // ---- start ------------------------------------------------------------

  function stopTimers() {
    for (const t of state.timers) clearInterval(t);
    state.timers = [];
  }

  async function start() {
    stopTimers();
    if (document.documentElement.dataset.auth === "token" && !state.token) return askToken("");
    $("login").hidden = true;
    try {
      await refreshStatus();
    } catch (e) { return fail(e); }
    if (!$("login").hidden) return; // the token was refused
    $("main").hidden = false;
    $("signout").hidden = !state.token;
    if (state.plot) state.plot.setSize(chartSize());
    state.timers.push(setInterval(refreshStatus, STATUS_EVERY_MS));
    state.timers.push(setInterval(() => { if (!state.zoom && state.selected.size) loadChart(); }, CHART_EVERY_MS));
    state.ready = true;
    document.body.dataset.ready = "true";
  }

  start();
})();
