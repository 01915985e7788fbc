#include "cohort/monitor/dashboard_page.h"

namespace cohort::monitor {
namespace {

// Every number the page shows sits in an element with data-field (and data-rank for a rank's
// row) and its exact value in data-value, so that a test can read the page back.
constexpr const char* kPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cohort dashboard</title>
<style>
body{font-family:system-ui,sans-serif;margin:16px;background:#f6f7f9;color:#222}
h1{font-size:20px;margin:0 0 8px} .sub{color:#666;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0}
.card{background:#fff;border-radius:6px;padding:8px 12px;min-width:130px;box-shadow:0 1px 2px #0002}
.card .k{font-size:12px;color:#666} .card .v{font-size:20px;font-weight:600}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.panel{background:#fff;border-radius:6px;padding:8px;box-shadow:0 1px 2px #0002}
.panel h2{font-size:14px;margin:0 0 6px} canvas{max-height:260px}
table{border-collapse:collapse;width:100%;font-size:13px;background:#fff}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:right} th:first-child,td:first-child{text-align:left}
tr.straggler td{background:#fde2e1} #banner{display:none;background:#c0392b;color:#fff;padding:6px 10px;border-radius:6px}
#events{font-size:12px;max-height:160px;overflow:auto} .note{color:#a60;font-size:12px}
</style></head><body>
<h1>cohort <span id="model"></span></h1>
<div class="sub">state <b data-field="state" id="state">connecting</b> · <span data-field="workers" id="workers"></span> workers ·
step <span id="step"></span> · <span id="elapsed"></span> s · updated every second</div>
<div id="banner"></div>
<div class="cards">
<div class="card"><div class="k">samples/s (job)</div><div class="v" data-field="samples_per_s"></div></div>
<div class="card"><div class="k">loss (rank 0)</div><div class="v" data-field="loss"></div></div>
<div class="card"><div class="k">eval accuracy</div><div class="v" data-field="accuracy"></div></div>
<div class="card"><div class="k">bytes sent (all ranks)</div><div class="v" data-field="bytes_sent"></div></div>
<div class="card"><div class="k">energy, J <span id="esrc"></span></div><div class="v" data-field="energy_j"></div></div>
<div class="card"><div class="k">scaling efficiency</div><div class="v" data-field="scaling_efficiency"></div></div>
<div class="card"><div class="k">restarts</div><div class="v" data-field="restarts"></div></div>
</div>
<div id="nochart" class="note" style="display:none">Chart.js is missing (install libjs-chart.js): numbers only.</div>
<div class="grid">
<div class="panel"><h2>Loss (rank 0) and evaluation accuracy</h2><canvas id="c-loss"></canvas></div>
<div class="panel"><h2>Samples/s (job)</h2><canvas id="c-tput"></canvas></div>
<div class="panel"><h2>Step breakdown per rank (ms per step)</h2><canvas id="c-break"></canvas></div>
<div class="panel"><h2>Events</h2><div id="events"></div></div>
</div>
<h2 style="font-size:14px">Ranks</h2>
<table><thead><tr><th>rank</th><th>step</th><th>loss</th><th>samples/s</th><th>data ms</th><th>forward ms</th>
<th>backward ms (with exposed)</th><th>optimizer ms</th><th>exposed comm ms</th><th>bytes sent</th><th>energy J</th><th>status</th></tr></thead>
<tbody id="ranks"></tbody></table>
<script>
const token = new URLSearchParams(location.search).get('token');
const q = token ? '?token=' + encodeURIComponent(token) : '';
const charts = {};
function fmt(v, d) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (Math.abs(v) >= 1e9) return (v / 1e9).toFixed(2) + ' G';
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(2) + ' M';
  return Number(v).toFixed(d);
}
function put(el, v, d) { el.dataset.value = v === null || v === undefined ? '' : String(v); el.textContent = fmt(v, d); }
function field(name) { return document.querySelector('[data-field="' + name + '"]:not([data-rank])'); }
const PHASES = [['data_ms', 'data'], ['forward_ms', 'forward'], ['backward_ms', 'backward compute'],
                ['optimizer_ms', 'optimizer'], ['exposed_comm_ms', 'exposed comm']];
function rankRow(r) {
  const tr = document.createElement('tr');
  if (r.straggler) tr.className = 'straggler';
  const cells = [['rank', r.rank, 0], ['step', r.step, 0], ['loss', r.loss, 4], ['samples_per_s', r.samples_per_s, 1]];
  for (const [k] of PHASES) cells.push([k, r.breakdown[k], 2]);
  cells.push(['bytes_sent', r.bytes_sent, 0], ['energy_j', r.energy_j, 1]);
  for (const [k, v, d] of cells) {
    const td = document.createElement('td'); td.dataset.rank = r.rank; td.dataset.field = k; put(td, v, d); tr.appendChild(td);
  }
  const st = document.createElement('td');
  st.textContent = r.finished ? 'finished' : (r.straggler ? 'STRAGGLER' : 'running');
  tr.appendChild(st);
  return tr;
}
function makeCharts() {
  if (!window.Chart) { document.getElementById('nochart').style.display = 'block'; return; }
  const opts = {animation: false, responsive: true, maintainAspectRatio: false};
  charts.loss = new Chart(document.getElementById('c-loss'), {type: 'line', data: {datasets: [
    {label: 'loss', data: [], yAxisID: 'y', pointRadius: 0, borderColor: '#2c7be5'},
    {label: 'eval accuracy', data: [], yAxisID: 'y1', borderColor: '#27ae60'}]},
    options: {...opts, scales: {x: {type: 'linear', title: {display: true, text: 'step'}},
      y1: {position: 'right', min: 0, max: 1}}}});
  charts.tput = new Chart(document.getElementById('c-tput'), {type: 'line', data: {datasets: [
    {label: 'samples/s', data: [], pointRadius: 0, borderColor: '#8e44ad'}]},
    options: {...opts, scales: {x: {type: 'linear', title: {display: true, text: 'seconds'}}}}});
  const colors = ['#95a5a6', '#2c7be5', '#e67e22', '#27ae60', '#c0392b'];
  charts.brk = new Chart(document.getElementById('c-break'), {type: 'bar', data: {labels: [],
    datasets: PHASES.map(([k, label], i) => ({label, data: [], backgroundColor: colors[i]}))},
    options: {...opts, scales: {x: {stacked: true}, y: {stacked: true}}}});
}
function drawCharts(s) {
  if (!charts.loss) return;
  charts.loss.data.datasets[0].data = s.loss.map(([x, y]) => ({x, y}));
  charts.loss.data.datasets[1].data = s.evals.filter(e => e.accuracy !== undefined).map(e => ({x: e.step, y: e.accuracy}));
  charts.tput.data.datasets[0].data = s.throughput.map(([x, y]) => ({x, y}));
  charts.brk.data.labels = s.ranks.map(r => 'rank ' + r.rank);
  // Backward includes the exposed wait: the bar shows backward's compute and the wait apart.
  const part = (r, k) => k === 'backward_ms' ? r.breakdown.backward_ms - r.breakdown.exposed_comm_ms : r.breakdown[k];
  PHASES.forEach(([k], i) => { charts.brk.data.datasets[i].data = s.ranks.map(r => part(r, k)); });
  for (const c of Object.values(charts)) c.update('none');
}
function render(s) {
  put(field('state'), s.state); field('state').textContent = s.state;
  field('workers').textContent = s.workers;
  document.getElementById('model').textContent = s.model ? '· ' + s.model : '';
  const r0 = s.ranks.find(r => r.rank === 0) || {};
  document.getElementById('step').textContent = (r0.step || 0) + ' / ' + (s.total_steps || '?');
  document.getElementById('elapsed').textContent = s.elapsed_s.toFixed(0);
  put(field('samples_per_s'), s.samples_per_s, 1);
  put(field('loss'), r0.loss, 4);
  const ev = s.evals.filter(e => e.accuracy !== undefined);
  put(field('accuracy'), ev.length ? ev[ev.length - 1].accuracy : null, 4);
  put(field('bytes_sent'), s.bytes_sent, 0);
  put(field('energy_j'), s.energy_j, 1);
  document.getElementById('esrc').textContent = s.energy_source === 'model' ? '(estimate)' : (s.energy_source ? '(' + s.energy_source + ')' : '');
  put(field('scaling_efficiency'), s.scaling_efficiency, 3);
  put(field('restarts'), s.restarts, 0);
  const b = document.getElementById('banner');
  if (s.straggler) { b.style.display = 'block'; b.dataset.rank = s.straggler.rank;
    b.textContent = 'Straggler: rank ' + s.straggler.rank + ' (' + Number(s.straggler.factor).toFixed(2) + 'x the median step) at step ' + s.straggler.step; }
  else b.style.display = 'none';
  const tb = document.getElementById('ranks'); tb.replaceChildren(...s.ranks.map(rankRow));
  document.getElementById('events').replaceChildren(...s.events.slice().reverse().map(e => {
    const d = document.createElement('div'); d.textContent = e.time_s.toFixed(1) + ' s  ' + e.kind + ': ' + e.text; return d; }));
  drawCharts(s);
}
async function tick() {
  try { const r = await fetch('/api/state' + q, {cache: 'no-store'}); if (r.ok) render(await r.json()); }
  catch (e) { field('state').textContent = 'disconnected (job over?)'; }
}
const sc = document.createElement('script'); sc.src = '/chart.js' + q;
sc.onload = () => { makeCharts(); tick(); }; sc.onerror = () => { makeCharts(); tick(); };
document.head.appendChild(sc);
setInterval(tick, 1000);
</script></body></html>
)HTML";

}  // namespace

const std::string& dashboard_page() {
  static const std::string page = kPage;
  return page;
}

}  // namespace cohort::monitor
