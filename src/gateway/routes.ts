/**
 * The gateway's HTTP edge: which path does what, and every error thrown on the way answered in
 * the shared OpenAI shape. The generate path lives in `generate.ts`; the rest are small reads of
 * the router and the backends.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { findRoute, sendError, sendJson } from '../openai/http.ts';
import { listModels } from './backends.ts';
import { toApiError } from './errors.ts';
import { type GenerateContext, handleGenerate } from './generate.ts';

interface Route {
  method: 'GET' | 'POST';
  handle(req: IncomingMessage, res: ServerResponse): void | Promise<void>;
}

export interface RoutesContext {
  generate: GenerateContext;
  /** `/router/replicas`: the router's snapshot with each backend's wiring. */
  replicaState(): unknown;
}

/** The request listener of the gateway's HTTP server. */
export function makeRequestListener(
  ctx: RoutesContext,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { generate } = ctx;
  const { auth, metrics } = generate;
  const routes: Record<string, Route> = {
    '/v1/completions': {
      method: 'POST',
      handle: (req, res) => handleGenerate(generate, 'completions', req, res),
    },
    '/v1/chat/completions': {
      method: 'POST',
      handle: (req, res) => handleGenerate(generate, 'chat', req, res),
    },
    '/health': {
      method: 'GET',
      handle: (_req, res) => {
        res.writeHead(200, { 'content-length': 0 });
        res.end();
      },
    },
    '/v1/models': {
      method: 'GET',
      handle: async (req, res) => {
        auth.authenticate(req.headers.authorization, undefined);
        sendJson(res, 200, { object: 'list', data: await listModels(generate.backends) });
      },
    },
    '/metrics': {
      method: 'GET',
      handle: async (_req, res) => {
        const text = await metrics.registry.metrics();
        res.writeHead(200, { 'content-type': metrics.registry.contentType });
        res.end(text);
      },
    },
    '/router/replicas': {
      method: 'GET',
      handle: (req, res) => {
        auth.authenticate(req.headers.authorization, undefined);
        sendJson(res, 200, ctx.replicaState());
      },
    },
  };
  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> =>
    findRoute(routes, req, res).handle(req, res);
  return (req, res) => {
    serve(req, res).catch((err: unknown) => sendError(res, toApiError(err)));
  };
}
