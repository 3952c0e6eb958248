/**
 * The NIXL side channel, modelled over HTTP on the engine's own port (vLLM's listens on
 * VLLM_NIXL_SIDE_CHANNEL_PORT, 5600, and moves the bytes over UCX; here `remote_port` is the
 * engine's HTTP port and the bytes are a modelled wait). Two calls, as a NIXL read and its
 * notification:
 *
 * - `POST /nixl/pull {engine_id, request_id, block_ids}`: are the blocks still held here? 200
 *   `{blocks}`, or 404 when they are gone (pulled, expired, or never held), 409 for another
 *   engine's id.
 * - `POST /nixl/done {request_id, block_ids}`: the consumer has them; the producer frees them
 *   (vLLM's notification). 200 `{released}`; `released: false` means they were gone before the
 *   transfer ended, and the consumer computes the prompt itself.
 */
import type { ServerResponse } from 'node:http';
import { badRequest } from '../../openai/errors.ts';
import { sendJson } from '../../openai/http.ts';

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

export function handlePull(
  engine: TransferEngine,
  engineId: string,
  raw: unknown,
  res: ServerResponse,
): void {
  const call = readCall(raw);
  if (call.engineId !== null && call.engineId !== engineId) {
    sendJson(res, 409, { error: `engine ${engineId} is not ${call.engineId}` });
    return;
  }
  if (!engine.isTransferHeld(call.requestId, call.blockIds)) {
    sendJson(res, 404, { error: `no blocks held for ${call.requestId}` });
    return;
  }
  sendJson(res, 200, { blocks: call.blockIds.length });
}

export function handleDone(engine: TransferEngine, raw: unknown, res: ServerResponse): void {
  const call = readCall(raw);
  sendJson(res, 200, { released: engine.releaseTransfer(call.requestId, call.blockIds) });
}

/** Consumer side: one side-channel call; false on any failure (refused, gone, timed out). */
export async function sideCall(
  host: string,
  port: number,
  path: string,
  body: Record<string, unknown>,
): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(`http://${hostForUrl(host)}:${port}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(SIDE_CHANNEL_TIMEOUT_MS),
    });
    const json = (await res.json()) as Record<string, unknown>;
    return res.ok ? json : null;
  } catch {
    return null;
  }
}

const hostForUrl = (host: string): string => (host.includes(':') ? `[${host}]` : host);
