#include "cohort/monitor/dashboard_page.h"

namespace cohort::monitor {
namespace {

// Every number the page shows sits in an element with data-field (and data-rank for a rank's
// row, data-run for a past run's) and its exact value in data-value, and every chart's canvas
// says how many points it draws (data-points), so that a test can read the page back.
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
#runs tr{cursor:pointer} #runs tr.sel td{background:#e8f0fd;font-weight:600} #runs td:first-child{white-space:nowrap}
.scroll{overflow-x:auto} label.sub{float:right;font-weight:normal}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 6px 0 4px}
#compare{grid-template-columns:1fr 1fr 1fr;margin-bottom:12px}
</style></head><body>
<div id="runs-panel" class="panel" style="display:none;margin-bottom:12px">
<h2>Runs <span class="sub">(click a run to show it below; untick it to leave it out of the charts)</span></h2>
<div class="scroll"><table><thead id="runs-head"></thead><tbody id="runs"></tbody></table></div><div id="warnings" class="note"></div></div>
<div id="compare" class="grid" style="display:none">
<div class="panel"><h2>Loss (rank 0) by step, every run <label class="sub"><input type="checkbox" id="logy"> log scale</label></h2><canvas id="c-cmp-loss"></canvas></div>
<div class="panel"><h2>Evaluation accuracy by step, every run</h2><canvas id="c-cmp-acc"></canvas></div>
<div class="panel"><h2>Samples/s (job) by step, every run</h2><canvas id="c-cmp-tput"></canvas></div>
</div>
<h1>cohort <span id="run-name"></span><span id="model"></span></h1>
<div class="sub">state <b data-field="state" id="state">connecting</b> · <span data-field="workers" id="workers"></span> workers ·
step <span id="step"></span> · <span id="elapsed"></span> s · <span id="mode">updated every second</span></div>
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
  if (typeof v === 'string') return v;
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (Math.abs(v) >= 1e9) return (v / 1e9).toFixed(2) + ' G';
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(2) + ' M';
  return Number(v).toFixed(d);
}
function put(el, v, d) { el.dataset.value = v === null || v === undefined ? '' : String(v); el.textContent = fmt(v, d); }
function field(name) { return document.querySelector('[data-field="' + name + '"]:not([data-rank]):not([data-run])'); }
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
  st.textContent = r.finished ? 'finished' : (r.straggler ? 'STRAGGLER' : (runs ? 'no summary' : 'running'));
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
  markPoints(charts);
}
// How many points each chart draws, per dataset (data-points="12,3"), for tests to read back.
function markPoints(cs) {
  for (const c of Object.values(cs)) c.canvas.dataset.points = c.data.datasets.map(d => d.data.length).join(',');
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
// Past runs (`cohort dashboard RUN_DIR...`): /api/state lists runs instead of one job's state.
// The runs table and the charts above overlay them; the page below shows the selected one.
const RUN_COLORS = ['#2c7be5', '#e67e22', '#27ae60', '#c0392b', '#8e44ad', '#16a085', '#7f8c8d', '#d4ac0d'];
const cmp = {}, shown = new Set();
let runs = null, selected = 0;
const color = i => RUN_COLORS[i % RUN_COLORS.length];
const lastOf = a => a.length ? a[a.length - 1] : undefined;
function runFigures(r) {
  const s = r.state, ev = s.evals.filter(e => e.accuracy !== undefined), l = lastOf(s.loss);
  const r0 = s.ranks.find(x => x.rank === 0) || {};
  // A finished run's own figures where its summary has them (samples/s over the whole run, as
  // `cohort report` shows); the last step record's otherwise.
  const sum = s.summary || {};
  return [['state', s.state], ['model', s.model], ['strategy', r.strategy || ''], ['workers', s.workers, 0],
    ['step', r0.step || sum.steps || 0, 0], ['loss', l ? l[1] : null, 4],
    ['accuracy', ev.length ? lastOf(ev).accuracy : sum.eval_accuracy, 4],
    ['samples_per_s', sum.samples_per_s ?? s.samples_per_s, 1], ['energy_j', sum.job_energy_j ?? s.energy_j, 1], ['elapsed_s', s.elapsed_s, 1]];
}
function runRow(r, i, keys) {
  const tr = document.createElement('tr'); tr.dataset.run = i;
  if (i === selected) tr.className = 'sel';
  const name = document.createElement('td'); name.dataset.run = i; name.dataset.field = 'name'; name.dataset.value = r.name;
  const box = document.createElement('input'); box.type = 'checkbox'; box.checked = shown.has(i);
  box.onclick = e => { e.stopPropagation(); box.checked ? shown.add(i) : shown.delete(i); drawCompare(); };
  const sw = document.createElement('span'); sw.className = 'swatch'; sw.style.background = color(i);
  name.append(box, sw, r.name); name.title = r.dir; tr.appendChild(name);
  for (const [k, v, d] of runFigures(r)) {
    const td = document.createElement('td'); td.dataset.run = i; td.dataset.field = k; put(td, v, d); tr.appendChild(td);
  }
  for (const k of keys) { const td = document.createElement('td'); td.textContent = (r.config || {})[k] ?? '(unset)'; tr.appendChild(td); }
  tr.onclick = () => select(i);
  return tr;
}
function runsTable() {
  const keys = [...new Set(runs.flatMap(r => Object.keys(r.config || {})))].sort();
  const head = document.createElement('tr');
  for (const h of ['run', 'state', 'model', 'strategy', 'workers', 'step', 'loss', 'eval accuracy', 'samples/s (job)', 'energy J', 'seconds', ...keys]) {
    const th = document.createElement('th'); th.textContent = h; head.appendChild(th);
  }
  document.getElementById('runs-head').replaceChildren(head);
  document.getElementById('runs').replaceChildren(...runs.map((r, i) => runRow(r, i, keys)));
  document.getElementById('warnings').replaceChildren(...runs.flatMap(r => (r.warnings || []).map(w => {
    const d = document.createElement('div'); d.textContent = r.name + ': ' + w; return d; })));
}
const SERIES = {loss: s => s.loss.map(([x, y]) => ({x, y})),
  acc: s => s.evals.filter(e => e.accuracy !== undefined).map(e => ({x: e.step, y: e.accuracy})),
  tput: s => s.step_throughput.map(([x, y]) => ({x, y}))};
function makeCompare() {
  if (!window.Chart) return;
  for (const [k, y] of [['loss', 'loss'], ['acc', 'accuracy'], ['tput', 'samples/s']])
    cmp[k] = new Chart(document.getElementById('c-cmp-' + k), {type: 'line', data: {datasets: []},
      options: {animation: false, responsive: true, maintainAspectRatio: false, scales: {
        x: {type: 'linear', title: {display: true, text: 'step'}}, y: {title: {display: true, text: y}}}}});
}
// A diverged run's loss dwarfs the others': a log scale shows them all, as TensorBoard's toggle.
document.getElementById('logy').onchange = e => {
  if (!cmp.loss) return;
  cmp.loss.options.scales.y.type = e.target.checked ? 'logarithmic' : 'linear';
  cmp.loss.update('none');
};
function drawCompare() {
  for (const [k, series] of Object.entries(SERIES)) {
    if (!cmp[k]) continue;
    cmp[k].data.datasets = runs.flatMap((r, i) => shown.has(i) ? [{label: r.name, data: series(r.state),
      borderColor: color(i), backgroundColor: color(i), pointRadius: k === 'acc' ? 3 : 0}] : []);
    cmp[k].update('none');
  }
  markPoints(cmp);
}
function select(i) {
  selected = i;
  history.replaceState(null, '', '#run=' + encodeURIComponent(runs[i].name));
  runsTable();
  document.getElementById('run-name').textContent = '· ' + runs[i].name + ' ';
  document.getElementById('mode').textContent = 'read from ' + runs[i].dir;
  render(runs[i].state);
}
function renderRuns(st) {
  clearInterval(timer);  // a past run does not change: no polling
  if (runs) return;      // a second answer already in flight when polling stopped
  runs = st.runs;
  document.title = 'cohort dashboard: ' + runs.map(r => r.name).join(', ');
  document.getElementById('runs-panel').style.display = 'block';
  if (runs.length > 1) document.getElementById('compare').style.display = 'grid';
  const want = decodeURIComponent((location.hash.match(/run=([^&]*)/) || [])[1] || '');
  selected = Math.max(0, runs.findIndex(r => r.name === want));
  runs.forEach((r, i) => shown.add(i));
  if (runs.length > 1) { makeCompare(); drawCompare(); }
  select(selected);
}
async function tick() {
  try {
    const r = await fetch('/api/state' + q, {cache: 'no-store'});
    if (!r.ok) return;
    const s = await r.json();
    s.mode === 'runs' ? renderRuns(s) : render(s);
  } catch (e) { field('state').textContent = 'disconnected (job over?)'; }
}
const sc = document.createElement('script'); sc.src = '/chart.js' + q;
sc.onload = () => { makeCharts(); tick(); }; sc.onerror = () => { makeCharts(); tick(); };
document.head.appendChild(sc);
const timer = setInterval(tick, 1000);
</script></body></html>
)HTML";

}  // namespace

const std::string& dashboard_page() {
  static const std::string page = kPage;
  return page;
}

}  // namespace cohort::monitor
