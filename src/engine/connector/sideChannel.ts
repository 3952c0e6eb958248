/**
 * The NIXL side channel, modelled over HTTP on the engine's own port (vLLM's listens on
 * VLLM_NIXL_SIDE_CHANNEL_PORT, 5600, and moves the bytes over UCX; here `remote_port` is the
 * engine's HTTP port and the bytes are a modelled wait). Two calls, as a NIXL read and its
 * notification:
 *
 * - `POST /nixl/pull {engine_id, request_id, block_ids}`: are the blocks still held here? 200
 *   `{blocks}`.
 * - `POST /nixl/done {engine_id, request_id, block_ids}`: the consumer has them; the producer
 *   frees them (vLLM's notification). 200 `{released: true}`.
 *
 * `request_id` is the prefiller's random handle (handles.ts), not its request id. Every refusal
 * (an unknown handle, blocks gone or not the ones held, another engine's id) is the same 404 with
 * a body that names nothing, so the side channel cannot be used to learn ids or probe for holds.
 * With a shared secret (secret.ts) a call needs `Authorization: Bearer SECRET`, else 401.
 * With none, the side channel is closed (every call 403) unless `--kv-transfer-insecure` opens it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { badRequest } from '../../openai/errors.ts';
import { sendJson } from '../../openai/http.ts';
import { UNAUTHORIZED_BODY } from '../server/auth.ts';
import type { TransferHandles } from './handles.ts';
import type { TransferSecret } from './secret.ts';

/** What the side channel needs of the engine core (EngineCore has it). */
export interface TransferEngine {
  releaseTransfer(requestId: string, blockIds?: readonly number[]): boolean;
  isTransferHeld(requestId: string, blockIds?: readonly number[]): boolean;
  expireTransfers(nowMs: number): number;
  externalTokensOf(id: string): number;
}

export function isTransferEngine(core: object): core is TransferEngine {
  const c = core as Partial<TransferEngine>;
  return (
    typeof c.releaseTransfer === 'function' &&
    typeof c.isTransferHeld === 'function' &&
    typeof c.expireTransfers === 'function' &&
    typeof c.externalTokensOf === 'function'
  );
}

export const PULL_PATH = '/nixl/pull';
export const DONE_PATH = '/nixl/done';
/** A side-channel call that takes longer than this has failed (the consumer recomputes). */
export const SIDE_CHANNEL_TIMEOUT_MS = 2_000;

interface SideCall {
  requestId: string;
  blockIds: number[];
  engineId: string | null;
}

function readCall(raw: unknown): SideCall {
  const b = (raw ?? {}) as Record<string, unknown>;
  if (typeof b.request_id !== 'string')
    throw badRequest("'request_id' must be a string", 'request_id');
  const ids = b.block_ids;
  if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x) && x >= 0)) {
    throw badRequest("'block_ids' must be a list of block ids", 'block_ids');
  }
  const engineId = typeof b.engine_id === 'string' ? b.engine_id : null;
  return { requestId: b.request_id, blockIds: ids as number[], engineId };
}

/** The one refusal: names neither the handle nor the engine. */
const NOT_FOUND = { error: 'Not Found' };

/** What a side-channel handler needs: the engine, its handles and its id. */
export interface SideChannel {
  engine: TransferEngine;
  handles: TransferHandles;
  engineId: string;
}

/** The engine request whose blocks the call names exactly, or null (answered 404). */
function heldOf(s: SideChannel, call: SideCall, res: ServerResponse): string | null {
  const id = s.handles.resolve(call.requestId);
  const ok =
    id !== undefined &&
    (call.engineId === null || call.engineId === s.engineId) &&
    s.engine.isTransferHeld(id, call.blockIds);
  if (ok) return id;
  sendJson(res, 404, NOT_FOUND);
  return null;
}

export function handlePull(s: SideChannel, raw: unknown, res: ServerResponse): void {
  const call = readCall(raw);
  if (heldOf(s, call, res) === null) return;
  sendJson(res, 200, { blocks: call.blockIds.length });
}

export function handleDone(s: SideChannel, raw: unknown, res: ServerResponse): void {
  const call = readCall(raw);
  const id = heldOf(s, call, res);
  if (id === null) return;
  s.handles.forget(call.requestId);
  sendJson(res, 200, { released: s.engine.releaseTransfer(id, call.blockIds) });
}

/** A closed side channel's one answer, to every call (no secret and not insecure). */
export const CLOSED_BODY = JSON.stringify({ error: 'Forbidden' });

/**
 * Whether a request may go on: a side-channel call without the secret (when there is one) is
 * answered 401 here, with vLLM's body; on a closed side channel (`closed`: no secret and no
 * `--kv-transfer-insecure`) every call is answered 403, whatever it carries.
 */
export function admitSideChannel(
  secret: TransferSecret | null,
  closed: boolean,
  req: IncomingMessage,
  res: ServerResponse,
): boolean {
  const path = (req.url ?? '/').split('?')[0]!;
  if (path !== PULL_PATH && path !== DONE_PATH) return true;
  if (closed) {
    res.writeHead(403, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(CLOSED_BODY),
    });
    res.end(CLOSED_BODY);
    return false;
  }
  if (secret === null) return true;
  if (secret.admits(req.headers.authorization)) return true;
  res.writeHead(401, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(UNAUTHORIZED_BODY),
  });
  res.end(UNAUTHORIZED_BODY);
  return false;
}

/** Consumer side: one side-channel call; false on any failure (refused, gone, timed out). */
export async function sideCall(
  host: string,
  port: number,
  path: string,
  body: Record<string, unknown>,
  authorization: string | null,
): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(`http://${hostForUrl(host)}:${port}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(authorization !== null && { authorization }),
      },
      body: JSON.stringify(body),
      // A prefiller answers itself; a redirect would send the pull (and the secret) elsewhere.
      redirect: 'error',
      signal: AbortSignal.timeout(SIDE_CHANNEL_TIMEOUT_MS),
    });
    const json = (await res.json()) as Record<string, unknown>;
    return res.ok ? json : null;
  } catch {
    return null;
  }
}

const hostForUrl = (host: string): string => (host.includes(':') ? `[${host}]` : host);
