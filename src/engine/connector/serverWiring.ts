/**
 * The connector wired into the engine server: the transfer context the handlers use, the side
 * channel's routes, and the timer that frees holds past the abort timeout (on the modelled clock:
 * wall time x speedup, as every other engine time).
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { kvBytesPerToken } from '../../model/cost.ts';
import type { EngineServerOptions, ResolvedEngineOptions } from '../server/options.ts';
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from './nixl.ts';
import { DONE_PATH, handleDone, handlePull, isTransferEngine, PULL_PATH } from './sideChannel.ts';
import type { TransferContext } from './transfer.ts';

/** How often held blocks are checked against the abort timeout (wall ms). */
const EXPIRE_EVERY_MS = 200;

type PostRoute = {
  method: 'POST';
  handle: (ctx: unknown, body: unknown, res: ServerResponse) => void;
};

export interface ServerTransfers {
  context: TransferContext;
  routes: Record<string, PostRoute>;
  listening(): void;
  close(): void;
}

export function startTransfers(
  options: EngineServerOptions,
  o: ResolvedEngineOptions,
  core: object,
  port: () => number,
): ServerTransfers | null {
  const config = options.kvTransferConfig;
  if (!config) return null;
  if (!isTransferEngine(core)) {
    throw new Error('--kv-transfer-config needs an engine core with a KV connector');
  }
  const gbps = options.kvTransferGbps ?? DEFAULT_TRANSFER_GBPS;
  const latencyMs = options.kvTransferLatencyMs ?? DEFAULT_TRANSFER_LATENCY_MS;
  if (!(gbps > 0 && Number.isFinite(gbps)))
    throw new RangeError(`kv transfer GB/s must be > 0, got ${gbps}`);
  if (!(latencyMs >= 0 && Number.isFinite(latencyMs))) {
    throw new RangeError(`kv transfer latency must be >= 0 ms, got ${latencyMs}`);
  }
  const spec = o.engineConfig.spec;
  const engineId = config.engineId ?? randomUUID();
  const host = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host;
  const context: TransferContext = {
    engine: core,
    engineId,
    host,
    port,
    tpSize: spec.tp,
    blockSize: o.engineConfig.blockSize,
    kvBytesPerToken: kvBytesPerToken(spec.model, spec.kvDtype),
    gbps,
    latencyMs,
    speedup: o.speedup,
    failedTransfers: 0,
    transfers: 0,
    bytesTransferred: 0,
  };
  let timer: NodeJS.Timeout | null = null;
  return {
    context,
    routes: {
      [PULL_PATH]: {
        method: 'POST',
        handle: (_c, body, res) => handlePull(core, engineId, body, res),
      },
      [DONE_PATH]: { method: 'POST', handle: (_c, body, res) => handleDone(core, body, res) },
    },
    listening() {
      timer = setInterval(
        () => core.expireTransfers(performance.now() * o.speedup),
        EXPIRE_EVERY_MS,
      );
      timer.unref();
    },
    close() {
      if (timer) clearInterval(timer);
    },
  };
}
