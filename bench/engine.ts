/**
 * Engine server benchmark: one `kvroute engine` child process (node bin/kvroute.js engine) at
 * --speedup 100, driven by N concurrent streaming clients in this process, each sending a
 * request, reading its stream to the end, and sending the next, for a fixed window.
 *
 * Reports the driver's step lag (from the engine's own kvroute_engine_step_lag_seconds
 * histogram, scraped before and after the window and interpolated within buckets, as
 * Prometheus's histogram_quantile does) and the streamed tokens per second the clients received.
 *
 *   npm run bench:engine -- [--json] [--clients 64] [--seconds 10] [--speedup 100]
 *                           [--prompt-tokens 8000] [--output-tokens 300] [--url URL]
 *
 * The defaults are the router seed's request (8,000-token prompts, 300 output tokens), all cold.
 * `--url` drives an engine that is already running (e.g. one started under --cpu-prof) instead.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Pool } from 'undici';
import { SseFramer } from '../src/openai/sse.ts';
import { readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:engine', {
  json: { type: 'boolean', default: false },
  url: { type: 'string' },
  clients: { type: 'string', default: '64' },
  seconds: { type: 'string', default: '10' },
  warmup: { type: 'string', default: '2' },
  speedup: { type: 'string', default: '100' },
  'prompt-tokens': { type: 'string', default: '8000' },
  'output-tokens': { type: 'string', default: '300' },
});
const CLIENTS = Number(values.clients);
const WINDOW_S = Number(values.seconds);
const WARMUP_S = Number(values.warmup);
const SPEEDUP = Number(values.speedup);
const PROMPT_TOKENS = Number(values['prompt-tokens']);
const OUTPUT_TOKENS = Number(values['output-tokens']);
const LAG_METRIC = 'kvroute_engine_step_lag_seconds';

async function startEngine(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    ['bin/kvroute.js', 'engine', '--port', '0', '--speedup', String(SPEEDUP)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8');
  for await (const chunk of child.stdout!) {
    out += chunk;
    const m = /url=(\S+)/.exec(out);
    if (m) return { child, url: m[1]! };
  }
  throw new Error(`engine exited before its ready line: ${out}`);
}

/** Cumulative bucket counts of the step-lag histogram, keyed by upper bound (s). */
async function lagBuckets(url: string): Promise<Map<number, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const buckets = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${LAG_METRIC}_bucket{`)) continue;
    const le = /le="([^"]+)"/.exec(line)![1]!;
    buckets.set(
      le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le),
      Number(line.split(' ').at(-1)),
    );
  }
  return buckets;
}

/** histogram_quantile over the difference of two scrapes, in ms. */
function quantileMs(before: Map<number, number>, after: Map<number, number>, q: number): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((b) => (after.get(b) ?? 0) - (before.get(b) ?? 0));
  const total = counts.at(-1)!;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i]! >= rank) {
      const bound = bounds[i]!;
      if (!Number.isFinite(bound)) return prevBound * 1000;
      const inBucket = counts[i]! - prevCount;
      const frac = inBucket === 0 ? 0 : (rank - prevCount) / inBucket;
      return (prevBound + (bound - prevBound) * frac) * 1000;
    }
    prevBound = bounds[i]!;
    prevCount = counts[i]!;
  }
  return prevBound * 1000;
}

let streamed = 0;
let counting = false;
let running = true;

async function client(pool: Pool, id: number): Promise<void> {
  for (let r = 0; running; r++) {
    // Unique prompts: every request is a cold prefill, the worst case for the engine.
    const prompt = Array.from(
      { length: PROMPT_TOKENS },
      (_, t) => 100 + ((id * 7919 + r * 104729 + t) % 90_000),
    );
    const res = await pool.request({
      path: '/v1/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: OUTPUT_TOKENS, stream: true }),
    });
    const framer = new SseFramer();
    for await (const chunk of res.body) {
      for (const data of framer.push(chunk as Buffer)) {
        // Every chunk before [DONE] carries one token (no usage chunk was asked for).
        if (counting && data !== '[DONE]') streamed++;
      }
    }
  }
}

async function main(): Promise<void> {
  const { child, url } = values.url ? { child: null, url: values.url } : await startEngine();
  const pool = new Pool(url, { connections: CLIENTS, pipelining: 1 });
  try {
    const clients = Array.from({ length: CLIENTS }, (_, i) => client(pool, i));
    await new Promise((r) => setTimeout(r, WARMUP_S * 1000));
    const lagBefore = await lagBuckets(url);
    counting = true;
    const started = performance.now();
    await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
    counting = false;
    const elapsedS = (performance.now() - started) / 1000;
    const lagAfter = await lagBuckets(url);
    running = false;
    const result = {
      stepLagMs: {
        p50: Number(quantileMs(lagBefore, lagAfter, 0.5).toFixed(3)),
        p99: Number(quantileMs(lagBefore, lagAfter, 0.99).toFixed(3)),
      },
      tokensPerS: Math.round(streamed / elapsedS),
    };
    await Promise.race([Promise.all(clients), new Promise((r) => setTimeout(r, 5_000))]);
    if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else {
      process.stdout.write(
        `engine (child process, --speedup ${SPEEDUP}), ${CLIENTS} streaming clients, ` +
          `${PROMPT_TOKENS}-token prompts, ${OUTPUT_TOKENS} output tokens, ${WINDOW_S} s window\n` +
          `  step lag p50 ${result.stepLagMs.p50} ms, p99 ${result.stepLagMs.p99} ms\n` +
          `  streamed ${result.tokensPerS} tokens/s\n`,
      );
    }
  } finally {
    await pool.destroy();
    if (child) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }
}

await main();
