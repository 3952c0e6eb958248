/**
 * `kvroute sim --max-queue-ms / --max-ttft-ms`: each policy with and without the bounds, goodput
 * side by side.
 */
import { grid, n0, n1, pct } from '../util/textTable.ts';
import type { SimulatedRun } from './result.ts';

export function formatAdmission(results: readonly SimulatedRun[]): string {
  const ttft = results.some((r) => r.admission?.maxTtftMs !== undefined);
  const head = [
    'policy',
    'max queue ms',
    ...(ttft ? ['max TTFT ms'] : []),
    'offered/s',
    'rejected',
    'done',
    'errors',
    'TTFT p50',
    'p99 ms',
    'TPOT p99',
    'hit rate',
    'goodput/s',
    'SLO',
  ];
  const rows = results.map((r) => {
    const a = r.admission;
    return [
      r.policy,
      a?.maxQueueMs == null ? 'none' : n0(a.maxQueueMs),
      ...(ttft ? [a?.maxTtftMs == null ? 'none' : n0(a.maxTtftMs)] : []),
      a === undefined ? '–' : n1(a.offeredRps),
      a === undefined ? '–' : n0(a.rejected),
      n0(r.completed),
      n0(r.errors),
      n0(r.ttftMs.p50),
      n0(r.ttftMs.p99),
      n1(r.tpotMs.p99),
      pct(r.hitRate),
      a === undefined ? '–' : n1(a.goodputRps),
      r.sloMet ? 'met' : 'missed',
    ];
  });
  return [
    grid(head, rows),
    'goodput: measured requests meeting the TTFT and TPOT targets per second; latencies and the',
    'SLO are over admitted requests; rejected arrivals got 429 (errors: unfinished at the end and',
    'the like).',
  ].join('\n');
}
