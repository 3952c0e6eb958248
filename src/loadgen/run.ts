/**
 * One bench run: a workload's arrivals with real prompts, sent open loop to an
 * OpenAI-compatible endpoint, measured from the client, summarized like a simulator result.
 */
import { setMaxListeners } from 'node:events';
import { Agent, request } from 'undici';
import { type BenchRequest, Collector } from './collect.ts';
import { type BenchProgress, expectedRequests, watchProgress } from './progress.ts';
import type { RequestRecord } from '../results/requestRecord.ts';
import type { LiveRun } from '../results/result.ts';
import { DEFAULT_SLO, type SloTargets } from '../results/slo.ts';
import { buildWorkload, type WorkloadSpec } from '../workload/spec.ts';
import { promptStream } from './prompts.ts';
import { sendOpenLoop } from './sender.ts';
import { buildResult } from './summary.ts';

export interface BenchOptions {
  /** The endpoint (the first of `urls`: its /v1/models names the model). */
  url: string;
  /** Several gateways of one stack, measured as one: requests round robin over them. */
  urls?: readonly string[];
  workload: WorkloadSpec;
  seed: number;
  /** Workload ms of arrivals; undefined: the whole trace, or until `requests`. */
  durationMs: number | undefined;
  /** Send at most this many requests. */
  requests?: number;
  warmupMs: number;
  speedup: number;
  concurrency: number;
  /**
   * Latencies from each request's send rather than its scheduled time (vllm bench's
   * --max-concurrency: a request waiting for a slot has not started).
   */
  timeFromSend?: boolean;
  /** A request not finished this many workload ms after its send is given up (`timeout`). */
  clientTimeoutMs?: number;
  model: string | null;
  apiKey: string | null;
  label: string | null;
  /** Replicas behind the endpoint; null: asked of a kvroute gateway's /router/replicas. */
  replicas: number | null;
  /** The targets the run is judged by; default the router seed's (`DEFAULT_SLO`). */
  slo?: SloTargets;
  /** At the end, every request's outcome in arrival order (`--requests-out`). */
  onRequest?: (r: RequestRecord) => void;
  /** Stops the run early; what completed is still summarized. */
  signal?: AbortSignal;
  /** Polled every 500 ms while the run lasts: the fraction of its requests finished, a status. */
  onProgress?: BenchProgress;
}

/** Block size only shapes the workload's block keys, never arrivals or tokens. */
const KEY_BLOCK_SIZE = 16;

export async function runBench(o: BenchOptions): Promise<LiveRun> {
  const workload = buildWorkload(o.workload, {
    seed: o.seed,
    blockSize: KEY_BLOCK_SIZE,
    durationMs: o.durationMs,
  });
  const collector = new Collector(o.speedup, o.warmupMs);
  const { dispatcher, abort, close } = openClient(o.signal);
  const model = o.model ?? (await discoverModel(o.url, o.apiKey, dispatcher));
  const replicas = o.replicas ?? (await discoverReplicas(o.url, o.apiKey, dispatcher));
  const stopProgress = o.onProgress
    ? watchProgress(collector, expectedRequests(workload, o.requests), o.onProgress)
    : () => undefined;
  const wallStart = performance.now();
  try {
    const stats = await sendOpenLoop(promptStream(workload, o.requests), {
      url: o.url,
      ...(o.urls && { urls: o.urls }),
      model,
      apiKey: o.apiKey,
      dispatcher,
      speedup: o.speedup,
      concurrency: o.concurrency,
      ...(o.timeFromSend && { timeFromSend: true }),
      // Workload ms, as the latencies are: the wall clock runs `speedup` times slower.
      ...(o.clientTimeoutMs !== undefined && { timeoutMs: o.clientTimeoutMs / o.speedup }),
      signal: abort.signal,
      onSent: () => collector.onSent(),
      onDone: (req, scheduledAt, outcome, timedFrom) =>
        collector.onDone(req, scheduledAt, outcome, timedFrom),
    });
    const wallS = (performance.now() - wallStart) / 1000;
    if (o.onRequest) {
      const done = [...collector.requests].sort((a, b) => a.index - b.index);
      for (const r of done) o.onRequest(requestRecord(r, o.label, replicas));
    }
    return buildResult(collector, {
      policy: o.label,
      replicas,
      workload: workload.name,
      durationS: o.durationMs === undefined ? null : o.durationMs / 1000,
      warmupS: o.warmupMs / 1000,
      speedup: o.speedup,
      wallS,
      sendLagMs: stats.sendLagMs,
      slo: o.slo ?? { ...DEFAULT_SLO },
      watchedCustomer: workload.watchedCustomer,
    });
  } finally {
    stopProgress();
    await close();
  }
}

/** A request's outcome with the run's labels, as `--requests-out` writes it. */
function requestRecord(
  r: BenchRequest,
  policy: string | null,
  replicas: number | null,
): RequestRecord {
  return {
    id: r.index,
    policy,
    replicas,
    customer: r.customer,
    arrivalMs: r.arrivalMs,
    replica: r.replica,
    promptTokens: r.promptTokens,
    cachedTokens: r.cachedTokens,
    ttftMs: r.ttftMs,
    tpotMs: r.tpotMs,
    endMs: r.endMs,
    ...(r.error !== null && { error: r.error }),
  };
}

/**
 * A keep-alive HTTP pool for streamed completions and one abort signal that every request in
 * flight listens on, fired by `signal` (Ctrl-C) too; `close` lets go of both.
 */
export function openClient(signal?: AbortSignal): {
  dispatcher: Agent;
  abort: AbortController;
  close(): Promise<void>;
} {
  const dispatcher = new Agent({
    headersTimeout: 0,
    bodyTimeout: 0,
    keepAliveTimeout: 30_000,
    connect: { timeout: 10_000 },
  });
  const abort = new AbortController();
  setMaxListeners(Number.POSITIVE_INFINITY, abort.signal);
  const onAbort = () => abort.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) abort.abort();
  return {
    dispatcher,
    abort,
    async close() {
      signal?.removeEventListener('abort', onAbort);
      await dispatcher.close().catch(() => undefined);
    },
  };
}

/**
 * The served model name from /v1/models, so bench works against any endpoint without
 * --model; null (omit `model`) when the endpoint does not say.
 */
async function discoverModel(
  url: string,
  apiKey: string | null,
  dispatcher: Agent,
): Promise<string | null> {
  return (await discoverModelCard(url, apiKey, dispatcher)).id;
}

/**
 * The first model /v1/models lists: its id and, where the server says (vLLM and kvroute engine
 * do), its context window; nulls when the endpoint does not answer.
 */
export async function discoverModelCard(
  url: string,
  apiKey: string | null,
  dispatcher: Agent,
): Promise<{ id: string | null; maxModelLen: number | null }> {
  try {
    const res = await fetchJson(url, apiKey, dispatcher);
    const card = (res as { data?: { id?: unknown; max_model_len?: unknown }[] } | null)?.data?.[0];
    const len = card?.max_model_len;
    return {
      id: typeof card?.id === 'string' ? card.id : null,
      maxModelLen: typeof len === 'number' && Number.isInteger(len) && len > 0 ? len : null,
    };
  } catch {
    return { id: null, maxModelLen: null };
  }
}

/**
 * Replicas behind a kvroute gateway, from `/router/replicas` (readable without a key unless the
 * gateway has keys; the --api-key is sent); null from any other endpoint or on any failure.
 */
export async function discoverReplicas(
  url: string,
  apiKey: string | null,
  dispatcher: Agent,
): Promise<number | null> {
  try {
    const res = await fetchJson(url, apiKey, dispatcher, '/router/replicas');
    const list = (res as { replicas?: unknown } | null)?.replicas;
    return Array.isArray(list) && list.length > 0 ? list.length : null;
  } catch {
    return null;
  }
}

async function fetchJson(
  url: string,
  apiKey: string | null,
  dispatcher: Agent,
  path = '/v1/models',
): Promise<unknown> {
  const res = await request(`${url}${path}`, {
    dispatcher,
    headers: apiKey === null ? {} : { authorization: `Bearer ${apiKey}` },
    headersTimeout: 5_000,
    bodyTimeout: 5_000,
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    return null;
  }
  return res.body.json();
}
