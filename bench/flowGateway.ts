/**
 * Flow control in the live gateway (issue 57), at a small scale: one simulated engine (`kvroute
 * engine`'s server, max-num-seqs `--seqs`, `--speedup` times faster than modelled), a gateway in
 * front of it without and then with `--flow-control`, and two tenants through the `openai`
 * client: heavy keeps `--heavy` streams in flight back to back (more than the engine runs at
 * once), light sends one request every `--light-every-ms`, for `--duration` seconds each. Prints
 * each tenant's answers by status and its TTFT p50 / p99 (wall clock, ms), and light's TTFT
 * alone on the same engine first (its unloaded figure).
 *
 *   npx tsx bench/flowGateway.ts
 *   npx tsx bench/flowGateway.ts --duration 30 --heavy 24 --seqs 4 --queue-depth 1 --json
 */
import OpenAI from 'openai';
import { backendOf } from '../src/embedded/fleet.ts';
import { startEngineServer } from '../src/engine/server/server.ts';
import { applyConfigDoc, defaultConfig } from '../src/serving/config.ts';
import { startGateway } from '../src/gateway/gateway.ts';
import { percentile } from '../src/results/stats.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('flowGateway', {
  json: { type: 'boolean' },
  duration: { type: 'string' },
  heavy: { type: 'string' },
  seqs: { type: 'string' },
  speedup: { type: 'string' },
  'light-every-ms': { type: 'string' },
  'queue-depth': { type: 'string' },
});
const { positiveInt } = benchFlags('flowGateway');
const durationS = positiveInt('duration', values.duration, 20);
const heavyStreams = positiveInt('heavy', values.heavy, 16);
const seqs = positiveInt('seqs', values.seqs, 4);
const speedup = positiveInt('speedup', values.speedup, 4);
const lightEveryMs = positiveInt('light-every-ms', values['light-every-ms'], 500);
/** The saturation's engine queue depth (`--flow-queue-depth`; default llm-d's 5). */
const queueDepth = positiveInt('queue-depth', values['queue-depth'], 5);

interface TenantFigures {
  status: Record<string, number>;
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
}

function prompt(tenant: string, i: number): string {
  return `${tenant} request ${i}: ${'tell me about the weather in spring '.repeat(tenant === 'heavy' ? 40 : 8)}`;
}

async function oneRequest(
  client: OpenAI,
  model: string,
  tenant: string,
  i: number,
  ttfts: number[],
  status: Record<string, number>,
): Promise<void> {
  const started = performance.now();
  try {
    const stream = await client.completions.create({
      model,
      prompt: prompt(tenant, i),
      max_tokens: tenant === 'heavy' ? 64 : 16,
      stream: true,
    });
    let first = true;
    for await (const _ of stream) {
      if (first) ttfts.push(performance.now() - started);
      first = false;
    }
    status['200'] = (status['200'] ?? 0) + 1;
  } catch (err) {
    const code = err instanceof OpenAI.APIError ? String(err.status) : 'error';
    status[code] = (status[code] ?? 0) + 1;
  }
}

function figures(ttfts: number[], status: Record<string, number>): TenantFigures {
  const sorted = [...ttfts].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? null : Math.round(percentile(sorted, p)));
  return { status, ttftP50Ms: at(0.5), ttftP99Ms: at(0.99) };
}

async function run(flow: boolean | 'alone'): Promise<Record<string, TenantFigures>> {
  const engine = await startEngineServer({ host: '127.0.0.1', port: 0, maxSeqs: seqs, speedup });
  const doc =
    flow === true
      ? {
          'flow-control': {
            enabled: true,
            'max-wait-ms': 60_000,
            saturation: { 'queue-depth': queueDepth },
          },
        }
      : {};
  const gw = await startGateway(
    applyConfigDoc(doc, {
      ...defaultConfig(),
      port: 0,
      index: 'approx',
      backends: [backendOf(engine)],
    }),
  );
  const client = (tenant: string) =>
    new OpenAI({
      baseURL: `${gw.url}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
      timeout: 300_000,
      defaultHeaders: { 'x-kvroute-tenant': tenant },
    });
  const model = engine.servedModelName;
  const endMs = performance.now() + durationS * 1000;
  const out: Record<string, { ttfts: number[]; status: Record<string, number> }> = {
    heavy: { ttfts: [], status: {} },
    light: { ttfts: [], status: {} },
  };
  const loops: Promise<void>[] = [];
  if (flow !== 'alone') {
    const heavy = client('heavy');
    for (let s = 0; s < heavyStreams; s++) {
      loops.push(
        (async () => {
          for (let i = 0; performance.now() < endMs; i++) {
            await oneRequest(
              heavy,
              model,
              'heavy',
              s * 10_000 + i,
              out.heavy!.ttfts,
              out.heavy!.status,
            );
          }
        })(),
      );
    }
  }
  const light = client('light');
  const lights: Promise<void>[] = [];
  for (let i = 0; performance.now() < endMs; i++) {
    lights.push(oneRequest(light, model, 'light', i, out.light!.ttfts, out.light!.status));
    await new Promise((r) => setTimeout(r, lightEveryMs));
  }
  await Promise.all([...loops, ...lights]);
  await gw.close();
  await engine.close();
  const result: Record<string, TenantFigures> = {};
  for (const [tenant, o] of Object.entries(out)) {
    if (tenant === 'heavy' && flow === 'alone') continue;
    result[tenant] = figures(o.ttfts, o.status);
  }
  return result;
}

const alone = await run('alone');
const without = await run(false);
const withFlow = await run(true);
const report = {
  durationS,
  heavyStreams,
  seqs,
  speedup,
  lightEveryMs,
  alone,
  without,
  with: withFlow,
};
if (values.json) {
  console.log(JSON.stringify(report));
} else {
  for (const [name, r] of [
    ['light alone', alone],
    ['without flow control', without],
    ['with flow control', withFlow],
  ] as const) {
    console.log(name);
    for (const [tenant, f] of Object.entries(r)) {
      console.log(
        `  ${tenant.padEnd(6)} statuses ${JSON.stringify(f.status)}  TTFT p50 ${f.ttftP50Ms} ms  p99 ${f.ttftP99Ms} ms`,
      );
    }
  }
}
