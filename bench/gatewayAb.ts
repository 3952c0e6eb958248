/**
 * bench:gateway's throughput half for this tree's gateway against a baseline tree's, rounds
 * alternating, so a busy machine weighs on both alike:
 *
 *   mkdir /tmp/gwbase && git archive <commit> bin src package.json | tar -x -C /tmp/gwbase
 *   ln -s "$PWD/node_modules" /tmp/gwbase/node_modules
 *   BASELINE_DIR=/tmp/gwbase node --import tsx bench/gatewayAb.ts [--rounds 7] [--seconds 3]
 *
 * Both gateways (`kvroute serve --index approx`, processes of their own) proxy to the same two
 * instant backends; each round drives each gateway in turn (the order swapped every round) with
 * 64 closed-loop connections, then 200 req/s open loop for 2 s; bench:gateway's Node pass-through proxy
 * (the floor of any Node proxy here) takes part in the same rounds. Per round and gateway: requests/s, the
 * gateway process's CPU µs per request (user + system, from /proc: what the load generator and
 * the rest of the machine do not inflate), the same at the fixed rate (`cpuUsAtRate`: both sides
 * then do the same work per second, so the gateway's fixed per-second work, scrapes and the
 * dashboard's sampling, weighs alike; the fairer figure when a starved gateway's closed-loop
 * rate falls) and the open-loop latency p50. Prints each side's
 * medians, the median of the per-round ratios (this tree / baseline) and the load average.
 * `--warmup N` requests per side first (default 6,000). `--profile DIR` runs this tree's gateway under `--cpu-prof` (written to DIR when it stops).
 */
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  closedLoop,
  cpuSecondsOf,
  median,
  openLoop,
  PASS_THROUGH_PROXY,
  startChild,
  startInstantBackends,
  stopChildren,
} from './gatewayLoad.ts';

const argv = process.argv;
const flag = (name: string): string | undefined => {
  const at = argv.indexOf(`--${name}`);
  return at < 0 ? undefined : argv[at + 1];
};
const ROUNDS = Number(flag('rounds') ?? 7);
const SECONDS = Number(flag('seconds') ?? 3);
const CONCURRENCY = 64;
const OPEN_RATE_PER_S = 200;
const OPEN_S = 2;
const PROFILE_DIR = flag('profile');
const BASELINE_DIR = process.env.BASELINE_DIR;
/** This tree, or CURRENT_DIR: a tree laid out as the baseline's (to measure a commit while editing). */
const HERE = process.env.CURRENT_DIR ?? fileURLToPath(new URL('..', import.meta.url));
/** Requests each side gets before the first round: the JIT's warm-up, slow on a busy machine. */
const WARMUP_REQUESTS = Number(flag('warmup') ?? 6_000);

interface Side {
  name: string;
  url: string;
  pid: number;
  rps: number[];
  cpuUsPerRequest: number[];
  /** CPU µs per request at the fixed open-loop rate: both sides do the same work per second. */
  cpuUsAtRate: number[];
  p50Ms: number[];
}

async function startGateway(name: string, root: string, backends: string[]): Promise<Side> {
  const prof =
    name === 'current' && PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR] : [];
  const { match, child } = await startChild(
    process.execPath,
    [
      ...prof,
      join(root, 'bin/kvroute.js'),
      'serve',
      '--port',
      '0',
      '--index',
      'approx',
      ...backends.flatMap((b) => ['--backend', b]),
    ],
    /listening on (\S+)/,
  );
  return {
    name,
    url: match[1]!,
    pid: child.pid!,
    rps: [],
    cpuUsPerRequest: [],
    cpuUsAtRate: [],
    p50Ms: [],
  };
}

/** The floor of any Node proxy here: bench:gateway's pass-through (one backend, no routing). */
async function startFloor(backend: string): Promise<Side> {
  const { match, child } = await startChild(
    process.execPath,
    ['--input-type=module', '-e', PASS_THROUGH_PROXY, backend],
    /ready (\S+)/,
  );
  return {
    name: 'pass-through',
    url: match[1]!,
    pid: child.pid!,
    rps: [],
    cpuUsPerRequest: [],
    cpuUsAtRate: [],
    p50Ms: [],
  };
}

async function measure(side: Side): Promise<void> {
  const cpu0 = cpuSecondsOf(side.pid);
  const { done, requestsPerS } = await closedLoop(side.url, CONCURRENCY, SECONDS);
  const cpu1 = cpuSecondsOf(side.pid);
  side.rps.push(requestsPerS);
  if (cpu0 !== null && cpu1 !== null) side.cpuUsPerRequest.push(((cpu1 - cpu0) * 1e6) / done);
  const cpu2 = cpuSecondsOf(side.pid);
  const latencies = (await openLoop(side.url, OPEN_RATE_PER_S, OPEN_S)).sort((a, b) => a - b);
  const cpu3 = cpuSecondsOf(side.pid);
  if (cpu2 !== null && cpu3 !== null)
    side.cpuUsAtRate.push(((cpu3 - cpu2) * 1e6) / latencies.length);
  side.p50Ms.push(latencies[Math.floor(latencies.length / 2)]!);
}

async function main(): Promise<void> {
  if (!BASELINE_DIR) throw new Error('set BASELINE_DIR to a baseline tree (see the header)');
  const backends = await startInstantBackends(2);
  const current = await startGateway('current', HERE, backends);
  const baseline = await startGateway('baseline', resolve(BASELINE_DIR), backends);
  const floor = await startFloor(backends[0]!);
  const sides = [current, baseline, floor];
  const load0 = loadavg()[0]!;
  for (const side of sides) {
    for (let done = 0; done < WARMUP_REQUESTS; )
      done += (await closedLoop(side.url, CONCURRENCY, 1)).done;
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) await measure(side);
    process.stderr.write(
      `round ${round + 1}/${ROUNDS}: ${sides
        .map(
          (s) =>
            `${s.name} ${s.rps.at(-1)!.toFixed(0)} req/s ${s.cpuUsPerRequest.at(-1)?.toFixed(0)} µs/req p50 ${s.p50Ms.at(-1)!.toFixed(2)} ms`,
        )
        .join(', ')}\n`,
    );
  }
  const ratio = (key: 'rps' | 'cpuUsPerRequest' | 'cpuUsAtRate' | 'p50Ms') =>
    median(current[key].map((x, i) => x / baseline[key][i]!));
  const summary = (s: Side) => ({
    requestsPerS: Math.round(median(s.rps)),
    cpuUsPerRequest: Math.round(median(s.cpuUsPerRequest)),
    cpuUsAtRate: Math.round(median(s.cpuUsAtRate)),
    p50Ms: Math.round(median(s.p50Ms) * 1000) / 1000,
  });
  const out = {
    rounds: ROUNDS,
    seconds: SECONDS,
    current: summary(current),
    baseline: summary(baseline),
    nodePassThrough: summary(floor),
    ratio: {
      requestsPerS: Math.round(ratio('rps') * 1000) / 1000,
      cpuUsPerRequest: Math.round(ratio('cpuUsPerRequest') * 1000) / 1000,
      cpuUsAtRate: Math.round(ratio('cpuUsAtRate') * 1000) / 1000,
      p50Ms: Math.round(ratio('p50Ms') * 1000) / 1000,
    },
    loadAverage: [Math.round(load0 * 10) / 10, Math.round(loadavg()[0]! * 10) / 10],
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

try {
  await main();
} finally {
  stopChildren();
}
