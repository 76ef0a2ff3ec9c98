// The dashboard: polls the service's API and redraws (no build step, no dependencies).
"use strict";
const PERIOD_MS = 1000;
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                 "#ff9da7", "#9c755f", "#bab0ac"];
const colours = {};
function colour(job) {
  if (!(job in colours)) colours[job] = PALETTE[Object.keys(colours).length % PALETTE.length];
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
    s.jobs.forEach((cell, i) => {
      const td = el("td");
      const ids = Object.keys(cell);
      if (ids.length) {
        const stops = ids.map((id, k) => `${colour(id)} ${100 * k / ids.length}% ${100 * (k + 1) / ids.length}%`);
        td.style.background = `linear-gradient(to bottom, ${stops.join(", ")})`;
        td.title = `slot ${i + 1}: ` + ids.map(id => `${id} x${cell[id]}`).join(", ");
        td.dataset.jobs = ids.join(" ");
      }
      if (i + 1 === cluster.slot) td.className = "now";
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

function drawHistory(summary) {
  const svg = document.getElementById("history");
  svg.replaceChildren();
  const ns = "http://www.w3.org/2000/svg";
  const W = 640, H = 200, L = 40, B = 20;
  const h = summary.history;
  const series = [["admitted", "#59a14f"], ["rejected", "#e15759"], ["utility", "#4e79a7"]];
  const top = Math.max(1, ...h.flatMap(p => series.map(([k]) => p[k])));
  const x = t => L + (W - L - 10) * (t / Math.max(1, summary.horizon));
  const y = v => H - B - (H - B - 10) * (v / top);
  series.forEach(([key, c], n) => {
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", h.map(p => `${x(p.slot)},${y(p[key])}`).join(" "));
    line.setAttribute("fill", "none"); line.setAttribute("stroke", c); line.setAttribute("stroke-width", "2");
    svg.appendChild(line);
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", L + 10 + 90 * n); label.setAttribute("y", 12); label.setAttribute("fill", c);
    label.textContent = key; svg.appendChild(label);
  });
  const axis = document.createElementNS(ns, "text");
  axis.setAttribute("x", 0); axis.setAttribute("y", 12); axis.textContent = String(fmt(top, 1));
  svg.appendChild(axis);
}

async function poll() {
  try {
    const [cluster, jobs, summary] = await Promise.all(
      ["cluster", "jobs", "summary"].map(p => fetch(p).then(r => r.json())));
    document.getElementById("status").textContent =
      `policy ${cluster.policy}, slot ${summary.slot} of ${summary.horizon}; ${summary.jobs} jobs: ` +
      `${summary.admitted} admitted, ${summary.rejected} rejected, ${summary.completed} completed; ` +
      `utility ${fmt(summary.utility, 2)}`;
    drawGrid(cluster); drawJobs(jobs); drawHistory(summary);
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach the service: ${e}`;
  }
  setTimeout(poll, PERIOD_MS);
}
poll();
