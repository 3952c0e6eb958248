/**
 * The generate path of `/v1/completions` and `/v1/chat/completions`: authenticate, read and
 * tokenize, route, proxy, and keep the router's ledger true to what happened. A backend that
 * refuses or resets before any byte reached the client is marked down and the request goes to
 * the next best replica, a bounded number of times; but a kept-alive connection the replica
 * closed under the request (`reconnect.ts`) is first tried once more on a fresh connection to
 * the same replica, which keeps its place and its cache in the router. So does a backend that sends nothing, not
 * even a status line, within the first-byte timeout: a live engine answers a stream's head at
 * once, so a streamed attempt is retried elsewhere at once while the silent replica is probed
 * (a probe that times out marks it down); a non-streamed answer comes only when generated, so
 * that attempt is given up only when the probe fails. The request's `model` picks the pool
 * (`src/serving/pools.ts`): its router, its tokenizer and, for a LoRA adapter, the replicas that serve it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../openai/errors.ts';
import { asObject, optString } from '../openai/fields.ts';
import { parseJson, readBody } from '../openai/http.ts';
import type { Endpoint } from '../openai/request.ts';

import { auditable, auditResponse } from '../serving/audit/observe.ts';
import { requestUsage, type UsageRequest } from '../serving/audit/streamUsage.ts';
import { UsageTap } from '../serving/audit/usageTap.ts';
import { type Caller, TENANT_HEADER } from '../serving/auth.ts';
import type { Backend } from '../serving/backends.ts';
import { EngineFieldsTap } from '../serving/engineFields.ts';
import {
  FlowCancelled,
  type FlowControl,
  type FlowPass,
  PRIORITY_HEADER,
} from '../serving/flowControl.ts';

import { handlePdGenerate, isPdPool } from './pd/handler.ts';

import type { ModelPool, PoolRoute } from '../serving/pool.ts';

import type { RouteDecision } from '../router/index.ts';
import { type AttemptHooks, type AttemptOutcome, proxyToBackend } from './proxy.ts';
import { chainTaps, type ResponseTap } from '../serving/responseTap.ts';

import { type ParsedRequest, parseRequest } from '../serving/request.ts';
import { sessionKey } from './sessionKey.ts';
import { outputTokensOf } from '../serving/planner.ts';
import { REQUEST_ID_HEADER, type RequestRecord } from '../serving/requestLog.ts';
import type { GenerateContext } from './generateContext.ts';
import { REPLICA_HEADER, routeWithRoom, resolveModel } from '../serving/routing.ts';

export async function handleGenerate(
  ctx: GenerateContext,
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  record: RequestRecord,
): Promise<void> {
  const arrivedMs = performance.now();
  const arrivedAtMs = Date.now();
  ctx.metrics.watchRequest(endpoint, res, record, arrivedMs);
  const read = await readAndAdmit(ctx, endpoint, req, res, record);
  const { pool, parsed, caller, adapter } = read;
  const id = ctx.nextLedgerId();
  /** The replica flow control's finish-first chose; null: the router chooses. */
  let onto: string | null = null;
  if (ctx.flow && read.priorityClass !== undefined) {
    const queued = {
      id,
      tenant: caller.tenant,
      priorityClass: read.priorityClass,
      costTokens: parsed.promptTokens,
      prefix: { blockKeys: parsed.blockKeys, blockSize: ctx.blockSize },
    };
    const pass = await waitForRoom(ctx, ctx.flow, pool, queued, req, res, record);
    if (pass === null) return;
    onto = pass.replica;
  }
  const reqId = record.id;
  if (ctx.pd && isPdPool(pool)) {
    return handlePdGenerate(ctx, ctx.pd, {
      pool,
      parsed,
      body: read.body,
      tenant: caller.tenant,
      adapter,
      req,
      res,
      record,
      arrivedMs,
      id,
      blockSize: ctx.blockSize,
      onto,
      headersFor: (backend) => upstreamHeaders(ctx, backend, req, reqId),
    });
  }
  // The audit reads each response's cached tokens; a stream is asked for its usage if need be.
  const audited = auditable(read.json);
  await proxyWithRetries({
    ctx,
    req,
    res,
    record,
    read,
    id,
    onto,
    arrivedMs,
    arrivedAtMs,
    session: ctx.sessionHeader == null ? undefined : sessionKey(req, ctx.sessionHeader, read.json),
    audited,
    usage: audited
      ? requestUsage(read.body, read.json)
      : { body: read.body, asked: false, reports: false },
  });
}

/** A generate request read, tokenized and admitted: what routing and proxying need of it. */
interface AdmittedGenerate {
  caller: Caller;
  json: unknown;
  pool: ModelPool;
  adapter: string | null;
  parsed: ParsedRequest;
  /** The body to send on (admission may set its priority). */
  body: Buffer;
  /** Its flow-control class; undefined: flow control off. */
  priorityClass: ReturnType<FlowControl['classOf']> | undefined;
}

/** Authenticates, reads, resolves the pool, tokenizes and admits (tenant limits, 429s). */
async function readAndAdmit(
  ctx: GenerateContext,
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  record: RequestRecord,
): Promise<AdmittedGenerate> {
  const tenantHeader = req.headers[TENANT_HEADER];
  const caller = ctx.auth.authenticate(
    req.headers.authorization,
    Array.isArray(tenantHeader) ? tenantHeader[0] : tenantHeader,
  );
  record.tenant = caller.tenant;
  const raw = await readBody(req, ctx.bodyLimitBytes);
  const json = parseJson(raw);
  record.model = optString(asObject(json), 'model');
  // The model picks the pool, whose tokenizer reads the prompt; an adapter keys its own blocks.
  // Known models resolve at once; only an unknown one waits on the backends (and its errors).
  const { pool, adapter } =
    ctx.pools.known(record.model) ?? (await resolveModel(ctx, endpoint, json, record.model));
  const parsed = await parseRequest(endpoint, raw, {
    tokenizer: pool.requestTokenizer,
    blockSize: ctx.blockSize,
    tenantSalt: caller.tenantSalt,
    maxModelLen: pool.maxModelLen(),
    loraName: adapter,
    json,
  });
  record.promptTokens = parsed.promptTokens;
  const priorityHeader = req.headers[PRIORITY_HEADER];
  const priorityClass = ctx.flow?.classOf(
    Array.isArray(priorityHeader) ? priorityHeader[0] : priorityHeader,
    caller.tenant,
  );
  const admitted = ctx.admission.admit(
    {
      tenant: caller.tenant,
      promptTokens: parsed.promptTokens,
      priority: parsed.priority,
      body: parsed.body,
      queues() {
        return pool.queues(Date.now());
      },
    },
    Date.now(),
  );
  res.once('close', admitted.release);
  return { caller, json, pool, adapter, parsed, body: admitted.body, priorityClass };
}

/**
 * Every replica of the pool saturated: wait here (flowControl.ts), not on an engine. The pass
 * it left with; null when the client left while queued (its connection is then closed).
 */
async function waitForRoom(
  ctx: GenerateContext,
  flow: FlowControl,
  pool: ModelPool,
  queued: Parameters<FlowControl['enter']>[1],
  req: IncomingMessage,
  res: ServerResponse,
  record: RequestRecord,
): Promise<FlowPass | null> {
  // The server finishes answering half-closed clients (`createHttpServer`), so a client that
  // leaves shows only as the end of its side of the connection: while queued, that is leaving.
  const left = new AbortController();
  const onClose = (): void => left.abort();
  const { socket } = req;
  res.once('close', onClose);
  socket.once('end', onClose);
  if (socket.destroyed || socket.readableEnded) left.abort();
  try {
    const entered = flow.enter(pool, queued, left.signal);
    // Not awaited when it goes at once: it routes in this turn, seen by the next arrival.
    return entered instanceof Promise ? await entered : entered;
  } catch (err) {
    if (!(err instanceof FlowCancelled)) throw err;
    ctx.metrics.clientAborts.inc();
    ctx.logger.debug({ reqId: record.id }, 'the client left while its request was queued');
    // Its half of the connection is closed too: a client that only half-closed is not left
    // waiting on an answer that will not come.
    socket.destroy();
    return null;
  } finally {
    res.off('close', onClose);
    socket.off('end', onClose);
  }
}

/** One generate request on its way to the replicas: what each attempt reads. */
interface GenerateFlight {
  ctx: GenerateContext;
  req: IncomingMessage;
  res: ServerResponse;
  record: RequestRecord;
  read: AdmittedGenerate;
  /** The ledger's id. */
  id: string;
  /** The replica flow control's finish-first chose (its first attempt goes there); null: none. */
  onto: string | null;
  arrivedMs: number;
  arrivedAtMs: number;
  session: string | undefined;
  /** The audit reads the responses' usage. */
  audited: boolean;
  usage: UsageRequest;
}

/** Routes and proxies, retrying on the next best replica, a bounded number of times. */
async function proxyWithRetries(flight: GenerateFlight): Promise<void> {
  const { ctx, record } = flight;
  const { metrics, logger } = ctx;
  const reqId = record.id;
  let lastError: Error | null = null;
  /** Replicas that went silent on this request: not tried again for it. */
  const avoid: string[] = [];
  for (let attempt = 0; attempt <= ctx.maxRetries; attempt++) {
    const { outcome, backend } = await proxyOnce(flight, attempt, avoid);
    switch (outcome.kind) {
      case 'unreachable':
      case 'silent':
        lastError = outcome.error;
        if (outcome.kind === 'unreachable')
          flight.read.pool.markDown(backend, outcome.error.message);
        else avoid.push(backend.name);
        if (attempt < ctx.maxRetries) {
          metrics.retries.inc();
          logger.warn(
            { reqId, replica: backend.name, attempt: attempt + 1, err: outcome.error },
            'attempt failed before any byte reached the client; retrying on another replica',
          );
        }
        continue;
      case 'completed':
        return;
      case 'client-gone':
        metrics.clientAborts.inc();
        return;
      case 'broken':
        metrics.brokenStreams.inc();
        logger.warn(
          { reqId, replica: backend.name, err: outcome.error },
          'backend failed mid-response; the client got an error event',
        );
        return;
    }
  }
  throw new ApiError(
    'ERR_NO_HEALTHY_BACKEND',
    `no backend answered after ${ctx.maxRetries + 1} attempts: ${lastError?.message ?? 'unknown error'}`,
    null,
    { cause: lastError },
  );
}

/** One attempt: route (avoiding the replicas given), proxy, then tell the pool, planner and audit. */
async function proxyOnce(
  flight: GenerateFlight,
  attempt: number,
  avoid: string[],
): Promise<{ outcome: AttemptOutcome; backend: Backend }> {
  const { ctx, req, res, record, id } = flight;
  const { pool, parsed, caller, adapter } = flight.read;
  const startedMs = performance.now();
  const route = routeWithRoom(
    pool,
    {
      id,
      blockKeys: parsed.blockKeys,
      promptTokens: parsed.promptTokens,
      blockSize: ctx.blockSize,
      ...(caller.tenant !== null && { tenant: caller.tenant }),
      ...(avoid.length > 0 && { avoid }),
      ...(adapter !== null && { lora: adapter }),
      ...(flight.session !== undefined && { session: flight.session }),
    },
    ctx.flow,
    attempt === 0 ? flight.onto : null,
  );
  const { decision, backend } = route;
  ctx.metrics.recordDecision(decision, (performance.now() - startedMs) / 1000, pool.model);
  if (attempt === 0) {
    try {
      ctx.admission.checkRoute(decision, caller.tenant);
    } catch (err) {
      pool.finish(route, Date.now());
      throw err;
    }
  }
  record.attempts = attempt + 1;
  record.replica = decision.replica;
  record.cachedTokens = decision.cachedTokens;

  if (!parsed.stream) pool.watchPrefill(route, parsed.blockKeys);
  record.preUpstreamMs ??= performance.now() - flight.arrivedMs;
  const hitsAtRoute = pool.audit.hitsNow(decision.replica);
  const watch = new AttemptWatch(flight, route);
  const outcome = await proxyToBackend(
    backend,
    {
      path: req.url ?? '/',
      body: flight.usage.body,
      headers: upstreamHeaders(ctx, backend, req, record.id),
      replyHeaders: { [REPLICA_HEADER]: ctx.labels.of(backend.name) },
    },
    res,
    () => watch.hooks(),
    (err) => {
      // The engine never saw the request: the replica keeps its place and its cache.
      ctx.metrics.upstreamReconnects.inc();
      ctx.logger.debug(
        { reqId: record.id, replica: backend.name, err },
        'kept-alive connection closed under the request; sent again on a fresh connection',
      );
    },
  );
  pool.finish(route, Date.now());
  if (outcome.kind === 'completed' && outcome.status < 400) {
    reportServed(flight, decision, watch, hitsAtRoute);
  }
  return { outcome, backend };
}

/** A response served whole and not refused: the planner and the cache audit are told. */
function reportServed(
  flight: GenerateFlight,
  decision: RouteDecision,
  watch: AttemptWatch,
  hitsAtRoute: number | undefined,
): void {
  const { ctx } = flight;
  const { pool, parsed } = flight.read;
  const usageTap = watch.usageTap;
  if (ctx.planner) {
    ctx.planner.observe(pool.model, {
      atMs: flight.arrivedAtMs,
      promptTokens: parsed.promptTokens,
      outputTokens: outputTokensOf(usageTap?.completionTokens ?? null, flight.read.json),
      blockKeys: parsed.blockKeys,
    });
  }
  if (usageTap) {
    auditResponse(
      pool,
      ctx.metrics,
      decision,
      parsed.promptTokens,
      usageTap.cachedTokens,
      hitsAtRoute,
      watch.ttftMs,
    );
  }
}

/**
 * One attempt's response hooks and what they saw: its usage tap and, for a stream, its time to
 * first token from the send (a JSON answer's first byte comes after its last token: not a
 * prefill time), for the audit's speed test.
 */
class AttemptWatch {
  usageTap: UsageTap | undefined;
  ttftMs: number | null = null;
  #sentMs = performance.now();
  readonly #flight: GenerateFlight;
  readonly #route: PoolRoute;

  constructor(flight: GenerateFlight, route: PoolRoute) {
    this.#flight = flight;
    this.#route = route;
  }

  // Hooks are methods, not arrow functions: the TypeScript loader names each arrow function
  // with a property definition every time one is made (esbuild's keepNames).
  hooks(): AttemptHooks {
    const watch = this;
    const { ctx, record, arrivedMs, audited, usage } = this.#flight;
    const { pool, parsed } = this.#flight.read;
    const route = this.#route;
    const { backend } = route;
    // A fresh tap per attempt: a reconnect starts the response over.
    this.#sentMs = performance.now();
    this.usageTap = audited
      ? new UsageTap({ stream: parsed.stream, strip: usage.asked })
      : undefined;
    // The engine's transfer fields never reach the client (engineFields.ts).
    const tap: ResponseTap = this.usageTap
      ? chainTaps(this.usageTap, new EngineFieldsTap())
      : new EngineFieldsTap();
    return {
      onFirstToken() {
        if (parsed.stream) watch.ttftMs ??= performance.now() - watch.#sentMs;
        record.ttftMs ??= performance.now() - arrivedMs;
        pool.firstToken(route, Date.now());
      },
      firstByteTimeoutMs: ctx.firstByteTimeoutMs,
      tap,
      async onSilence() {
        ctx.logger.warn(
          { reqId: record.id, replica: backend.name, timeoutMs: ctx.firstByteTimeoutMs },
          'no response byte within the first-byte timeout; probing the replica',
        );
        if (!parsed.stream) return !(await pool.probe(backend));
        void pool.probe(backend);
        return true;
      },
    };
  }
}

/**
 * The backend's own key when it has one; otherwise the client's header goes through, unless the
 * gateway checked it itself (then it is the gateway's secret, not the backend's).
 */
function upstreamHeaders(
  ctx: GenerateContext,
  backend: Backend,
  req: IncomingMessage,
  requestId: string,
): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    [REQUEST_ID_HEADER]: requestId,
  };
  if (backend.config.apiKey) headers.authorization = `Bearer ${backend.config.apiKey}`;
  else if (!ctx.auth.required && req.headers.authorization) {
    headers.authorization = req.headers.authorization;
  }
  const accept = req.headers.accept;
  if (accept) headers.accept = accept;
  return headers;
}
