//! thresher's status page: asks /v1/models and /v1/history every snapshot interval and draws each
//! learner's charts as plain SVG (no library, nothing from another host). Inlined into page.html at
//! GET / (api/status/mod.rs). Every value from the daemon enters the page as text (textContent or an
//! attribute), never as markup: feature names come from whoever posts samples.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const TOKEN_KEY = "thresher.read_token";
  const TOP_WEIGHTS = 15;
  const COLORS = {
    primal: "#2563eb", dual: "#16a34a", gap: "#dc2626", support: "#7c3aed", churn: "#f59e0b",
    loss: "#0891b2", ingest: "#2563eb", reject: "#dc2626", fill: "#16a34a", lambda: "#9333ea",
  };
  const learners = new Map();
  const main = document.getElementById("learners");
  const statusLine = document.getElementById("status");
  const labelsLine = document.getElementById("labels");
  const authForm = document.getElementById("auth");
  const tokenField = document.getElementById("token");
  const authMessage = document.getElementById("auth-message");
  let interval = 500;
  let timer = null;

  class AuthNeeded extends Error {}

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  async function errorText(r) {
    try {
      return (await r.json()).error || "HTTP " + r.status;
    } catch (e) {
      return "HTTP " + r.status;
    }
  }

  // The token goes in a header only: URLs end up in logs and histories.
  async function getJson(path) {
    const headers = {};
    const t = token();
    if (t) headers.Authorization = "Bearer " + t;
    const r = await fetch(path, { headers: headers, cache: "no-store" });
    if (r.status === 401 || r.status === 403) throw new AuthNeeded(await errorText(r));
    if (!r.ok) throw new Error(path + ": " + (await errorText(r)));
    return r.json();
  }

  function setStatus(text, error) {
    statusLine.textContent = text;
    statusLine.className = error ? "error" : "";
  }

  function askToken(message) {
    if (token()) {
      sessionStorage.removeItem(TOKEN_KEY);
      authMessage.textContent = "the token was refused: " + message;
    } else {
      authMessage.textContent = "";
    }
    authForm.hidden = false;
    setStatus("a read token is needed", true);
    tokenField.focus();
  }

  authForm.addEventListener("submit", function (e) {
    e.preventDefault();
    const t = tokenField.value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    tokenField.value = "";
    authForm.hidden = true;
    refresh();
  });

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svgEl(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
    return String(Number(v.toPrecision(4)));
  }

  function clock(unix) {
    return new Date(unix * 1000).toLocaleTimeString([], { hour12: false });
  }

  function niceStep(span) {
    const p = Math.pow(10, Math.floor(Math.log10(span)));
    const f = span / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  // One chart: `series` = [{name, color, pts: [[unix, value], ...]}]; on a log scale a value <= 0 is
  // drawn on the lowest line (the gap reaches 0 at exact convergence).
  function chart(svg, series, log) {
    const W = 400, H = 190, L = 50, R = 10, T = 20, B = 20;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.replaceChildren();
    let x0 = Infinity, x1 = -Infinity, lo = Infinity, hi = -Infinity, n = 0;
    for (const s of series) {
      for (const [x, y] of s.pts) {
        n++;
        x0 = Math.min(x0, x); x1 = Math.max(x1, x);
        if (log && !(y > 0)) continue;
        lo = Math.min(lo, y); hi = Math.max(hi, y);
      }
    }
    if (n === 0) {
      svg.appendChild(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data yet"));
      return;
    }
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    let ticks = [];
    let scale;
    if (log) {
      if (!(hi > 0)) { lo = 1e-12; hi = 1; }
      let a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
      if (b === a) b = a + 1;
      const every = Math.ceil((b - a) / 6);
      for (let e = a; e <= b; e += every) ticks.push(Math.pow(10, e));
      const la = a, lb = b;
      scale = (y) => (Math.log10(Math.max(y, Math.pow(10, la))) - la) / (lb - la);
    } else {
      lo = Math.min(lo, 0);
      if (hi <= lo) hi = lo + 1;
      const step = niceStep((hi - lo) / 4);
      lo = Math.floor(lo / step) * step;
      hi = Math.ceil(hi / step) * step;
      for (let v = lo; v <= hi + step / 2; v += step) ticks.push(v);
      const a = lo, b = hi;
      scale = (y) => (y - a) / (b - a);
    }
    const px = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const py = (y) => T + (1 - scale(y)) * (H - T - B);
    for (const t of ticks) {
      const y = py(t).toFixed(1);
      svg.appendChild(svgEl("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid-line" }));
      const label = log ? t.toExponential(0).replace("e+0", "").replace("e+", "e") : fmt(t);
      svg.appendChild(svgEl("text", { x: L - 4, y: Number(y) + 3, "text-anchor": "end" }, label));
    }
    // Time axis: age relative to the newest point, whose clock time ends the axis.
    const minutes = x1 - x0 > 600;
    for (let i = 0; i <= 3; i++) {
      const x = x0 + ((x1 - x0) * i) / 3;
      const ago = (x - x1) / (minutes ? 60 : 1);
      const label = i === 3 ? clock(x1) : Number(ago.toPrecision(2)) + (minutes ? " min" : " s");
      svg.appendChild(svgEl("text", { x: px(x), y: H - 5, "text-anchor": i === 3 ? "end" : "middle" }, label));
    }
    svg.appendChild(svgEl("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    const legend = svgEl("g", { class: "legend" });
    let lx = L;
    for (const s of series) {
      legend.appendChild(svgEl("rect", { x: lx, y: 4, width: 10, height: 10, fill: s.color }));
      legend.appendChild(svgEl("text", { x: lx + 13, y: 13 }, s.name));
      lx += 20 + 7 * s.name.length;
      const coords = s.pts.map(([x, y]) => px(x).toFixed(1) + "," + py(y).toFixed(1));
      svg.appendChild(svgEl("polyline", {
        "data-series": s.name, "data-points": s.pts.length, points: coords.join(" "), stroke: s.color,
      }));
      if (s.pts.length <= 60) {
        for (const c of coords) {
          const [cx, cy] = c.split(",");
          svg.appendChild(svgEl("circle", { cx: cx, cy: cy, r: 1.8, fill: s.color }));
        }
      }
    }
    svg.appendChild(legend);
  }

  const CHARTS = [
    ["objective", "Certificate: primal, dual and gap (log scale)"],
    ["support", "Support size and churn per snapshot"],
    ["loss", "Progressive loss (log scale)"],
    ["rates", "Samples accepted and rejected per second (daemon)"],
    ["fill", "Window fill (%)"],
    ["lambda", "Live lambda (lambda = auto, log scale)"],
  ];

  function learner(name) {
    let l = learners.get(name);
    if (l) return l;
    const section = el("section", { class: "learner", "data-learner": name });
    section.appendChild(el("h2", {}, name));
    const facts = el("div", { class: "facts" });
    section.appendChild(facts);
    const grid = el("div", { class: "grid" });
    const svgs = {};
    for (const [id, caption] of CHARTS) {
      const fig = el("figure", { "data-figure": id });
      fig.appendChild(el("figcaption", {}, caption));
      svgs[id] = svgEl("svg", { class: "chart", "data-chart": id, "data-learner": name });
      fig.appendChild(svgs[id]);
      grid.appendChild(fig);
    }
    const fig = el("figure", { "data-figure": "weights" });
    fig.appendChild(el("figcaption", {}, "Top weights"));
    const table = el("table", { class: "weights", "data-learner": name });
    fig.appendChild(table);
    grid.appendChild(fig);
    section.appendChild(grid);
    main.appendChild(section);
    l = { name: name, points: [], model: null, now: 0, facts: facts, svgs: svgs, table: table };
    learners.set(name, l);
    return l;
  }

  function fact(parent, label, value) {
    parent.appendChild(document.createTextNode(label + " "));
    parent.appendChild(el("b", {}, value));
    parent.appendChild(document.createTextNode("  ·  "));
  }

  function render(l) {
    const p = l.points;
    const last = p[p.length - 1];
    const m = l.model;
    l.facts.replaceChildren();
    if (m) {
      fact(l.facts, "solver", m.solver + " / " + m.loss);
      fact(l.facts, "k", String(m.k));
      fact(l.facts, m.lambda_auto ? "live lambda" : "lambda", fmt(m.lambda));
      fact(l.facts, "version", String(m.version));
      const age = last ? Math.max(0, l.now - last.updated_at) : NaN;
      fact(l.facts, "snapshot age", fmt(age) + " s");
      fact(l.facts, "samples seen", String(m.samples_seen));
      fact(l.facts, "gap", fmt(m.certificate.gap));
    } else {
      fact(l.facts, "version", "none published yet");
    }
    // The publish gate: the served model is the last one that passed; a newer candidate withheld.
    const gate = l.entry && l.entry.publish;
    if (gate) {
      const c = gate.candidate;
      const b = el("b", { class: c ? "gate withheld" : "gate", "data-gate": c ? "withheld" : "passed" },
        "relative gap ≤ " + fmt(gate.max_relative_gap) +
        (c ? " · withheld: gap " + fmt(c.relative_gap) + " (" + c.withheld_total + " so far)" : " · served model passed"));
      l.facts.appendChild(document.createTextNode("publish gate "));
      l.facts.appendChild(b);
      l.facts.appendChild(document.createTextNode("  ·  "));
    }
    // Drift alarms: the action, the count and the latest.
    const drift = l.entry && l.entry.drift;
    if (drift) {
      const e = drift.last;
      const b = el("b", { class: drift.alarms ? "drift" : "", "data-drift": String(drift.alarms) },
        drift.action + " · " + drift.alarms + (drift.alarms === 1 ? " alarm" : " alarms") +
        (e ? " · last at sample " + e.at_sample + (e.dropped ? ", " + e.dropped + " dropped" : "") : ""));
      l.facts.appendChild(document.createTextNode("drift "));
      l.facts.appendChild(b);
      l.facts.appendChild(document.createTextNode("  ·  "));
    }
    // Forgetting: older samples weigh less.
    const forgetting = l.entry && l.entry.forgetting;
    if (forgetting) {
      l.facts.appendChild(document.createTextNode("forgetting "));
      l.facts.appendChild(el("b", { "data-half-life": String(forgetting.half_life_samples) },
        "half-life " + forgetting.half_life_samples + " samples"));
      l.facts.appendChild(document.createTextNode("  ·  "));
    }
    if (last) l.facts.appendChild(document.createTextNode(p.length + " snapshots shown"));
    const series = (name, f, from) => ({
      name: name, color: COLORS[name], pts: p.slice(from || 0).map((q, i) => [q.updated_at, f(q, i + (from || 0))]),
    });
    chart(l.svgs.objective, [
      series("primal", (q) => q.primal), series("dual", (q) => q.dual), series("gap", (q) => q.gap),
    ], true);
    l.svgs.objective.setAttribute("data-version", last ? last.version : 0);
    chart(l.svgs.support, [
      series("support", (q) => q.support_size), series("churn", (q) => q.support_changes),
    ], false);
    chart(l.svgs.loss, [series("loss", (q) => q.progressive_loss)], true);
    const rate = (key) => (q, i) => {
      const dt = q.updated_at - p[i - 1].updated_at;
      return dt > 0 ? Math.max(0, q[key] - p[i - 1][key]) / dt : 0;
    };
    chart(l.svgs.rates, [
      series("ingest", rate("samples_ingested_total"), 1), series("reject", rate("samples_rejected_total"), 1),
    ], false);
    chart(l.svgs.fill, [series("fill", (q) => (100 * q.window_samples) / Math.max(1, q.window_capacity))], false);
    const auto = p.some((q) => q.lambda_auto);
    l.svgs.lambda.parentNode.hidden = !auto;
    if (auto) chart(l.svgs.lambda, [series("lambda", (q) => q.lambda)], true);
    weights(l);
  }

  function weights(l) {
    const t = l.table;
    t.replaceChildren();
    const head = el("tr");
    for (const h of ["#", "feature", "index", "weight", ""]) head.appendChild(el("th", {}, h));
    t.appendChild(head);
    const m = l.model;
    if (!m) return;
    const names = m.feature_names || [];
    const rows = m.support.map((j, i) => ({ index: j, weight: m.weights[i], name: names[i] }));
    rows.sort((a, b) => Math.abs(b.weight) - Math.abs(a.weight));
    const top = rows.slice(0, TOP_WEIGHTS);
    const biggest = top.length ? Math.abs(top[0].weight) || 1 : 1;
    top.forEach((r, i) => {
      const tr = el("tr", { "data-index": r.index });
      tr.appendChild(el("td", { class: "num" }, String(i + 1)));
      tr.appendChild(el("td", { class: "feature" }, r.name == null ? "x" + r.index : r.name));
      tr.appendChild(el("td", { class: "num" }, String(r.index)));
      tr.appendChild(el("td", { class: "num" }, fmt(r.weight)));
      const bar = el("td");
      const width = Math.round((80 * Math.abs(r.weight)) / biggest);
      bar.appendChild(el("span", { class: r.weight < 0 ? "bar neg" : "bar", style: "width:" + width + "px" }));
      tr.appendChild(bar);
      t.appendChild(tr);
    });
    if (m.intercept) {
      const tr = el("tr");
      tr.appendChild(el("td"));
      tr.appendChild(el("td", { class: "feature" }, "(intercept)"));
      tr.appendChild(el("td"));
      tr.appendChild(el("td", { class: "num" }, fmt(m.intercept)));
      tr.appendChild(el("td"));
      t.appendChild(tr);
    }
  }

  // A multi-class learner: the top features of its classes' models, one weight column per class
  // (blank where a class's support leaves the feature out), and the summed gap.
  function renderMulticlass(g) {
    let section = main.querySelector('section[data-multiclass="' + CSS.escape(g.learner) + '"]');
    if (!section) {
      section = el("section", { class: "learner", "data-multiclass": g.learner });
      section.appendChild(el("h2", {}, g.learner + " · " + g.members.length + " classes, one vs rest"));
      section.appendChild(el("div", { class: "facts" }));
      const table = el("table", { class: "weights multiclass", "data-learner": g.learner });
      section.appendChild(table);
      const first = learners.get(g.members[0]);
      main.insertBefore(section, first ? first.table.closest("section") : null);
    }
    const models = g.members.map((n) => (learners.get(n) || {}).model);
    const facts = section.querySelector(".facts");
    facts.replaceChildren();
    if (models.some((m) => !m)) {
      fact(facts, "classes published", models.filter((m) => m).length + " of " + g.members.length);
    } else {
      fact(facts, "gap (sum over classes)", fmt(models.reduce((s, m) => s + m.certificate.gap, 0)));
      fact(facts, "samples seen", String(Math.min(...models.map((m) => m.samples_seen))));
    }
    const rows = new Map();
    models.forEach((m, c) => {
      if (!m) return;
      const names = m.feature_names || [];
      m.support.forEach((j, i) => {
        const r = rows.get(j) || { index: j, name: names[i], w: new Array(g.members.length).fill(null), top: 0 };
        r.w[c] = m.weights[i];
        r.top = Math.max(r.top, Math.abs(m.weights[i]));
        rows.set(j, r);
      });
    });
    const t = section.querySelector("table");
    t.replaceChildren();
    const head = el("tr");
    for (const h of ["feature", "index"]) head.appendChild(el("th", {}, h));
    // The classes' names (or indices), as text.
    for (const c of g.classes) head.appendChild(el("th", { class: "num" }, "class " + c));
    t.appendChild(head);
    const top = [...rows.values()].sort((a, b) => b.top - a.top).slice(0, TOP_WEIGHTS);
    for (const r of top) {
      const tr = el("tr", { "data-index": r.index });
      tr.appendChild(el("td", { class: "feature" }, r.name == null ? "x" + r.index : r.name));
      tr.appendChild(el("td", { class: "num" }, String(r.index)));
      r.w.forEach((w) => tr.appendChild(el("td", { class: "num" }, w === null ? "" : fmt(w))));
      t.appendChild(tr);
    }
  }

  // The late-label store (daemon-wide): what waits for a label and what the labels found.
  function renderLabels(s) {
    labelsLine.hidden = !s;
    if (!s) return;
    const o = s.labels;
    labelsLine.setAttribute("data-waiting", String(s.samples));
    labelsLine.textContent = "late labels: " + s.samples + " of " + s.capacity + " waiting · joined " + o.joined +
      " · expired " + o.expired + " · evicted " + o.evicted + " · unknown " + o.unknown;
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const all = await getJson("/v1/models");
      renderLabels(all.labels);
      const models = all.models;
      for (const m of models) {
        const l = learner(m.learner);
        const lastVersion = l.points.length ? l.points[l.points.length - 1].version : 0;
        // A version below the last point's: the daemon started afresh, so its history did too.
        if (m.version < lastVersion) l.points = [];
        let h;
        do {
          // One page of snapshot.history_page_points at a time, oldest first, until none is left.
          const since = l.points.length ? l.points[l.points.length - 1].version : 0;
          h = await getJson("/v1/history?learner=" + encodeURIComponent(m.learner) + "&since=" + since);
          for (const q of h.points) l.points.push(q);
          if (l.points.length > h.capacity) l.points.splice(0, l.points.length - h.capacity);
        } while (h.more && h.points.length > 0);
        interval = Math.max(100, h.interval_ms);
        l.model = m.version > 0 ? m : null;
        l.entry = m;
        l.now = h.now;
        render(l);
      }
      for (const g of all.multiclass || []) renderMulticlass(g);
      authForm.hidden = true;
      setStatus("updated " + new Date().toLocaleTimeString([], { hour12: false }) + " · every " + interval + " ms");
      document.body.setAttribute("data-ready", "1");
    } catch (e) {
      if (e instanceof AuthNeeded) {
        askToken(e.message);
        return; // asks again once a token is given
      }
      setStatus(String(e.message || e), true);
    }
    timer = setTimeout(refresh, interval);
  }

  refresh();
})();
