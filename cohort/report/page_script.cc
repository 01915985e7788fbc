// The report page's script: reads the cohort-data block and draws it with Chart.js 3. It
// computes nothing: every number comes from figures.cc, so what the page shows is what the
// tests check. Layout "overlay" puts every run in one chart; "compare" gives each run its own
// panel, side by side, with the same axes.
#include "cohort/report/html.h"

namespace cohort::report {

const char* page_script() {
  return R"JS(
const D = JSON.parse(document.getElementById('cohort-data').textContent);
const COMPARE = D.layout === 'compare';
const RUN_COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b'];
const PHASES = [['data_ms', 'data', '#8c8c8c'], ['forward_ms', 'forward', '#1f77b4'],
  ['backward_compute_ms', 'backward (compute)', '#2ca02c'], ['optimizer_ms', 'optimizer', '#9467bd'],
  ['exposed_comm_ms', 'exposed communication', '#d62728']];
const NR = 'not recorded';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmt(v, digits) {
  if (v === null || v === undefined) return NR;
  return Number(v).toFixed(digits === undefined ? 2 : digits);
}
function pct(v) { return v === null || v === undefined ? NR : (100 * v).toFixed(1) + '%'; }
function color(i) { return RUN_COLORS[i % RUN_COLORS.length]; }
function pts(xs, ys) {
  return xs.map((x, i) => ({x: x, y: ys[i]})).filter(p => p.x !== null && p.y !== null);
}
function table(parent, head, rows) {
  const t = el('table'), tr = el('tr');
  head.forEach(h => tr.appendChild(el('th', null, h)));
  t.appendChild(tr);
  rows.forEach(r => {
    const row = el('tr');
    r.forEach(c => row.appendChild(el('td', null, String(c))));
    t.appendChild(row);
  });
  parent.appendChild(t);
}
// A grid row of panels: one per run when comparing, else a single one.
function figureRow(parent, n) {
  const row = el('div', n > 1 ? 'row' : 'row single');
  row.style.setProperty('--cols', n);
  parent.appendChild(row);
  return row;
}
function panel(row, title) {
  const p = el('div', 'panel');
  p.appendChild(el('h3', null, title));
  const c = el('canvas');
  p.appendChild(c);
  row.appendChild(p);
  return c;
}
function bounds(sets) {
  const b = {xmin: Infinity, xmax: -Infinity, ymin: Infinity, ymax: -Infinity};
  sets.flat().forEach(s => s.data.forEach(p => {
    b.xmin = Math.min(b.xmin, p.x); b.xmax = Math.max(b.xmax, p.x);
    b.ymin = Math.min(b.ymin, p.y); b.ymax = Math.max(b.ymax, p.y);
  }));
  return b;
}
function lineChart(canvas, datasets, xLabel, yLabel, b) {
  new Chart(canvas, {type: 'line', data: {datasets: datasets}, options: {
    animation: false, responsive: true, maintainAspectRatio: false,
    // Suggested (not fixed) bounds: each panel covers every run's range and still gets round ticks.
    scales: {x: {type: 'linear', suggestedMin: b && b.xmin, suggestedMax: b && b.xmax,
                 title: {display: true, text: xLabel}},
             y: {suggestedMin: b && b.ymin, suggestedMax: b && b.ymax,
                 title: {display: true, text: yLabel}}}}});
}
// seriesOf(run) -> [{label, x[], y[], dash, points}]; null values are left out.
function lineFigure(parent, title, xLabel, yLabel, seriesOf) {
  const sets = D.runs.map((r, i) => seriesOf(r).map(s => ({
    label: COMPARE ? s.label || r.name : r.name + (s.label ? ' ' + s.label : ''),
    data: pts(s.x, s.y), borderColor: color(i), backgroundColor: color(i),
    borderDash: s.dash || [], pointRadius: s.points ? 3 : 0, borderWidth: 1.5})));
  if (sets.flat().every(s => s.data.length === 0)) {
    parent.appendChild(el('p', 'note', title + ': ' + NR));
    return;
  }
  if (!COMPARE) return lineChart(panel(figureRow(parent, 1), title), sets.flat(), xLabel, yLabel);
  const row = figureRow(parent, D.runs.length), b = bounds(sets);
  D.runs.forEach((r, i) => lineChart(panel(row, title + ': ' + r.name), sets[i], xLabel, yLabel, b));
}
)JS"
         R"JS(
function drawSummary() {
  document.getElementById('runs').textContent = 'Runs: ' + D.runs.map(r => r.dir).join(', ') +
      (D.target_accuracy !== null ? '; target accuracy ' + pct(D.target_accuracy) : '');
  const w = document.getElementById('warnings');
  D.runs.forEach(r => r.warnings.forEach(m => w.appendChild(el('p', 'warn', 'warning: ' + m))));
  D.scaling.warnings.forEach(m => w.appendChild(el('p', 'warn', 'warning: ' + m)));
  table(document.getElementById('summary'),
        ['run', 'workers', 'strategy', 'steps', 'final accuracy', 'final loss', 'wall time (s)',
         'train time (s)', 'samples/s', 'time to target (s)'],
        D.runs.map(r => { const s = r.summary; return [
          r.name + (s.running ? ' (running)' : ''),
          s.membership_changes ? s.workers + ' \u2192 ' + s.workers_at_end + ' (' +
              s.membership_changes + ' membership change' +
              (s.membership_changes > 1 ? 's' : '') + ')' : s.workers,
          s.strategy || 'unknown',
          s.steps === null ? NR : s.steps, pct(s.final_accuracy), fmt(s.final_loss, 4),
          fmt(s.wall_seconds, 1), fmt(s.train_seconds, 1), fmt(s.samples_per_s, 0),
          D.target_accuracy === null ? 'no target given' : fmt(s.time_to_target_s, 1)]; }));
}
// The keys whose values differ between the runs' recorded configs (config_diff.h).
function drawConfig() {
  const p = document.getElementById('config'), c = D.config_diff;
  if (c.runs.length < 2) {
    p.appendChild(el('p', null, 'One run: its configuration is in ' + D.runs[0].name +
                                '/config.toml.'));
  } else if (c.rows.length === 0) {
    p.appendChild(el('p', null, 'The runs\' configurations are the same.'));
  } else {
    table(p, ['key'].concat(c.runs), c.rows.map(r => [r.key].concat(r.values)));
  }
  c.without_config.forEach(n => p.appendChild(el('p', 'warn', n + ' has no readable config.toml')));
}
function drawCurves() {
  const p = document.getElementById('curves');
  lineFigure(p, 'Training loss (rank 0)', 'step', 'loss', r => [{x: r.loss.step, y: r.loss.loss}]);
  lineFigure(p, 'Evaluation loss', 'step', 'loss',
             r => [{x: r.eval.step, y: r.eval.loss, points: true}]);
  lineFigure(p, 'Evaluation accuracy vs step', 'step', 'accuracy',
             r => [{x: r.eval.step, y: r.eval.accuracy, points: true}]);
  lineFigure(p, 'Evaluation accuracy vs training time', 'training time (s)', 'accuracy',
             r => [{x: r.eval.train_s, y: r.eval.accuracy, points: true}]);
}
function drawThroughput() {
  lineFigure(document.getElementById('speed'), 'Samples/s (all ranks)',
             'step', 'samples/s', r => [{x: r.throughput.step, y: r.throughput.samples_per_s}]);
}
function drawBreakdown() {
  const parent = document.getElementById('speed');
  parent.appendChild(el('p', 'note', 'Bars: mean ms per step of each rank; backward (compute) ' +
      'is backward less the exposed communication, so a bar\'s height is the step time. ' +
      'Samples/s: the sum over ranks of each rank\'s running mean.'));
  const groups = COMPARE ? D.runs.map(r => [r]) : [D.runs];
  const ymax = Math.max(0, ...D.runs.flatMap(r => r.breakdown.map(b => b.step_ms)));
  const row = figureRow(parent, groups.length);
  groups.forEach(g => {
    const bars = g.flatMap(r => r.breakdown.map(b => [(COMPARE ? '' : r.name + ' ') + 'rank ' + b.rank, b]));
    const datasets = PHASES.map(ph => ({label: ph[1], backgroundColor: ph[2],
                                        data: bars.map(x => x[1][ph[0]])}));
    new Chart(panel(row, 'Step breakdown' + (COMPARE ? ': ' + g[0].name : '')), {type: 'bar',
      data: {labels: bars.map(x => x[0]), datasets: datasets},
      options: {animation: false, responsive: true, maintainAspectRatio: false,
                scales: {x: {stacked: true}, y: {stacked: true, max: COMPARE ? ymax : undefined,
                                                  title: {display: true, text: 'ms per step'}}}}});
  });
}
)JS"
         R"JS(
function drawScaling() {
  const parent = document.getElementById('scaling');
  parent.appendChild(el('p', 'note', 'Efficiency = samples/s(N) / (N x samples/s of the ' +
      '1-worker run of the same model, with the same threads per worker where there is one). ' +
      'Per core = (samples/s / cores) / (the same of the 1-worker run), cores = workers x ' +
      'threads. 100% is perfect linear scaling.'));
  D.scaling.warnings.forEach(m => parent.appendChild(el('p', 'warn', 'warning: ' + m)));
  const eff = r => r.efficiency === null ? r.note :
      pct(r.efficiency) + (r.note ? ' (' + r.note + ')' : '');
  table(parent, ['run', 'workers', 'threads per worker', 'cores', 'samples/s', 'against',
                 'scaling efficiency', 'per core'],
        D.scaling.rows.map(r => [r.run, r.workers, r.threads === null ? NR : r.threads,
                                 r.cores === null ? NR : r.cores, fmt(r.samples_per_s, 0),
                                 r.baseline || '-', eff(r),
                                 r.efficiency_per_core === null ? '-' : pct(r.efficiency_per_core)]));
}
function drawComm() {
  const parent = document.getElementById('comm');
  table(parent, ['run', 'step (ms)', 'communication (ms)', 'exposed (ms)', 'hidden share'],
        D.runs.map(r => { const m = r.comm.mean; return [r.name, fmt(m.step_ms), fmt(m.comm_ms),
          fmt(m.exposed_ms), m.hidden_share === null ? 'no communication' : pct(m.hidden_share)]; }));
  // Runs that communicated nothing (1 worker) would only add flat lines at zero.
  lineFigure(parent, 'Per step, rank 0 (dotted: step, solid: communication, dashed: exposed)',
             'step', 'ms', r => r.comm.mean.comm_ms > 0 ? [
               {label: 'step', x: r.comm.step, y: r.comm.step_ms, dash: [2, 3]},
               {label: 'communication', x: r.comm.step, y: r.comm.comm_ms},
               {label: 'exposed', x: r.comm.step, y: r.comm.exposed_ms, dash: [6, 4]}] : []);
  drawServers(parent);
}
function drawServers(parent) {
  const rows = D.runs.flatMap(r => r.servers.map(s => [r.name, s.server, fmt(s.updates_per_s, 1),
    s.pushes === null ? NR : s.pushes, s.dropped_pushes === null ? NR : s.dropped_pushes,
    fmt(s.staleness_mean), s.staleness_max === null ? NR : s.staleness_max,
    fmt(s.bytes_in === null ? null : s.bytes_in / 1e6, 1),
    fmt(s.bytes_out === null ? null : s.bytes_out / 1e6, 1)]));
  if (rows.length === 0) return;
  parent.appendChild(el('p', 'note', 'Parameter servers (metrics.server<i>.jsonl):'));
  table(parent, ['run', 'server', 'updates/s', 'pushes', 'dropped', 'staleness mean',
                 'staleness max', 'MB in', 'MB out'], rows);
}
function source(e) {
  if (!e.recorded) return NR;
  if (e.estimate) return 'estimate (CPU power model)';
  return e.source === 'rapl' ? 'measured (RAPL)' : (e.source || 'unknown');
}
function drawEnergy() {
  const parent = document.getElementById('energy');
  if (D.runs.some(r => r.energy.estimate))
    parent.appendChild(el('p', 'estimate', 'Some figures are estimates from the CPU power ' +
                                            'model, not measurements.'));
  table(parent, ['run', 'energy (J)', 'J per sample', 'communication share', 'source',
                 'J to target accuracy'],
        D.runs.map(r => { const e = r.energy; return [r.name, fmt(e.energy_j, 1),
          e.energy_per_sample_j === null ? NR : Number(e.energy_per_sample_j).toPrecision(3),
          pct(e.comm_share), source(e), e.to_target_j === null ? e.to_target_note : fmt(e.to_target_j, 1)]; }));
  lineFigure(parent, 'Evaluation accuracy vs energy', 'energy (J)', 'accuracy',
             r => [{x: r.eval.energy_j, y: r.eval.accuracy, points: true}]);
}
[drawSummary, drawConfig, drawCurves, drawBreakdown, drawThroughput, drawScaling, drawComm, drawEnergy]
    .forEach(f => f());
)JS";
}

}  // namespace cohort::report
