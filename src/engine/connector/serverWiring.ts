/**
 * The connector wired into the engine server: the transfer context the handlers use, the side
 * channel's routes and its check of the shared secret, and the timer that frees holds past the
 * abort timeout (on the modelled clock: wall time x speedup, as every other engine time).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { kvBytesPerToken } from '../../model/cost.ts';
import type { EngineServerOptions, ResolvedEngineOptions } from '../server/options.ts';
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from './nixl.ts';
import { TransferHandles } from './handles.ts';
import { transferSecretOf } from './secret.ts';
import {
  admitSideChannel,
  DONE_PATH,
  handleDone,
  handlePull,
  isTransferEngine,
  PULL_PATH,
  type SideChannel,
} from './sideChannel.ts';
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
  /** False when a side-channel call lacks the secret (answered 401 already). */
  admit(req: IncomingMessage, res: ServerResponse): boolean;
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
  const apiKeys = options.apiKeys ?? [];
  const secret = transferSecretOf(options.kvTransferSecret, apiKeys);
  const handles = new TransferHandles();
  const context: TransferContext = {
    engine: core,
    engineId,
    secret,
    closed: secret === null && options.kvTransferInsecure !== true,
    handles,
    apiKeysEnabled: apiKeys.some((k) => k !== ''),
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
  const side: SideChannel = { engine: core, handles, engineId };
  let timer: NodeJS.Timeout | null = null;
  return {
    context,
    routes: {
      [PULL_PATH]: { method: 'POST', handle: (_c, body, res) => handlePull(side, body, res) },
      [DONE_PATH]: { method: 'POST', handle: (_c, body, res) => handleDone(side, body, res) },
    },
    admit: (req, res) => admitSideChannel(secret, context.closed, req, res),
    listening() {
      timer = setInterval(() => {
        core.expireTransfers(performance.now() * o.speedup);
        handles.sweep((id) => core.isTransferHeld(id));
      }, EXPIRE_EVERY_MS);
      timer.unref();
    },
    close() {
      if (timer) clearInterval(timer);
    },
  };
}
