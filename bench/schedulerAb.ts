/**
 * bench:scheduler's two figures for this tree's scheduler and block pool against a baseline
 * tree's, in one process, rounds alternating, so that a busy machine weighs on both alike:
 *
 *   git archive <commit> src package.json | tar -x -C /tmp/base   # its sources and package.json
 *   BASELINE_SRC=/tmp/base/src node --import tsx bench/schedulerAb.ts [--rounds 9]
 *
 * Per round and tree: the step (schedule() + complete() with 256 running decodes, paged KV,
 * prefix caching, budget 8,192) and the admission of a cold 8,000-token prompt into a full pool
 * (lookup, 500 blocks allocated with evictions, 500 stored with their events), its token ids
 * typed as the engine's are and again as a plain array (`plainAdmit*`), each as p50 and
 * p99 of wall-clock samples and as mean CPU time per call (what preemption by other processes
 * does not inflate). Prints each tree's medians, the median of the per-round ratios (this tree /
 * baseline) and the load average. The workloads are bench/scheduler.ts's.
 */
import { resolve } from 'node:path';
import { alternateRounds, loadSides, printAbTable, SIDES, summarize } from './ab.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('schedulerAb', {
  rounds: { type: 'string' },
  steps: { type: 'string' },
  admits: { type: 'string' },
});
const { positiveInt } = benchFlags('schedulerAb');
const ROUNDS = positiveInt('rounds', values.rounds, 9);
const STEPS = positiveInt('steps', values.steps, 1_000);
const ADMITS = positiveInt('admits', values.admits, 300);
const BLOCK_SIZE = 16;
const BUDGET_TOKENS = 8192;
const RUNNING = 256;

interface Plan {
  decodeTokens: number;
  prefillTokens: number;
}
interface SchedulerLike {
  add(request: object): void;
  schedule(): Plan;
  complete(plan: Plan): unknown;
  counters(): { running: number };
}
interface PoolLike {
  takeEvents(): unknown[];
}
interface Tree {
  BlockPool: new (options: object) => PoolLike;
  Scheduler: new (config: object, pool: PoolLike) => SchedulerLike;
  computeBlockKeys(tokens: number[], blockSize: number): number[];
}

async function load(src: string): Promise<Tree> {
  const keys = await import(resolve(src, 'kv/blockKey.ts'));
  const pool = await import(resolve(src, 'kv/blockPool.ts'));
  const scheduler = await import(resolve(src, 'scheduler/scheduler.ts'));
  return {
    BlockPool: pool.BlockPool,
    Scheduler: scheduler.Scheduler,
    computeBlockKeys: keys.computeBlockKeys,
  };
}

const trees = await loadSides(load);

const nowUs = (): number => performance.now() * 1000;
const cpuUs = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return used.user + used.system;
};
const uniquePrompt = (tokens: number, seed: number): number[] =>
  Array.from({ length: tokens }, (_, i) => (seed * 7919 + i * 31) % 128_000);
const at = (sorted: number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** bench/scheduler.ts's stepRun at 256 running: p50, p99 and mean CPU µs of a step. */
function stepRound(tree: Tree): Record<string, number> {
  const promptTokens = 512;
  const maxNewTokens = 2 * STEPS + 64;
  const pool = new tree.BlockPool({
    numBlocks: Math.ceil((RUNNING * (promptTokens + maxNewTokens)) / BLOCK_SIZE) + 64,
    blockSize: BLOCK_SIZE,
  });
  const sched = new tree.Scheduler(
    { budgetTokens: BUDGET_TOKENS, maxSeqs: RUNNING, kvPolicy: 'paged' },
    pool,
  );
  for (let i = 0; i < RUNNING; i++) {
    const tokenIds = uniquePrompt(promptTokens, i);
    sched.add({
      id: `r${i}`,
      promptTokens,
      maxNewTokens,
      arrivalMs: i,
      tokenIds,
      blockKeys: tree.computeBlockKeys(tokenIds, BLOCK_SIZE),
    });
  }
  for (let i = 0; i < STEPS; i++) {
    sched.complete(sched.schedule());
    pool.takeEvents();
  }
  if (sched.counters().running !== RUNNING) throw new Error('setup did not reach steady decode');
  const samples: number[] = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < STEPS; i++) {
    const t0 = nowUs();
    const plan = sched.schedule();
    sched.complete(plan);
    samples.push(nowUs() - t0);
    if (plan.decodeTokens !== RUNNING) throw new Error('not every request decoded');
  }
  const cpuMean = cpuUs(cpu) / STEPS;
  samples.sort((a, b) => a - b);
  return { stepP50Us: at(samples, 0.5), stepP99Us: at(samples, 0.99), stepCpuMeanUs: cpuMean };
}

/**
 * bench/scheduler.ts's admitRun: p50, p99 and mean CPU µs of one admission, token ids typed as
 * the engine's are (`admit*`) or a plain array (`plainAdmit*`).
 */
function admitRound(tree: Tree, typed: boolean): Record<string, number> {
  const promptTokens = 8000;
  const pool = new tree.BlockPool({ numBlocks: 4 * 501, blockSize: BLOCK_SIZE });
  const sched = new tree.Scheduler({ budgetTokens: 8192, maxSeqs: 8, kvPolicy: 'paged' }, pool);
  const samples: number[] = [];
  let cpuTotal = 0;
  for (let i = 0; i < ADMITS + 8; i++) {
    const id = `p${i}`;
    const plain = uniquePrompt(promptTokens, 1000 + i);
    const blockKeys = tree.computeBlockKeys(plain, BLOCK_SIZE);
    const tokenIds = typed ? Int32Array.from(plain) : plain;
    sched.add({ id, promptTokens, maxNewTokens: 2, arrivalMs: i, tokenIds, blockKeys });
    const cpu = process.cpuUsage();
    const t0 = nowUs();
    const plan = sched.schedule();
    sched.complete(plan);
    const events = pool.takeEvents();
    const t1 = nowUs();
    const used = cpuUs(cpu);
    if (plan.prefillTokens !== promptTokens || events.length === 0) throw new Error('no admission');
    sched.complete(sched.schedule());
    if (i >= 8) {
      samples.push(t1 - t0);
      cpuTotal += used;
    }
  }
  samples.sort((a, b) => a - b);
  const prefix = typed ? 'admit' : 'plainAdmit';
  return {
    [`${prefix}P50Us`]: at(samples, 0.5),
    [`${prefix}P99Us`]: at(samples, 0.99),
    [`${prefix}CpuMeanUs`]: cpuTotal / ADMITS,
  };
}

// JIT warm-up of both trees before anything is kept.
for (const side of SIDES) {
  stepRound(trees[side]);
  admitRound(trees[side], true);
  admitRound(trees[side], false);
}
// Which tree goes first alternates, so neither always runs on a freshly collected heap.
const ab = await alternateRounds(ROUNDS, SIDES, (side) => ({
  ...stepRound(trees[side]),
  ...admitRound(trees[side], true),
  ...admitRound(trees[side], false),
}));
printAbTable(
  `scheduler A/B: ${ROUNDS} alternating rounds, ${STEPS} steps and ${ADMITS} admissions each, medians`,
  summarize(ab, 'current', 'baseline'),
);
