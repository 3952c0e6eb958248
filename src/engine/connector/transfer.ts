/**
 * One request of the P/D protocol on the engine server, around `serveGeneration`:
 *
 * - prefill (`do_remote_decode`): served as usual, with the engine request marked
 *   'remote-decode' so its blocks stay held when it ends; the JSON answer carries the
 *   prefiller's `kv_transfer_params` (params.ts).
 * - decode (`do_remote_prefill`): asks the prefiller's side channel whether the blocks are held,
 *   waits the modelled transfer (`transferMs`, over the speedup), tells the prefiller it is done,
 *   then serves the request with the blocks written into the pool. When the blocks are gone, or
 *   the prefiller does not answer, the prompt is computed here (vLLM's recompute fallback).
 *   With a shared secret, params whose `kvroute_mac` does not verify are the request's 400,
 *   before any call goes out: the engine never contacts a host a client named.
 * - With neither a secret nor `--kv-transfer-insecure` (a closed side channel), a prefill is
 *   answered with `kv_transfer_params: null` and holds nothing, and a decode computes its prompt
 *   without contacting anyone.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { badRequest } from '../../openai/errors.ts';
import type { TransferHandles } from './handles.ts';
import { transferMs } from './nixl.ts';
import type { KvTransferRequest } from './params.ts';
import { prefillResponseParams } from './params.ts';
import type { TransferSecret } from './secret.ts';
import { DONE_PATH, PULL_PATH, sideCall, type TransferEngine } from './sideChannel.ts';

export interface TransferContext {
  engine: TransferEngine;
  engineId: string;
  /** The fleet's shared secret (secret.ts); null: none (closed, or open when insecure). */
  secret: TransferSecret | null;
  /**
   * No secret and not `--kv-transfer-insecure`: the side channel refuses every call, a prefill
   * holds nothing (its params null) and a decode pulls nothing (it computes the prompt).
   */
  closed: boolean;
  /** The random names of this engine's held transfers. */
  handles: TransferHandles;
  /** Whether /v1 needs an API key: then a client is its key, else its address. */
  apiKeysEnabled: boolean;
  /** Where consumers reach this engine's side channel (its HTTP host and port). */
  host: string;
  port(): number;
  tpSize: number;
  blockSize: number;
  kvBytesPerToken: number;
  gbps: number;
  latencyMs: number;
  speedup: number;
  /** Transfers that fell back to local compute (vLLM's nixl_num_failed_transfers). */
  failedTransfers: number;
  /** Pulls that completed. */
  transfers: number;
  bytesTransferred: number;
}

/** What `serveGeneration` adds to a request of the protocol. */
export interface GenerationTransfer {
  /** 'none': served as a plain request (a prefill on a closed side channel). */
  kvTransfer: 'remote-decode' | 'remote-prefill' | 'none';
  /** Who sent a remote decode (its holds count against this client's bound). */
  client?: string;
  /** Prompt tokens written from the pull, to leave out of the cached count. */
  externalTokensOf(engineId: string): number;
  /** Top-level fields of the JSON answer, from choice 0's finish. */
  responseFields?(
    engineId: string,
    heldBlockIds: readonly number[] | null,
  ): Record<string, unknown>;
}

/**
 * Who sent a request, for the hold bounds: its API key (hashed) when /v1 needs one, else its
 * address (without keys a header is anyone's to vary).
 */
export function transferClientOf(t: TransferContext, req: IncomingMessage): string {
  const auth = req.headers.authorization;
  if (t.apiKeysEnabled && auth !== undefined) {
    // The key alone: the check takes the scheme in any case, which must not make new clients.
    const key = auth.slice(auth.indexOf(' ') + 1);
    return `key:${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
  }
  return `addr:${req.socket.remoteAddress ?? ''}`;
}

export function prefillTransfer(t: TransferContext, client: string): GenerationTransfer {
  if (t.closed) {
    // Nothing held: no decode engine could pull it (vLLM's answer when it keeps nothing).
    return {
      kvTransfer: 'none',
      externalTokensOf: () => 0,
      responseFields: () => ({ kv_transfer_params: null }),
    };
  }
  return {
    kvTransfer: 'remote-decode',
    client,
    externalTokensOf: () => 0,
    responseFields: (engineId, heldBlockIds) => {
      // vLLM answers null when nothing was kept (the request did not end at its length; here
      // also when holding would pass a bound).
      if (heldBlockIds === null) return { kv_transfer_params: null };
      const bound = {
        blockIds: heldBlockIds,
        engineId: t.engineId,
        requestId: t.handles.issue(engineId),
        host: t.host,
        port: t.port(),
        tpSize: t.tpSize,
      };
      const mac = t.secret?.mac(bound);
      return {
        kv_transfer_params: prefillResponseParams({ ...bound, ...(mac && { mac }) }),
      };
    },
  };
}

/** With a secret: params a holder of it did not emit are the request's 400. */
export function checkTransferParams(
  t: TransferContext,
  params: Extract<KvTransferRequest, { kind: 'decode' }>,
): void {
  if (t.secret === null) return;
  const bound = {
    engineId: params.remoteEngineId,
    requestId: params.remoteRequestId,
    host: params.remoteHost,
    port: params.remotePort,
    blockIds: params.remoteBlockIds,
    tpSize: params.tpSize,
  };
  if (!t.secret.verifies(bound, params.mac)) {
    throw badRequest(
      "'kv_transfer_params' were not issued by a prefiller of this fleet",
      'kv_transfer_params',
    );
  }
}

/**
 * Decode side: pulls the blocks (modelled) and resolves with the transfer to serve with, or null
 * to compute the prompt here.
 */
export async function pullRemote(
  t: TransferContext,
  params: Extract<KvTransferRequest, { kind: 'decode' }>,
  promptTokens: number,
  res: ServerResponse,
): Promise<GenerationTransfer | null> {
  checkTransferParams(t, params);
  if (t.closed) {
    // No secret to verify the params with, nor to send: no one is contacted.
    t.failedTransfers++;
    return null;
  }
  const auth = t.secret?.authorization ?? null;
  const call = {
    engine_id: params.remoteEngineId,
    request_id: params.remoteRequestId,
    block_ids: params.remoteBlockIds,
  };
  const pulled = await sideCall(params.remoteHost, params.remotePort, PULL_PATH, call, auth);
  if (pulled === null) {
    t.failedTransfers++;
    return null;
  }
  const tokens = Math.min(promptTokens, params.remoteBlockIds.length * t.blockSize);
  const waitMs = transferMs(tokens, t.kvBytesPerToken, t.gbps, t.latencyMs) / t.speedup;
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  const done = await sideCall(params.remoteHost, params.remotePort, DONE_PATH, call, auth);
  if (done === null || done.released !== true) {
    t.failedTransfers++;
    return null;
  }
  if (res.destroyed) return null;
  t.transfers++;
  t.bytesTransferred += tokens * t.kvBytesPerToken;
  return { kvTransfer: 'remote-prefill', externalTokensOf: (id) => t.engine.externalTokensOf(id) };
}
