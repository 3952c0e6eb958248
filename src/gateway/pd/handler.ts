/**
 * The generate path of a P/D pool (one with `prefill` or `decode` backends): pick the decode
 * replica by decode load (model/decodePick.ts), let the decider (decider.ts) choose between the decode
 * replica alone and the two legs of vLLM's proxy protocol (protocol.ts): the prefill leg on a
 * prefill replica picked by the pool's policy (its prefill term: queued plus uncached prompt
 * tokens, among the prefill-capable replicas; with flow control on, the replica its pass names,
 * else one with room: legRoute.ts), then the decode leg, whose response streams back
 * byte for byte. Either leg failing before the first byte reached the client goes to the next
 * replica of its pool; with no prefill replica left the request is decoded alone (the decode
 * engine computes the prompt). Headers: `x-kvroute-prefill-replica` (disaggregated only) and
 * `x-kvroute-replica` (the decode replica), each a label unless addresses are exposed
 * (`../../serving/replicaLabels.ts`); no engine's `kv_transfer_params` reaches the client.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../../openai/errors.ts';
import { makeReplicaSpec } from '../../model/spec.ts';
import type { ReplicaSpec } from '../../model/cost.ts';
import type { Backend } from '../../serving/backends.ts';
import type { GenerateContext } from '../generateContext.ts';
import type { ModelPool, PoolRoute } from '../../serving/pool.ts';
import { prefillOnto, routeLeg } from './legRoute.ts';
import { bufferedRequest } from '../bufferedRequest.ts';
import { EngineFieldsTap, stripEngineFields } from '../../serving/engineFields.ts';
import { type AttemptOutcome, proxyToBackend } from '../proxy.ts';
import type { ParsedRequest } from '../../serving/request.ts';
import type { RequestRecord } from '../../serving/requestLog.ts';
import { decidePd, type PdPath } from './decider.ts';
import { type DecodeCandidate, pickDecode } from '../../model/decodePick.ts';
import type { PdMetrics } from './metrics.ts';
import { decodeLegBody, type JsonObject, prefillLegBody, transferParamsOf } from './protocol.ts';
import { canDecode, canPrefill } from '../../serving/pdRoles.ts';
import type { PdContext } from '../generateContext.ts';

export const PREFILL_REPLICA_HEADER = 'x-kvroute-prefill-replica';
/** The engine's step budget the TPOT model assumes for mixed steps (vLLM's default 2,048). */
const DECODE_MODEL_BUDGET_TOKENS = 2048;

export function makePdContext(
  o: { thresholdTokens: number; kvThreshold: number; spec?: ReplicaSpec },
  metrics: PdMetrics,
): PdContext {
  return {
    thresholdTokens: o.thresholdTokens,
    metrics,
    spec: o.spec ?? makeReplicaSpec(),
    kvThreshold: o.kvThreshold,
  };
}

/** Whether the pool routes P/D: some backend is prefill-only or decode-only. */
export function isPdPool(pool: ModelPool): boolean {
  return pool.names.some((n) => {
    const role = pool.backendOf(n)?.config.role;
    return role === 'prefill' || role === 'decode';
  });
}

export interface PdRequest {
  pool: ModelPool;
  parsed: ParsedRequest;
  body: Buffer;
  tenant: string | null;
  adapter: string | null;
  req: IncomingMessage;
  res: ServerResponse;
  record: RequestRecord;
  arrivedMs: number;
  id: string;
  blockSize: number;
  /**
   * The replica flow control's pass names (finish-first chose it), which the prefill leg's
   * first attempt goes onto; null: the pool's policy picks.
   */
  onto: string | null;
  headersFor(backend: Backend): Record<string, string>;
}

export async function handlePdGenerate(
  ctx: GenerateContext,
  pd: PdContext,
  r: PdRequest,
): Promise<void> {
  const { pool, parsed, record } = r;
  const model = pool.model ?? '';
  const request = JSON.parse(r.body.toString('utf8')) as JsonObject;
  const avoidDecode: string[] = [];
  let params: JsonObject | null = null;
  let path: PdPath | null = null;
  let prefillName: string | null = null;
  let lastError: Error | null = null;

  for (let attempt = 0; attempt <= ctx.maxRetries; attempt++) {
    const decode = routeDecode(pool, pd, r, avoidDecode);
    if (decode === null) break;
    record.attempts = attempt + 1;
    record.replica = decode.decision.replica;
    if (path === null) {
      path = decidePd(parsed.promptTokens, decode.decision.cachedTokens, pd.thresholdTokens);
      pd.metrics.decisions.inc({ model, path });
      if (path === 'disaggregated') {
        const prefill = await runPrefill(ctx, pd, r, request, model);
        if (prefill.kind === 'answered') {
          // The prefill replica's own refusal (a 4xx) is the client's answer, as sent.
          pool.finish(decode, Date.now());
          r.res.writeHead(prefill.status, {
            'content-type': 'application/json',
            [PREFILL_REPLICA_HEADER]: ctx.labels.of(prefill.replica),
          });
          r.res.end(stripEngineFields(prefill.body));
          return;
        }
        prefillName = prefill.replica;
        params = prefill.params;
        if (params === null)
          pd.metrics.fallbacks.inc({
            model,
            reason: prefill.replica === null ? 'no-prefill-replica' : 'no-params',
          });
      }
    }
    // The decode replica computes no prompt on this path: its ledger entry is past prefill.
    if (path === 'disaggregated' && params !== null) pool.firstToken(decode, Date.now());
    const body = Buffer.from(JSON.stringify(decodeLegBody(request, params)));
    const outcome = await proxyDecode(ctx, r, decode, body, prefillName);
    pool.finish(decode, Date.now());
    switch (outcome.kind) {
      case 'unreachable':
      case 'silent':
        lastError = outcome.error;
        if (outcome.kind === 'unreachable') pool.markDown(decode.backend, outcome.error.message);
        avoidDecode.push(decode.backend.name);
        if (attempt < ctx.maxRetries) pd.metrics.legRetries.inc({ model, leg: 'decode' });
        continue;
      case 'completed':
        return;
      case 'client-gone':
        ctx.metrics.clientAborts.inc();
        return;
      case 'broken':
        ctx.metrics.brokenStreams.inc();
        return;
    }
  }
  throw new ApiError(
    'ERR_NO_HEALTHY_BACKEND',
    `no decode replica answered: ${lastError?.message ?? 'none is healthy'}`,
    null,
    { cause: lastError },
  );
}

/** The decode leg: the request (with the prefill's transfer params, if any) to the decode replica. */
function proxyDecode(
  ctx: GenerateContext,
  r: PdRequest,
  decode: PoolRoute,
  body: Buffer,
  prefillName: string | null,
): Promise<AttemptOutcome> {
  const { pool, parsed, record } = r;
  return proxyToBackend(
    decode.backend,
    {
      path: r.req.url ?? '/',
      body,
      headers: r.headersFor(decode.backend),
      replyHeaders: {
        'x-kvroute-replica': ctx.labels.of(decode.backend.name),
        ...(prefillName !== null && { [PREFILL_REPLICA_HEADER]: ctx.labels.of(prefillName) }),
      },
    },
    r.res,
    () => ({
      onFirstToken: () => {
        record.ttftMs ??= performance.now() - r.arrivedMs;
        pool.firstToken(decode, Date.now());
      },
      firstByteTimeoutMs: ctx.firstByteTimeoutMs,
      // The decode engine's transfer fields, if any, stay here (engineFields.ts).
      tap: new EngineFieldsTap(),
      onSilence: async () => {
        if (!parsed.stream) return !(await pool.probe(decode.backend));
        void pool.probe(decode.backend);
        return true;
      },
    }),
    () => ctx.metrics.upstreamReconnects.inc(),
  );
}

/** The decode replica by decode load, entered in the router's ledger; null when none is left. */
function routeDecode(
  pool: ModelPool,
  pd: PdContext,
  r: PdRequest,
  avoid: readonly string[],
): PoolRoute | null {
  const nowMs = Date.now();
  const replicas = pool.router
    .snapshot(nowMs)
    .replicas.filter(
      (s) => s.healthy && !avoid.includes(s.name) && canDecode(pool.backendOf(s.name)?.config.role),
    );
  const candidates: DecodeCandidate[] = replicas.map((s) => ({
    name: s.name,
    running: s.running,
    kvUsage: s.kvUsage,
    inFlight: s.inFlight,
    decodeRequests: s.decodeRequests,
    queuedPromptTokens: s.queuedPromptTokens,
  }));
  const at = pickDecode(
    candidates,
    pd.spec,
    r.parsed.promptTokens,
    pd.kvThreshold,
    DECODE_MODEL_BUDGET_TOKENS,
  );
  if (at < 0) return null;
  const chosen = candidates[at]!.name;
  return routeLeg(pool, r, `${r.id}:d`, (n) => n !== chosen);
}

type PrefillOutcome =
  | { kind: 'prefilled'; replica: string | null; params: JsonObject | null }
  | { kind: 'answered'; replica: string; status: number; body: Buffer };

/** The prefill leg, on the prefill pool, retried on the next prefill replica before any byte. */
async function runPrefill(
  ctx: GenerateContext,
  pd: PdContext,
  r: PdRequest,
  request: JsonObject,
  model: string,
): Promise<PrefillOutcome> {
  const { pool } = r;
  const body = JSON.stringify(prefillLegBody(request));
  const tried: string[] = [];
  for (let attempt = 0; attempt <= ctx.maxRetries; attempt++) {
    // Flow control's pass names a prefill replica (legRoute.ts says why): the first attempt
    // goes there, as the plain path's does; every attempt avoids the replicas without room.
    const route = routeLeg(
      pool,
      r,
      `${r.id}:p${attempt}`,
      (n) => tried.includes(n) || !canPrefill(pool.backendOf(n)?.config.role),
      ctx.flow,
      prefillOnto(pool, r.onto, attempt),
    );
    if (route === null) break;
    tried.push(route.backend.name);
    r.record.cachedTokens = route.decision.cachedTokens;
    try {
      // A kept-alive socket the replica closed under the leg: once more on a fresh connection
      // to the same replica, which is not marked down and keeps its cache (as the plain path).
      const res = await bufferedRequest(
        route.backend,
        {
          path: r.req.url ?? '/',
          method: 'POST',
          headers: r.headersFor(route.backend),
          body,
          headersTimeout: ctx.firstByteTimeoutMs * 10,
        },
        () => ctx.metrics.upstreamReconnects.inc(),
      );
      const text = res.body;
      pool.firstToken(route, Date.now());
      pool.finish(route, Date.now());
      if (res.statusCode >= 400 && res.statusCode < 500) {
        return {
          kind: 'answered',
          replica: route.backend.name,
          status: res.statusCode,
          body: text,
        };
      }
      if (res.statusCode >= 500) throw new Error(`prefill replica answered ${res.statusCode}`);
      let json: unknown = null;
      try {
        json = JSON.parse(text.toString('utf8'));
      } catch {
        // no params: the decode leg computes the prompt
      }
      return { kind: 'prefilled', replica: route.backend.name, params: transferParamsOf(json) };
    } catch (err) {
      pool.finish(route, Date.now());
      pool.markDown(route.backend, (err as Error).message);
      if (attempt < ctx.maxRetries) pd.metrics.legRetries.inc({ model, leg: 'prefill' });
    }
  }
  return { kind: 'prefilled', replica: null, params: null };
}
