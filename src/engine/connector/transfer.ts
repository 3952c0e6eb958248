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
 */
import type { ServerResponse } from 'node:http';
import { transferMs } from './nixl.ts';
import type { KvTransferRequest } from './params.ts';
import { prefillResponseParams } from './params.ts';
import { DONE_PATH, PULL_PATH, sideCall, type TransferEngine } from './sideChannel.ts';

export interface TransferContext {
  engine: TransferEngine;
  engineId: string;
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
  kvTransfer: 'remote-decode' | 'remote-prefill';
  /** Prompt tokens written from the pull, to leave out of the cached count. */
  externalTokensOf(engineId: string): number;
  /** Top-level fields of the JSON answer, from choice 0's finish. */
  responseFields?(
    engineId: string,
    heldBlockIds: readonly number[] | null,
  ): Record<string, unknown>;
}

export function prefillTransfer(t: TransferContext): GenerationTransfer {
  return {
    kvTransfer: 'remote-decode',
    externalTokensOf: () => 0,
    responseFields: (engineId, heldBlockIds) => ({
      // vLLM answers null when nothing was kept (the request did not end at its length).
      kv_transfer_params:
        heldBlockIds === null
          ? null
          : prefillResponseParams({
              blockIds: heldBlockIds,
              engineId: t.engineId,
              requestId: engineId,
              host: t.host,
              port: t.port(),
              tpSize: t.tpSize,
            }),
    }),
  };
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
  const call = {
    engine_id: params.remoteEngineId,
    request_id: params.remoteRequestId,
    block_ids: params.remoteBlockIds,
  };
  const pulled = await sideCall(params.remoteHost, params.remotePort, PULL_PATH, call);
  if (pulled === null) {
    t.failedTransfers++;
    return null;
  }
  const tokens = Math.min(promptTokens, params.remoteBlockIds.length * t.blockSize);
  const waitMs = transferMs(tokens, t.kvBytesPerToken, t.gbps, t.latencyMs) / t.speedup;
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  const done = await sideCall(params.remoteHost, params.remotePort, DONE_PATH, call);
  if (done === null || done.released !== true) {
    t.failedTransfers++;
    return null;
  }
  if (res.destroyed) return null;
  t.transfers++;
  t.bytesTransferred += tokens * t.kvBytesPerToken;
  return { kvTransfer: 'remote-prefill', externalTokensOf: (id) => t.engine.externalTokensOf(id) };
}
