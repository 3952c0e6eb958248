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
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { alternateRounds, type Figures, loadAverage, rounded, summarize } from './ab.ts';
import { benchFlags, readBenchArgs } from './flags.ts';
import {
  closedLoop,
  cpuSecondsOf,
  openLoop,
  PASS_THROUGH_PROXY,
  startChild,
  startInstantBackends,
  stopChildren,
} from './gatewayLoad.ts';

const values = readBenchArgs('gatewayAb', {
  rounds: { type: 'string' },
  seconds: { type: 'string' },
  warmup: { type: 'string' },
  profile: { type: 'string' },
});
const { positiveInt, positiveNumber } = benchFlags('gatewayAb');
const ROUNDS = positiveInt('rounds', values.rounds, 7);
const SECONDS = positiveNumber('seconds', values.seconds, 3);
const CONCURRENCY = 64;
const OPEN_RATE_PER_S = 200;
const OPEN_S = 2;
const PROFILE_DIR = values.profile;
const BASELINE_DIR = process.env.BASELINE_DIR;
/** This tree, or CURRENT_DIR: a tree laid out as the baseline's (to measure a commit while editing). */
const HERE = process.env.CURRENT_DIR ?? fileURLToPath(new URL('..', import.meta.url));
/** Requests each side gets before the first round: the JIT's warm-up, slow on a busy machine. */
const WARMUP_REQUESTS = positiveInt('warmup', values.warmup, 6_000);

type Name = 'current' | 'baseline' | 'pass-through';
interface Side {
  name: Name;
  url: string;
  pid: number;
}

async function startGateway(name: Name, root: string, backends: string[]): Promise<Side> {
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
  };
}

/**
 * One round of one side: requests/s closed loop, the side's CPU µs per request in it (NaN where
 * /proc is not readable), the same at the fixed open-loop rate (`cpuUsAtRate`: both sides do the
 * same work per second) and the open-loop latency p50.
 */
async function measure(side: Side): Promise<Figures> {
  const cpu0 = cpuSecondsOf(side.pid);
  const { done, requestsPerS } = await closedLoop(side.url, CONCURRENCY, SECONDS);
  const cpu1 = cpuSecondsOf(side.pid);
  const cpu2 = cpuSecondsOf(side.pid);
  const latencies = (await openLoop(side.url, OPEN_RATE_PER_S, OPEN_S)).sort((a, b) => a - b);
  const cpu3 = cpuSecondsOf(side.pid);
  const perRequestUs = (from: number | null, to: number | null, count: number) =>
    from !== null && to !== null ? ((to - from) * 1e6) / count : Number.NaN;
  return {
    rps: requestsPerS,
    cpuUsPerRequest: perRequestUs(cpu0, cpu1, done),
    cpuUsAtRate: perRequestUs(cpu2, cpu3, latencies.length),
    p50Ms: latencies[Math.floor(latencies.length / 2)]!,
  };
}

async function main(): Promise<void> {
  if (!BASELINE_DIR) throw new Error('set BASELINE_DIR to a baseline tree (see the header)');
  const backends = await startInstantBackends(2);
  const current = await startGateway('current', HERE, backends);
  const baseline = await startGateway('baseline', resolve(BASELINE_DIR), backends);
  const floor = await startFloor(backends[0]!);
  const sides: Record<Name, Side> = { current, baseline, 'pass-through': floor };
  const load0 = loadAverage();
  for (const side of Object.values(sides)) {
    for (let done = 0; done < WARMUP_REQUESTS; )
      done += (await closedLoop(side.url, CONCURRENCY, 1)).done;
  }
  const ab = await alternateRounds(
    ROUNDS,
    ['current', 'baseline', 'pass-through'] as const,
    (name) => measure(sides[name]),
    {
      onRound: (round, got) =>
        process.stderr.write(
          `round ${round + 1}/${ROUNDS}: ${Object.entries(got)
            .map(
              ([name, f]) =>
                `${name} ${f.rps!.toFixed(0)} req/s ${f.cpuUsPerRequest!.toFixed(0)} µs/req p50 ${f.p50Ms!.toFixed(2)} ms`,
            )
            .join(', ')}\n`,
        ),
    },
  );
  const { medians, ratio } = summarize(ab, 'current', 'baseline');
  const summary = (f: Figures) => ({
    requestsPerS: Math.round(f.rps!),
    cpuUsPerRequest: Math.round(f.cpuUsPerRequest!),
    cpuUsAtRate: Math.round(f.cpuUsAtRate!),
    p50Ms: rounded(f.p50Ms!, 3),
  });
  const out = {
    rounds: ROUNDS,
    seconds: SECONDS,
    current: summary(medians.current!),
    baseline: summary(medians.baseline!),
    nodePassThrough: summary(medians['pass-through']!),
    ratio: {
      requestsPerS: rounded(ratio.rps!, 3),
      cpuUsPerRequest: rounded(ratio.cpuUsPerRequest!, 3),
      cpuUsAtRate: rounded(ratio.cpuUsAtRate!, 3),
      p50Ms: rounded(ratio.p50Ms!, 3),
    },
    loadAverage: [load0, loadAverage()],
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

try {
  await main();
} finally {
  stopChildren();
}
