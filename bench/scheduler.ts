/**
 * Scheduler micro-benchmark: the cost of one schedule() + complete() with N running decodes
 * (paged KV, prefix caching on, budget 8,192), and of admitting a cold 8,000-token prompt
 * (prefix lookup, 500 blocks allocated with evictions, 500 blocks stored with their event).
 * The admission's token ids are an Int32Array, as the engine hands every prompt to the scheduler
 * (`compactTokens` in src/engine/core.ts); `admitPlainUs` is the same admission with a plain
 * number[] (the scheduler then copies the 8,000 ids into the BlockStored event, where it hands a
 * view of typed ids on).
 * Medians of 5 runs. `--json` prints {"stepUs": {p50, p99}, "admitUs": {p50, p99},
 * "admitPlainUs": {p50, p99}} (256 running).
 */
import { computeBlockKeys } from '../src/kv/blockKey.ts';
import { BlockPool } from '../src/kv/blockPool.ts';
import { Scheduler } from '../src/scheduler/scheduler.ts';
import { readBenchArgs } from './flags.ts';

const RUNS = 5;
const BLOCK_SIZE = 16;
const BUDGET_TOKENS = 8192;

interface Percentiles {
  p50: number;
  p99: number;
}

function percentiles(samplesUs: number[]): Percentiles {
  const sorted = [...samplesUs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

function medianOfRuns(run: () => Percentiles): Percentiles {
  const runs = Array.from({ length: RUNS }, run);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { p50: median(runs.map((r) => r.p50)), p99: median(runs.map((r) => r.p99)) };
}

const nowUs = (): number => Number(process.hrtime.bigint()) / 1e3;

function uniquePrompt(tokens: number, seed: number): number[] {
  return Array.from({ length: tokens }, (_, i) => (seed * 7919 + i * 31) % 128_000);
}

/** One run: N requests decoding; time `steps` schedule() + complete() calls. */
function stepRun(running: number, steps: number): Percentiles {
  const promptTokens = 512;
  const maxNewTokens = 2 * steps + 64;
  const pool = new BlockPool({
    numBlocks: Math.ceil((running * (promptTokens + maxNewTokens)) / BLOCK_SIZE) + 64,
    blockSize: BLOCK_SIZE,
  });
  const sched = new Scheduler(
    { budgetTokens: BUDGET_TOKENS, maxSeqs: running, kvPolicy: 'paged' },
    pool,
  );
  for (let i = 0; i < running; i++) {
    const tokenIds = uniquePrompt(promptTokens, i);
    sched.add({
      id: `r${i}`,
      promptTokens,
      maxNewTokens,
      arrivalMs: i,
      tokenIds,
      blockKeys: computeBlockKeys(tokenIds, BLOCK_SIZE),
    });
  }
  // Prefill everyone, then warm up on decodes.
  for (let i = 0; i < steps; i++) {
    sched.complete(sched.schedule());
    pool.takeEvents();
  }
  if (sched.counters().running !== running) throw new Error('setup did not reach steady decode');
  const samples: number[] = [];
  for (let i = 0; i < steps; i++) {
    const t0 = nowUs();
    const plan = sched.schedule();
    sched.complete(plan);
    samples.push(nowUs() - t0);
    if (plan.decodeTokens !== running) throw new Error('not every request decoded');
  }
  return percentiles(samples);
}

/**
 * One run: admit cold 8,000-token prompts into a full cache (evicting), one at a time; their token
 * ids typed as the engine's are, or a plain array.
 */
function admitRun(count: number, typed: boolean): Percentiles {
  const promptTokens = 8000;
  const pool = new BlockPool({ numBlocks: 4 * 501, blockSize: BLOCK_SIZE });
  const sched = new Scheduler({ budgetTokens: 8192, maxSeqs: 8, kvPolicy: 'paged' }, pool);
  const samples: number[] = [];
  for (let i = 0; i < count + 8; i++) {
    const id = `p${i}`;
    const plain = uniquePrompt(promptTokens, 1000 + i);
    const blockKeys = computeBlockKeys(plain, BLOCK_SIZE);
    const tokenIds = typed ? Int32Array.from(plain) : plain;
    sched.add({ id, promptTokens, maxNewTokens: 2, arrivalMs: i, tokenIds, blockKeys });
    const t0 = nowUs();
    const plan = sched.schedule();
    sched.complete(plan);
    const events = pool.takeEvents();
    const t1 = nowUs();
    if (plan.prefillTokens !== promptTokens || events.length === 0) throw new Error('no admission');
    sched.complete(sched.schedule()); // the decode that finishes it
    if (i >= 8) samples.push(t1 - t0); // the first ones fill the cache; later ones evict
  }
  return percentiles(samples);
}

function main(): void {
  const json = readBenchArgs('bench:scheduler', { json: { type: 'boolean' } }).json === true;
  const table: { running: number; p50: number; p99: number }[] = [];
  for (const running of [64, 256, 1024]) {
    stepRun(running, 200); // JIT warm-up
    table.push({ running, ...medianOfRuns(() => stepRun(running, 1000)) });
  }
  admitRun(50, true);
  admitRun(50, false);
  const admitUs = medianOfRuns(() => admitRun(300, true));
  const admitPlainUs = medianOfRuns(() => admitRun(300, false));
  const stepUs = table.find((row) => row.running === 256)!;
  const round = (x: number) => Math.round(x * 100) / 100;
  if (json) {
    const out = {
      stepUs: { p50: round(stepUs.p50), p99: round(stepUs.p99) },
      admitUs: { p50: round(admitUs.p50), p99: round(admitUs.p99) },
      admitPlainUs: { p50: round(admitPlainUs.p50), p99: round(admitPlainUs.p99) },
    };
    console.log(JSON.stringify(out));
    return;
  }
  console.log(
    `schedule() + complete(), paged, prefix caching, budget ${BUDGET_TOKENS} (median of ${RUNS} runs)`,
  );
  console.log('running     p50 us     p99 us   p50 us/seq');
  for (const row of table) {
    console.log(
      `${String(row.running).padStart(7)} ${row.p50.toFixed(2).padStart(10)} ${row.p99.toFixed(2).padStart(10)} ${(row.p50 / row.running).toFixed(3).padStart(12)}`,
    );
  }
  console.log(
    `\nadmit a cold 8,000-token prompt (lookup, 500 blocks, evictions, events): p50 ${admitUs.p50.toFixed(2)} us, p99 ${admitUs.p99.toFixed(2)} us`,
  );
  console.log(
    `the same, token ids as a plain array (copied into the event): p50 ${admitPlainUs.p50.toFixed(2)} us, p99 ${admitPlainUs.p99.toFixed(2)} us`,
  );
}

main();
