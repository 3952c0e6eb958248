/**
 * The calibration report: one self-contained HTML page (inline SVG, as the simulator's report)
 * with, per TP curve, the fitted coefficients, the measured points against the fitted model and
 * the roofline defaults, and the error of each at every point.
 */
import type { CostProfile, ProfileCurve, ProfilePoint } from '../model/calibration.ts';
import { lineChart, type Series } from '../results/lineChart.ts';
import { htmlPage } from '../results/report.ts';
import { escapeHtml } from '../results/svg.ts';

const ms = (v: number): string => v.toLocaleString('en-US', { maximumFractionDigits: 2 });
const pct = (v: number): string => `${v >= 0 ? '+' : ''}${v.toFixed(1)} %`;

export function renderCalibrationReport(profile: CostProfile, command: string): string {
  const sections = [
    `<p>Source: ${escapeHtml(profile.source)}<br>Method: ${escapeHtml(profile.method)}<br>` +
      `Measured on: ${escapeHtml(`${profile.measuredOn.model}, ${profile.measuredOn.gpu}, ${profile.measuredOn.weightsDtype} weights`)}</p>`,
    coefficientTable(profile.curves),
    ...profile.curves.flatMap((c) => curveSections(c)),
  ];
  return htmlPage({ title: 'kvroute calibrate', command }, sections);
}

function coefficientTable(curves: ProfileCurve[]): string {
  const head = [
    'TP',
    'MFU max',
    'half tokens',
    'MBU',
    'overhead ms',
    'request ms',
    'fit',
    'max err',
    'roofline max err',
  ];
  const rows = curves.map((c) =>
    [
      String(c.tp),
      c.mfuMax.toFixed(3),
      c.halfTokens.toFixed(1),
      c.mbu.toFixed(3),
      ms(c.overheadMs),
      ms(c.requestOverheadMs),
      `${c.objective}${c.fixed.length > 0 ? ` (held at 0: ${c.fixed.join(', ')})` : ''}`,
      `${c.maxErrorPct.toFixed(1)} %`,
      `${c.rooflineMaxErrorPct.toFixed(1)} %`,
    ]
      .map((v) => `<td>${escapeHtml(v)}</td>`)
      .join(''),
  );
  return table(head, rows);
}

const table = (head: string[], rows: string[]): string =>
  `<table><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr>${rows.map((r) => `<tr>${r}</tr>`).join('')}</table>`;

/** Measured dots, and the fitted and roofline predictions at the same points as lines. */
function series(points: ProfilePoint[], x: (p: ProfilePoint) => number): Series[] {
  const sorted = [...points].sort((a, b) => x(a) - x(b));
  return [
    { name: 'measured', points: sorted.map((p) => [x(p), p.measuredMs]), dots: true },
    { name: 'calibrated', points: sorted.map((p) => [x(p), p.fittedMs]) },
    { name: 'roofline defaults', points: sorted.map((p) => [x(p), p.rooflineMs]) },
  ];
}

function curveSections(c: ProfileCurve): string[] {
  const prefill = c.points.filter((p) => p.kind !== 'itl');
  const decode = c.points.filter((p) => p.kind === 'itl' || p.label.startsWith('decode'));
  const out: string[] = [];
  const steps = prefill.filter((p) => !p.label.startsWith('decode'));
  if (steps.length > 0) {
    out.push(
      lineChart(
        `TP=${c.tp}: prefill time by tokens`,
        series(steps, (p) => p.totalTokens),
        {
          xLabel:
            steps[0]!.kind === 'ttft' ? 'prompt tokens (log scale)' : 'tokens per step (log scale)',
          yLabel: steps[0]!.kind === 'ttft' ? 'time to first token (ms)' : 'step time (ms)',
          logX: true,
        },
      ),
    );
  }
  if (decode.length > 0) {
    out.push(
      lineChart(
        `TP=${c.tp}: decode step by KV read`,
        series(decode, (p) => p.kvTokensRead / 1000),
        { xLabel: 'KV tokens read per step (thousands)', yLabel: 'step time (ms)' },
      ),
    );
  }
  const head = ['point', 'measured ms', 'calibrated ms', 'error', 'roofline ms', 'roofline error'];
  const rows = c.points.map((p) =>
    [
      p.label,
      ms(p.measuredMs),
      ms(p.fittedMs),
      pct(p.errorPct),
      ms(p.rooflineMs),
      pct(p.rooflineErrorPct),
    ]
      .map((v, i) => `<td${i === 0 ? ' style="text-align:left"' : ''}>${escapeHtml(v)}</td>`)
      .join(''),
  );
  out.push(`<h3>TP=${c.tp}: every point</h3>`, table(head, rows));
  return out;
}
