// The dashboard: polls the service's API and redraws (no build step, no dependencies).
"use strict";
const PERIOD_MS = 1000;
const colours = {};
function colour(job) {  // the n-th job seen: hues a golden angle apart, never two alike nearby
  if (!(job in colours)) {
    const n = Object.keys(colours).length;
    colours[job] = `hsl(${(n * 137.508) % 360}, 60%, ${n % 2 ? 45 : 60}%)`;
  }
  return colours[job];
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmt(v, digits) { return v === null || v === undefined ? "" : Number(v).toFixed(digits); }

function drawGrid(cluster) {
  const grid = document.getElementById("grid");
  grid.replaceChildren();
  const head = el("tr");
  head.appendChild(el("th", {}, "slot"));
  for (let t = 1; t <= cluster.horizon; t++) head.appendChild(el("th", {}, t % 5 ? "" : String(t)));
  grid.appendChild(head);
  for (const s of cluster.servers) {
    const row = el("tr");
    row.appendChild(el("th", {}, `${s.id} (${s.pool})`));
    s.jobs.forEach((used, i) => {
      const td = el("td");
      // a decided slot shows its containers; a later one the admitted jobs' plans, faded
      const planned = (s.planned || [])[i] || {};
      const ahead = !Object.keys(used).length && Object.keys(planned).length > 0;
      const cell = ahead ? planned : used;
      const ids = Object.keys(cell);
      if (ids.length) {
        const stops = ids.map((id, k) => `${colour(id)} ${100 * k / ids.length}% ${100 * (k + 1) / ids.length}%`);
        td.style.background = `linear-gradient(to bottom, ${stops.join(", ")})`;
        td.title = `slot ${i + 1}${ahead ? " (planned)" : ""}: ` + ids.map(id => `${id} x${cell[id]}`).join(", ");
        td.dataset.jobs = ids.join(" ");
        if (ahead) { td.classList.add("ahead"); td.dataset.planned = ids.join(" "); }
      }
      if (i + 1 === cluster.slot) td.classList.add("now");
      row.appendChild(td);
    });
    grid.appendChild(row);
  }
}

function drawJobs(jobs) {
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  for (const j of jobs) {
    const tr = el("tr", {"data-job": j.id});
    const name = el("td");
    name.appendChild(el("span", {class: "swatch", style: `background:${colour(j.id)}`}));
    name.appendChild(document.createTextNode(j.id));
    tr.appendChild(name);
    const acc = j.real ? j.real.val_accuracy : null;
    for (const v of [j.state, j.arrival, `${j.now.workers} / ${j.now.ps}`,
                     `${fmt(100 * j.progress, 0)} %`, j.predicted_completion ?? "",
                     j.completion ?? "", fmt(j.utility, 2), fmt(acc, 3)])
      tr.appendChild(el("td", {}, String(v)));
    body.appendChild(tr);
  }
}

function drawChart(svg, summary, series, title) {
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const W = 320, H = 180, L = 44, B = 18, TOP = 22;
  const h = summary.history;
  const top = Math.max(1e-9, ...h.flatMap(p => series.map(([k]) => p[k])));
  const x = t => L + (W - L - 8) * (t / Math.max(1, summary.horizon));
  const y = v => H - B - (H - B - TOP) * (v / top);
  const text = (tx, ty, s, fill, anchor) => {
    const e = document.createElementNS(ns, "text");
    e.setAttribute("x", tx); e.setAttribute("y", ty); e.setAttribute("fill", fill || "#333");
    if (anchor) e.setAttribute("text-anchor", anchor);
    e.textContent = s; svg.appendChild(e);
  };
  const axes = document.createElementNS(ns, "polyline");
  axes.setAttribute("points", `${L},${TOP} ${L},${H - B} ${W - 8},${H - B}`);
  axes.setAttribute("fill", "none"); axes.setAttribute("stroke", "#999");
  svg.appendChild(axes);
  text(L - 4, y(top) + 4, fmt(top, top < 10 ? 1 : 0), "#333", "end");
  text(L - 4, H - B + 4, "0", "#333", "end");
  text(W - 8, H - 4, `slot ${summary.horizon}`, "#333", "end");
  text(L, 12, title);
  series.forEach(([key, c], n) => {
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", h.map(p => `${x(p.slot)},${y(p[key])}`).join(" "));
    line.setAttribute("fill", "none"); line.setAttribute("stroke", c); line.setAttribute("stroke-width", "2");
    svg.appendChild(line);
    if (series.length > 1) text(W - 8 - 70 * (series.length - 1 - n), 12, key, c, "end");
  });
}

function drawHistory(summary) {
  drawChart(document.getElementById("counts"), summary,
            [["admitted", "#2e8b57"], ["rejected", "#c0392b"]], "jobs");
  drawChart(document.getElementById("utility"), summary, [["utility", "#2c5d8f"]],
            "total utility of completed jobs");
}

function runnerLine(health) {  // what the slot runner is doing, from /health
  if (health.status === "starting") return "starting (Ray and its workers)";
  if (health.status === "failed") return `failed: ${health.error}`;
  if (health.slot_running !== null && health.slot_running !== undefined)
    return `slot ${health.slot_running} running for ${fmt(health.slot_running_s, 0)} s`;
  return health.status;
}

async function poll() {
  try {
    const [cluster, jobs, summary, health] = await Promise.all(
      ["cluster", "jobs", "summary", "health"].map(p => fetch(p).then(r => r.json())));
    document.getElementById("status").textContent =
      `policy ${cluster.policy}, slot ${summary.slot} of ${summary.horizon} done; ${runnerLine(health)}; ` +
      `${summary.jobs} jobs: ${summary.running} running, ${summary.scheduled} scheduled later, ` +
      `${summary.admitted} admitted, ${summary.rejected} rejected, ${summary.completed} completed; ` +
      `utility ${fmt(summary.utility, 2)}`;
    drawGrid(cluster); drawJobs(jobs); drawHistory(summary);
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach the service: ${e}`;
  }
  setTimeout(poll, PERIOD_MS);
}
poll();
