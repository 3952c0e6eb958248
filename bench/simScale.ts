/**
 * `npm run bench:sim -- --scale [--duration S] [--factors 1,4,16]`: the seed workload scaled up,
 * replicas and rate together (22 replicas at 40 req/s times each factor), one child process per
 * fleet so that each peak RSS is its own. Prints per fleet: wall time, real-time factor, the
 * wall time and the work (engine steps, events, requests) as ratios of the smallest fleet's,
 * CPU time per engine step and per event (CPU time, not wall: the machine may be shared), and peak RSS, in total and per replica (less the
 * empty process's). "Linear in work" reads as wall ratio / steps ratio staying near 1.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface ScaleRow {
  factor: number;
  replicas: number;
  ratePerS: number;
  wallMs: number;
  /** User + system CPU time of the run: the figure to compare on a busy machine. */
  cpuMs: number;
  setupMs: number;
  simulatedS: number;
  engineSteps: number;
  events: number;
  requests: number;
  peakRssMb: number;
  baseRssMb: number;
}

const SELF = fileURLToPath(new URL('./sim.ts', import.meta.url));

/** One fleet in a child process (`bench/sim.ts --scale-one F`); its row, parsed. */
function runChild(factor: number, durationS: number): ScaleRow {
  const out = spawnSync(
    process.execPath,
    ['--import', 'tsx', SELF, '--scale-one', String(factor), '--duration', String(durationS)],
    { encoding: 'utf8', maxBuffer: 1 << 20 },
  );
  if (out.status !== 0) throw new Error(`fleet x${factor} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.trim().split('\n').at(-1)!) as ScaleRow;
}

export function runScale(factors: number[], durationS: number, json: boolean): void {
  const rows: ScaleRow[] = [];
  for (const f of factors) {
    const row = runChild(f, durationS);
    rows.push(row);
    process.stderr.write(`x${f}: ${row.replicas} replicas, ${Math.round(row.wallMs)} ms\n`);
  }
  const base = rows[0]!;
  const table = rows.map((r) => ({
    replicas: r.replicas,
    ratePerS: r.ratePerS,
    wallS: round(r.wallMs / 1000, 2),
    setupS: round(r.setupMs / 1000, 2),
    realTime: round((r.simulatedS * 1000) / r.wallMs, 1),
    cpuS: round(r.cpuMs / 1000, 2),
    wallRatio: round(r.wallMs / base.wallMs, 2),
    cpuRatio: round(r.cpuMs / base.cpuMs, 2),
    stepsRatio: round(r.engineSteps / base.engineSteps, 2),
    requestsRatio: round(r.requests / base.requests, 2),
    cpuUsPerStep: round((r.cpuMs * 1000) / r.engineSteps, 2),
    cpuUsPerEvent: round((r.cpuMs * 1000) / r.events, 2),
    peakRssMb: Math.round(r.peakRssMb),
    mbPerReplica: round((r.peakRssMb - r.baseRssMb) / r.replicas, 2),
  }));
  if (json) {
    process.stdout.write(`${JSON.stringify({ simulatedS: durationS, fleets: table })}\n`);
    return;
  }
  process.stdout.write(`seed workload scaled, ${durationS} simulated s per fleet\n`);
  const cols = Object.keys(table[0]!) as (keyof (typeof table)[0])[];
  const width = (c: string) => Math.max(c.length, 6) + 1;
  process.stdout.write(`${cols.map((c) => c.padStart(width(c))).join('')}\n`);
  for (const row of table) {
    process.stdout.write(`${cols.map((c) => String(row[c]).padStart(width(c))).join('')}\n`);
  }
}

function round(x: number, digits: number): number {
  const k = 10 ** digits;
  return Math.round(x * k) / k;
}
