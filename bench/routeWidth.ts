/**
 * What one route costs as the fleet widens: the router's per-replica work (a verdict, a view,
 * the policy's score), which a simulated fleet pays once per request, so its total grows with
 * replicas x requests (`bench:sim -- --scale`).
 *
 *   node --import tsx bench/routeWidth.ts [--replicas 22,88,352] [--rounds 7] [--routes 20000]
 *   git archive <commit> src package.json | tar -x -C /tmp/base   # a baseline tree beside
 *   BASELINE_SRC=/tmp/base/src node --import tsx bench/routeWidth.ts
 *
 * Per width: a `cost` router in events mode; each request brings 20 blocks no replica holds
 * (the prefix walk stops at once, so the per-replica work is what is timed), 1,000 requests stay
 * in flight so that queues differ, and every replica reports each 50 routes. Prints, per tree
 * and width, the median over rounds of CPU µs per route (route, first token and finish of the
 * request 1,000 back, and the reports) and that per replica; with a baseline, rounds alternate
 * and the median of the per-round ratios (this tree / baseline) is printed too.
 */
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { baselineSrc } from './baselineSrc.ts';

const argv = process.argv;
const option = (name: string, fallback: string): string => {
  const at = argv.indexOf(`--${name}`);
  return at < 0 ? fallback : argv[at + 1]!;
};
const WIDTHS = option('replicas', '22,88,352').split(',').map(Number);
const ROUNDS = Number(option('rounds', '7'));
const ROUTES = Number(option('routes', '20000'));
const IN_FLIGHT = 1_000;
const REPORT_EVERY = 50;
const BLOCKS = 20;
const BLOCK_SIZE = 16;

if (![...WIDTHS, ROUNDS, ROUTES].every((n) => Number.isInteger(n) && n > 0)) {
  console.error('--replicas (a list), --rounds and --routes take positive integers');
  process.exit(2);
}

interface RouterLike {
  onReport(replica: string, report: object, nowMs: number): void;
  route(request: object, nowMs: number): unknown;
  onFirstToken(id: string, nowMs: number): boolean;
  onFinished(id: string, nowMs: number): boolean;
}
type RouterClass = new (options: object) => RouterLike;

async function load(src: string): Promise<RouterClass> {
  return (await import(resolve(src, 'router/index.ts'))).Router;
}

/** CPU µs per route over ROUTES routes at `width` replicas. */
function timeRoutes(Router: RouterClass, width: number): number {
  const names = Array.from({ length: width }, (_, i) => `replica-${i}`);
  const router = new Router({ replicas: names, policy: 'cost', indexMode: 'events', seed: 1 });
  const report = { kvUsage: 0.5, running: 8, waiting: 0, queuedPromptTokens: 0 };
  let key = 1;
  const end = (i: number, nowMs: number) => {
    router.onFirstToken(`q${i}`, nowMs);
    router.onFinished(`q${i}`, nowMs);
  };
  const start = process.cpuUsage();
  let nowMs = 0;
  for (let i = 0; i < ROUTES; i++) {
    nowMs += 1;
    if (i % REPORT_EVERY === 0) for (const name of names) router.onReport(name, report, nowMs);
    const blockKeys: number[] = [];
    for (let b = 0; b < BLOCKS; b++) blockKeys.push(key++ * 7919);
    router.route(
      { id: `q${i}`, blockKeys, promptTokens: BLOCKS * BLOCK_SIZE, blockSize: BLOCK_SIZE },
      nowMs,
    );
    if (i >= IN_FLIGHT) end(i - IN_FLIGHT, nowMs);
  }
  const used = process.cpuUsage(start);
  for (let i = Math.max(0, ROUTES - IN_FLIGHT); i < ROUTES; i++) end(i, nowMs);
  return (used.user + used.system) / ROUTES;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

const trees: [string, RouterClass][] = [
  ['current', await load(resolve(import.meta.dirname, '../src'))],
];
const baseline = baselineSrc(false);
if (baseline !== undefined) trees.unshift(['baseline', await load(baseline)]);

const rows: Record<string, string | number>[] = [];
for (const width of WIDTHS) {
  const samples = new Map<string, number[]>(trees.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, Router] of trees) samples.get(name)!.push(timeRoutes(Router, width));
  }
  for (const [name] of trees) {
    const us = median(samples.get(name)!);
    rows.push({
      replicas: width,
      tree: name,
      usPerRoute: us.toFixed(2),
      nsPerReplica: ((1000 * us) / width).toFixed(0),
    });
  }
  if (trees.length === 2) {
    const [base, cur] = [samples.get('baseline')!, samples.get('current')!];
    const ratio = median(cur.map((c, i) => c / base[i]!));
    rows.push({
      replicas: width,
      tree: 'current / baseline',
      usPerRoute: ratio.toFixed(3),
      nsPerReplica: '',
    });
  }
}
console.table(rows);
console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
