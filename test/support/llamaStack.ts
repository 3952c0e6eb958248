/**
 * Two real llama-servers behind the real gateway, driven with the `openai` client on a
 * shared-prefix chat workload (customers with long system prompts, a few questions each), and
 * what came of it: how much of what the router predicted cached the engine really served from
 * its cache, the engine's own reuse, tokenizer mismatch lines and load reports.
 * Used by test/gateway/gateway.llamaServer.test.ts and bench/engines.ts.
 */
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { defaultConfig, type GatewayConfig } from '../../src/serving/config.ts';
import type { BackendConfig } from '../../src/serving/backendConfig.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { makeLogger } from '../../src/serving/log.ts';
import { DEFAULT_SHAPE } from '../../src/gguf/tinyModel.ts';
import type { LlamaServerBinary } from './llamaServer.ts';
import { startLlamaServer } from './llamaServer.ts';
import { tinyModelPath } from './tinyModel.ts';
import { LLAMA3_DIR } from './tokenizerFixtures.ts';

/** llama-server's `--cache-ram` default, MiB (common/common.h, `cache_ram_mib`). */
export const LLAMA_DEFAULT_CACHE_RAM_MIB = 8192;

/** The tiny model's KV bytes per token: 2 x n_layer x n_head_kv x head_dim x 2 bytes (f16). */
export const TINY_KV_BYTES_PER_TOKEN =
  2 * DEFAULT_SHAPE.layers * DEFAULT_SHAPE.kvHeads * (DEFAULT_SHAPE.dim / DEFAULT_SHAPE.heads) * 2;

export interface StackOptions {
  policy?: string;
  /** `--cache-ram` for both servers; absent: llama-server's default. */
  cacheRamMiB?: number;
  customers?: number;
  requestsPerCustomer?: number;
  /** Words in each customer's system prompt. */
  systemWords?: number;
  /** Keys for both backends (e.g. their host prompt cache's size). */
  backend?: Partial<BackendConfig>;
  /** Gateway config overrides; the tokenizer is the model's own folder unless given. */
  gateway?: Partial<GatewayConfig>;
}

export interface RequestFigures {
  customer: number;
  replica: string | null;
  predictedTokens: number;
  /** The engine's cached tokens (`timings.cache_n`, else usage's `cached_tokens`). */
  realTokens: number;
  promptTokens: number;
  routerPromptTokens: number | null;
  answer: string;
}

export interface StackFigures {
  policy: string;
  cacheRam: string;
  requests: RequestFigures[];
  /** Σ min(predicted, real) / Σ predicted: 1 when nothing was predicted. */
  predictedHitsReal: number;
  predictedTokens: number;
  /** Σ engine cached / Σ engine prompt tokens. */
  realReuse: number;
  /**
   * Requests the engine served more than a block beyond the prediction from cache (a hit the
   * router did not see: llama-server's host prompt cache, or a slot the model lost track of).
   */
  unpredictedHitRequests: number;
  mismatchLines: number;
  engines: (string | null)[];
  replicasWithLoad: number;
  replicas: number;
  mismatches: Line[];
}

type Line = Record<string, unknown> & { msg: string };

/** A customer's long system prompt: seeded words, distinct per customer. */
function systemPrompt(customer: number, words: number): string {
  let x = 1 + customer * 7919;
  const vocab = ['policy', 'refund', 'account', 'shipping', 'order', 'invoice', 'support', 'plan'];
  const out: string[] = [`You are the assistant of customer ${customer}.`];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push(`${vocab[x % vocab.length]}${x % 97}`);
  }
  return out.join(' ');
}

export async function runLlamaStack(
  binary: Extract<LlamaServerBinary, { ok: true }>,
  opts: StackOptions = {},
): Promise<StackFigures> {
  const customers = opts.customers ?? 3;
  const perCustomer = opts.requestsPerCustomer ?? 3;
  const model = await tinyModelPath();
  const closers: (() => Promise<void>)[] = [];
  const lines: Line[] = [];
  try {
    const servers = await Promise.all(
      [0, 1].map(() =>
        startLlamaServer(binary, {
          model,
          slots: 4,
          contextTokens: 16384,
          ...(opts.cacheRamMiB !== undefined && { cacheRamMiB: opts.cacheRamMiB }),
        }),
      ),
    );
    for (const s of servers) closers.push(s.close);
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const text of String(chunk).split('\n')) if (text) lines.push(JSON.parse(text));
        done();
      },
    });
    const config = defaultConfig();
    const gw = await startGateway(
      {
        ...config,
        port: 0,
        scrapeMs: 100,
        accessLog: true,
        tokenizer: LLAMA3_DIR,
        ...opts.gateway,
        ...(opts.policy !== undefined && { policy: opts.policy as typeof config.policy }),
        backends: servers.map((s) => ({
          url: s.url,
          events: null,
          replay: null,
          model: null,
          apiKey: null,
          ...opts.backend,
        })),
      },
      { logger: makeLogger({ level: 'info', destination, pretty: false }) },
    );
    closers.push(() => gw.close());
    type Replica = { engine: string | null; tokenizer: string; reportedAtMs: number | null };
    const replicasNow = async (): Promise<Replica[]> => {
      const res = await fetch(`${gw.url}/router/replicas`);
      return ((await res.json()) as { replicas: Replica[] }).replicas;
    };
    // Detected, tokenizers checked and a load report from each, before any request.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const rs = await replicasNow();
      if (rs.every((r) => r.tokenizer !== 'unknown' && r.reportedAtMs !== null)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const modelsRes = await fetch(`${gw.url}/v1/models`);
    const modelId = ((await modelsRes.json()) as { data: { id: string }[] }).data[0]?.id ?? 'tiny';
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'none', maxRetries: 0 });
    const requests: RequestFigures[] = [];
    const questions = ['Where is my order?', 'How do refunds work?', 'Change my plan.', 'Help.'];
    await Promise.all(
      Array.from({ length: customers }, async (_, customer) => {
        const system = systemPrompt(customer, opts.systemWords ?? 600);
        for (let i = 0; i < perCustomer; i++) {
          const reqId = `c${customer}-r${i}`;
          const completion = await client.chat.completions.create(
            {
              model: modelId,
              messages: [
                { role: 'system', content: system },
                { role: 'user', content: `${questions[i % questions.length]} (${i})` },
              ],
              max_tokens: 8,
              temperature: 0,
            },
            { headers: { 'x-request-id': reqId } },
          );
          const timings = (completion as unknown as { timings?: { cache_n?: number } }).timings;
          const usage = completion.usage;
          const real = timings?.cache_n ?? usage?.prompt_tokens_details?.cached_tokens ?? 0;
          // The access line is written when the response closes: wait for it.
          let line: Line | undefined;
          for (let t = 0; t < 100 && !line; t++) {
            line = lines.find((l) => l.msg === 'request' && l.reqId === reqId);
            if (!line) await new Promise((r) => setTimeout(r, 10));
          }
          requests.push({
            customer,
            replica: (line?.replica as string | null) ?? null,
            predictedTokens: (line?.cachedTokens as number | null) ?? 0,
            realTokens: real,
            promptTokens: usage?.prompt_tokens ?? 0,
            routerPromptTokens: (line?.promptTokens as number | null) ?? null,
            answer: completion.choices[0]?.message.content ?? '',
          });
        }
      }),
    );
    const replicas = await replicasNow();
    const sum = (f: (r: RequestFigures) => number) => requests.reduce((a, r) => a + f(r), 0);
    const predicted = sum((r) => r.predictedTokens);
    const served = sum((r) => Math.min(r.predictedTokens, r.realTokens));
    return {
      policy: opts.policy ?? config.policy,
      cacheRam: opts.cacheRamMiB !== undefined ? String(opts.cacheRamMiB) : 'default',
      requests,
      predictedHitsReal: predicted === 0 ? 1 : served / predicted,
      predictedTokens: predicted,
      realReuse:
        sum((r) => r.realTokens) /
        Math.max(
          1,
          sum((r) => r.promptTokens),
        ),
      unpredictedHitRequests: requests.filter(
        (r) => r.realTokens > r.predictedTokens + config.blockSize,
      ).length,
      mismatchLines: lines.filter((l) => String(l.msg).includes('TOKENIZER MISMATCH')).length,
      engines: replicas.map((r) => r.engine),
      replicasWithLoad: replicas.filter((r) => r.reportedAtMs !== null).length,
      replicas: replicas.length,
      mismatches: lines.filter((l) => String(l.msg).includes('TOKENIZER MISMATCH')),
    };
  } finally {
    for (const close of closers.reverse()) await close().catch(() => {});
  }
}
