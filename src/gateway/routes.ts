/**
 * The gateway's HTTP edge: which path does what, and every error thrown on the way answered in
 * the shared OpenAI shape. The generate path lives in `generate.ts`; the rest are small reads of
 * the router and the backends.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { findRoute, type Method, sendError, sendJson } from '../openai/http.ts';
import { handleBackends } from './admin.ts';
import { toApiError } from '../serving/errors.ts';
import { handleGenerate } from './generate.ts';
import type { GenerateContext } from './generateContext.ts';
import {
  logAccessWhenDone,
  newRecord,
  REQUEST_ID_HEADER,
  type RequestRecord,
  requestIdOf,
} from '../serving/requestLog.ts';

interface Route {
  method: Method | readonly Method[];
  handle(req: IncomingMessage, res: ServerResponse, record: RequestRecord): void | Promise<void>;
}

export interface RoutesContext {
  generate: GenerateContext;
  /** `/router/replicas`: the routers' snapshots with each backend's wiring. */
  replicaState(): unknown;
  /** One log line per request (a config reload may turn it on or off). */
  accessLog: boolean;
  /** More paths (the dashboard's), served as the table's own. */
  extraRoutes?: Record<string, Route>;
}

/** The gateway's paths: the OpenAI API, health and readiness, metrics, admin, and `extraRoutes`. */
function gatewayRoutes(ctx: RoutesContext): Record<string, Route> {
  const { generate } = ctx;
  // The authenticator is read per request: a config reload replaces it.
  const { metrics } = generate;
  return {
    '/v1/completions': {
      method: 'POST',
      handle: (req, res, record) => handleGenerate(generate, 'completions', req, res, record),
    },
    '/v1/chat/completions': {
      method: 'POST',
      handle: (req, res, record) => handleGenerate(generate, 'chat', req, res, record),
    },
    // Liveness: 200 while the process serves HTTP, whatever its backends do.
    '/health': {
      method: 'GET',
      handle: (_req, res) => {
        res.writeHead(200, { 'content-length': 0 });
        res.end();
      },
    },
    // Readiness: 200 once every model has a healthy backend; 503 (and which models) until then.
    '/ready': {
      method: 'GET',
      handle: (_req, res) => {
        const { ready, notReady } = generate.pools.readiness();
        if (ready) sendJson(res, 200, { status: 'ready' });
        else sendJson(res, 503, { status: 'not ready', models: notReady });
      },
    },
    '/v1/models': {
      method: 'GET',
      handle: async (req, res) => {
        generate.auth.authenticate(req.headers.authorization, undefined);
        sendJson(res, 200, { object: 'list', data: await generate.pools.listModels() });
      },
    },
    '/metrics': {
      method: 'GET',
      handle: async (req, res) => {
        generate.auth.authorizeMetrics(req.headers.authorization);
        const text = await metrics.registry.metrics();
        res.writeHead(200, { 'content-type': metrics.registry.contentType });
        res.end(text);
      },
    },
    '/router/replicas': {
      method: 'GET',
      handle: (req, res) => {
        generate.auth.authorizeAdmin(req.headers.authorization);
        sendJson(res, 200, ctx.replicaState());
      },
    },
    '/router/backends': {
      method: ['GET', 'POST', 'DELETE'],
      handle: (req, res) => handleBackends(generate, req, res),
    },
    ...ctx.extraRoutes,
  };
}

/** The request listener of the gateway's HTTP server. */
export function makeRequestListener(
  ctx: RoutesContext,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { logger } = ctx.generate;
  const routes = gatewayRoutes(ctx);
  const serve = async (
    req: IncomingMessage,
    res: ServerResponse,
    record: RequestRecord,
  ): Promise<void> => findRoute(routes, req, res).handle(req, res, record);
  return (req, res) => {
    const startedMs = performance.now();
    const record = newRecord(requestIdOf(req));
    res.setHeader(REQUEST_ID_HEADER, record.id);
    if (ctx.accessLog) logAccessWhenDone(logger, req, res, record, startedMs);
    serve(req, res, record).catch((err: unknown) => {
      const apiError = toApiError(err);
      if (apiError.status >= 500) {
        logger[apiError.code === 'ERR_INTERNAL' ? 'error' : 'warn'](
          { reqId: record.id, path: req.url, status: apiError.status, code: apiError.code, err },
          apiError.message,
        );
      }
      sendError(res, apiError);
    });
  };
}
