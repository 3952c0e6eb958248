/**
 * The admin API of the backend set, `/router/backends`:
 * - `GET`: every backend with its model and state (starting, active, down, draining);
 * - `POST {"url", "events", "replay", "model", "api-key"}` (a config `backends` entry): adds a
 *   backend, which starts cold and takes traffic from its first load report on: 202;
 * - `DELETE ?url=URL` or `?name=HOST:PORT`: drains a backend (no new requests, in-flight ones
 *   finish): 202.
 * Reading follows `/router/replicas`' rule; changing needs the admin key (`auth.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, badRequest } from '../openai/errors.ts';
import { parseJson, readBody, sendJson } from '../openai/http.ts';
import { backendFromDoc } from '../serving/config.ts';
import { GatewayError } from '../serving/errors.ts';
import type { GenerateContext } from './generateContext.ts';

/** A backend entry is a few short strings. */
const ADMIN_BODY_LIMIT_BYTES = 64 * 1024;

export async function handleBackends(
  ctx: GenerateContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const authorization = req.headers.authorization;
  if (req.method === 'GET' || req.method === 'HEAD') {
    ctx.auth.authorizeAdmin(authorization);
    sendJson(res, 200, { object: 'list', data: ctx.pools.backends() });
    return;
  }
  ctx.auth.authorizeAdminWrite(authorization);
  if (req.method === 'POST') {
    const doc = parseJson(await readBody(req, ADMIN_BODY_LIMIT_BYTES));
    let config: ReturnType<typeof backendFromDoc>;
    try {
      config = backendFromDoc(doc, 'backend');
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err;
      throw badRequest(err.message.replace(/^config: /, ''), err.param);
    }
    const info = ctx.pools.add(config);
    ctx.logger.info({ replica: info.name, url: info.url }, 'admin API: backend added');
    sendJson(res, 202, { backend: info });
    return;
  }
  const query = new URL(req.url ?? '/', 'http://gateway').searchParams;
  const key = query.get('url') ?? query.get('name');
  if (!key) throw badRequest('name the backend to remove: ?url=URL or ?name=HOST:PORT', 'url');
  const removed = ctx.pools.remove(key);
  if (!removed) {
    throw new ApiError(
      'ERR_NOT_FOUND',
      `no backend ${key} in the gateway`,
      query.has('url') ? 'url' : 'name',
    );
  }
  ctx.logger.info({ replica: removed.info.name }, 'admin API: backend removed, draining');
  sendJson(res, 202, { backend: removed.info });
}
