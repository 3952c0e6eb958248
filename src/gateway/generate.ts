/**
 * The generate path of `/v1/completions` and `/v1/chat/completions`: authenticate, read and
 * tokenize, route, proxy, and keep the router's ledger true to what happened. A backend that
 * refuses or resets before any byte reached the client is marked down and the request goes to
 * the next best replica, a bounded number of times.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../openai/errors.ts';
import { readBody } from '../openai/http.ts';
import type { Endpoint } from '../openai/request.ts';
import type { Router } from '../router/index.ts';
import { type Authenticator, TENANT_HEADER } from './auth.ts';
import type { Backend } from './backends.ts';
import type { GatewayMetrics } from './metrics.ts';
import { proxyAttempt } from './proxy.ts';
import { parseRequest, type RequestTokenizer } from './request.ts';

/** Names the replica that served a response, as llm-d's gateway names its destination. */
export const REPLICA_HEADER = 'x-kvroute-replica';

export interface GenerateContext {
  router: Router;
  backends: readonly Backend[];
  /** Replica name -> backend. */
  byName: ReadonlyMap<string, Backend>;
  auth: Authenticator;
  tokenizer: RequestTokenizer;
  /** The largest context window among the backends (Infinity while none is known). */
  maxModelLen(): number;
  metrics: GatewayMetrics;
  blockSize: number;
  bodyLimitBytes: number;
  maxRetries: number;
  /** A request found this backend unreachable: take it out and start probing it. */
  markDown(backend: Backend, error: Error): void;
  nextRequestId(): string;
}

export async function handleGenerate(
  ctx: GenerateContext,
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const tenantHeader = req.headers[TENANT_HEADER];
  const caller = ctx.auth.authenticate(
    req.headers.authorization,
    Array.isArray(tenantHeader) ? tenantHeader[0] : tenantHeader,
  );
  const raw = await readBody(req, ctx.bodyLimitBytes);
  const parsed = await parseRequest(endpoint, raw, {
    tokenizer: ctx.tokenizer,
    blockSize: ctx.blockSize,
    tenantSalt: caller.tenantSalt,
    maxModelLen: ctx.maxModelLen(),
  });
  const id = ctx.nextRequestId();
  const { router, metrics } = ctx;
  let lastError: Error | null = null;

  for (let attempt = 0; attempt <= ctx.maxRetries; attempt++) {
    const startedNs = process.hrtime.bigint();
    const decision = router.route(
      {
        id,
        blockKeys: parsed.blockKeys,
        promptTokens: parsed.promptTokens,
        blockSize: ctx.blockSize,
        ...(caller.tenant !== null && { tenant: caller.tenant }),
      },
      Date.now(),
    );
    metrics.recordDecision(decision, Number(process.hrtime.bigint() - startedNs) / 1e9);

    const backend = ctx.byName.get(decision.replica)!;
    const outcome = await proxyAttempt(
      backend.pool,
      {
        path: req.url ?? '/',
        body: parsed.body,
        headers: upstreamHeaders(ctx, backend, req),
        replyHeaders: { [REPLICA_HEADER]: backend.name },
      },
      res,
      { onFirstToken: () => router.onFirstToken(id, Date.now()) },
    );
    router.onFinished(id, Date.now());
    switch (outcome.kind) {
      case 'unreachable':
        lastError = outcome.error;
        ctx.markDown(backend, outcome.error);
        if (attempt < ctx.maxRetries) metrics.retries.inc();
        continue;
      case 'completed':
        metrics.recordAnswer(endpoint, outcome.status);
        return;
      case 'client-gone':
        metrics.clientAborts.inc();
        return;
      case 'broken':
        metrics.brokenStreams.inc();
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

/**
 * The backend's own key when it has one; otherwise the client's header goes through, unless the
 * gateway checked it itself (then it is the gateway's secret, not the backend's).
 */
function upstreamHeaders(
  ctx: GenerateContext,
  backend: Backend,
  req: IncomingMessage,
): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (backend.config.apiKey) headers.authorization = `Bearer ${backend.config.apiKey}`;
  else if (!ctx.auth.required && req.headers.authorization) {
    headers.authorization = req.headers.authorization;
  }
  const accept = req.headers.accept;
  if (accept) headers.accept = accept;
  return headers;
}
