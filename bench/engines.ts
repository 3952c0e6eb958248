/**
 * Real engines behind the gateway: two llama.cpp llama-servers (4 slots, the tiny model, 1
 * thread each) on a shared-prefix chat workload (3 customers with long system prompts, 4
 * questions each), under delay-cost (the default policy) and round-robin, each with
 * `--cache-ram 0` and with llama-server's defaults (its host prompt cache on, its size given to
 * the gateway as `cache-ram=8192,kv-bytes-per-token=2048`).
 *
 *   npm run bench:engines [-- --json] [--reps 3] [--customers 3] [--requests 4]
 *
 * Per run: predictedHitsReal (of the tokens the router predicted cached, the share the engine
 * served from cache), realReuse (engine cached tokens / prompt tokens), unpredictedHitRequests
 * (requests served more than a block beyond the prediction from cache), mismatchLines
 * (TOKENIZER MISMATCH log lines), replicasWithLoad; the median over reps per configuration.
 * About 10 s a run. Exits 0 with a note when the binary cannot run here.
 */
import { findLlamaServer } from '../test/support/llamaServer.ts';
import {
  LLAMA_DEFAULT_CACHE_RAM_MIB,
  runLlamaStack,
  type StackFigures,
  TINY_KV_BYTES_PER_TOKEN,
} from '../test/support/llamaStack.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:engines', {
  json: { type: 'boolean' },
  reps: { type: 'string' },
  customers: { type: 'string' },
  requests: { type: 'string' },
});
const flags = benchFlags('bench:engines');
const JSON_OUT = values.json === true;
const REPS = flags.positiveInt('reps', values.reps, 3);
const CUSTOMERS = flags.positiveInt('customers', values.customers, 3);
const REQUESTS = flags.positiveInt('requests', values.requests, 4);

const binary = findLlamaServer();
if (!binary.ok) {
  process.stderr.write(`bench:engines: skipped: ${binary.why}\n`);
  process.exit(0);
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const round = (x: number) => Math.round(x * 1000) / 1000;

interface Row {
  policy: string;
  cacheRam: string;
  rep: number;
  predictedHitsReal: number;
  predictedTokens: number;
  realReuse: number;
  unpredictedHitRequests: number;
  mismatchLines: number;
  replicasWithLoad: number;
  replicas: number;
  engines: (string | null)[];
}
const row = (f: StackFigures, rep: number): Row => ({
  policy: f.policy,
  cacheRam: f.cacheRam,
  rep,
  predictedHitsReal: round(f.predictedHitsReal),
  predictedTokens: f.predictedTokens,
  realReuse: round(f.realReuse),
  unpredictedHitRequests: f.unpredictedHitRequests,
  mismatchLines: f.mismatchLines,
  replicasWithLoad: f.replicasWithLoad,
  replicas: f.replicas,
  engines: f.engines,
});

const summaries: Record<string, unknown>[] = [];
for (const policy of ['delay-cost', 'round-robin']) {
  for (const cacheRamMiB of [0, undefined]) {
    const rows: Row[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      const f = await runLlamaStack(binary, {
        policy,
        // llama-server's default host cache, sized for the router (it does not serve its size).
        ...(cacheRamMiB !== undefined
          ? { cacheRamMiB }
          : {
              backend: {
                engine: 'llamacpp',
                cacheRamMiB: LLAMA_DEFAULT_CACHE_RAM_MIB,
                kvBytesPerToken: TINY_KV_BYTES_PER_TOKEN,
              },
            }),
        customers: CUSTOMERS,
        requestsPerCustomer: REQUESTS,
      });
      const r = row(f, rep);
      rows.push(r);
      if (JSON_OUT) process.stdout.write(`${JSON.stringify({ kind: 'run', ...r })}\n`);
      else process.stderr.write(`${JSON.stringify(r)}\n`);
    }
    const summary = {
      kind: 'median',
      policy,
      cacheRam: cacheRamMiB === undefined ? 'default' : String(cacheRamMiB),
      reps: REPS,
      predictedHitsReal: median(rows.map((r) => r.predictedHitsReal)),
      predictedTokens: median(rows.map((r) => r.predictedTokens)),
      realReuse: median(rows.map((r) => r.realReuse)),
      unpredictedHitRequests: median(rows.map((r) => r.unpredictedHitRequests)),
      mismatchLines: median(rows.map((r) => r.mismatchLines)),
      replicasWithLoad: median(rows.map((r) => r.replicasWithLoad)),
    };
    summaries.push(summary);
    if (JSON_OUT) process.stdout.write(`${JSON.stringify(summary)}\n`);
  }
}
if (!JSON_OUT) {
  process.stdout.write(
    'policy       cache-ram  predictedHitsReal  predictedTokens  realReuse  unpredictedHitRequests  mismatchLines  replicasWithLoad\n',
  );
  for (const s of summaries) {
    process.stdout.write(
      `${String(s.policy).padEnd(12)} ${String(s.cacheRam).padEnd(10)} ${String(s.predictedHitsReal).padEnd(18)} ${String(s.predictedTokens).padEnd(16)} ${String(s.realReuse).padEnd(10)} ${String(s.unpredictedHitRequests).padEnd(23)} ${String(s.mismatchLines).padEnd(14)} ${s.replicasWithLoad}\n`,
    );
  }
}
