/**
 * Several gateways over one fleet: N routers, arrivals spread over them round robin. Each router
 * decides alone from its own ledger; what it decides and releases reaches the others `syncMs`
 * later as peer records (a gateway's state sync over NATS), or never (`syncMs` null: gateways
 * that share nothing, each seeing about 1/N of every replica's queue). Engine reports, KV events
 * and health reach every router, as every gateway scrapes and subscribes to every engine.
 *
 * Records travel on the virtual clock: a record made at t is applied at t + syncMs, before
 * anything a router does at or after that time. The delay is the same for all, so records
 * arrive in the order they were made and a queue in that order is all the delivery needs.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { KvEvent } from '../kv/events.ts';
import { RouterError } from '../router/errors.ts';
import type { RouteDecision, Router } from '../router/router.ts';
import type { ReplicaReport, SimRouteRequest, SimRouter } from './fleet.ts';

type SyncRecord =
  | {
      kind: 'route';
      atMs: number;
      from: number;
      id: string;
      replica: string;
      promptTokens: number;
      uncachedTokens: number;
      blockSize: number;
      keys: readonly BlockKey[];
      fromBlock: number;
      lora: string | undefined;
    }
  | { kind: 'prefill' | 'done'; atMs: number; from: number; id: string };

export interface MultiRouterOptions {
  /** Delay of the records between routers; null: they share nothing. */
  syncMs: number | null;
  wantsEvents: boolean;
}

export class MultiRouter implements SimRouter {
  readonly #routers: readonly Router[];
  readonly #names: readonly string[];
  readonly #peerIds: readonly string[];
  readonly #syncMs: number | null;
  readonly wantsEvents: boolean;
  /** Request id -> index of the router that routed it. */
  readonly #owner = new Map<string, number>();
  #next = 0;
  /** Records in flight between routers, oldest first, from #head. */
  #records: SyncRecord[] = [];
  #head = 0;

  constructor(routers: readonly Router[], names: readonly string[], options: MultiRouterOptions) {
    this.#routers = routers;
    this.#names = names;
    this.#peerIds = routers.map((_, i) => `g${i}`);
    this.#syncMs = options.syncMs;
    this.wantsEvents = options.wantsEvents;
  }

  route(req: SimRouteRequest, nowMs: number): { replicaId: number; uncachedTokens: number } | null {
    this.#deliver(nowMs);
    const at = this.#next++ % this.#routers.length;
    const decision = routeOrNull(this.#routers[at]!, req, nowMs);
    if (decision === null) return null;
    this.#owner.set(req.id, at);
    if (this.#syncMs !== null) {
      const fromBlock = Math.floor(decision.cachedTokens / req.blockSize);
      this.#send({
        kind: 'route',
        atMs: nowMs,
        from: at,
        id: req.id,
        replica: decision.replica,
        promptTokens: req.promptTokens,
        uncachedTokens: decision.uncachedTokens,
        blockSize: req.blockSize,
        keys: req.blockKeys.slice(fromBlock),
        fromBlock,
        lora: req.lora,
      });
    }
    return decision;
  }

  onFirstToken(id: string, nowMs: number): void {
    this.#release(id, 'prefill', nowMs);
  }

  onFinished(id: string, nowMs: number): void {
    this.#release(id, 'done', nowMs);
    this.#owner.delete(id);
  }

  onReport(replica: number, report: ReplicaReport, nowMs: number): void {
    for (const r of this.#routers) r.onReport(this.#names[replica]!, report, nowMs);
  }

  applyEvents(replica: number, events: readonly KvEvent[], nowMs: number): void {
    for (const r of this.#routers) r.applyEvents(this.#names[replica]!, events, nowMs);
  }

  markDown(replica: number): void {
    for (const r of this.#routers) r.markDown(this.#names[replica]!);
  }

  markUp(replica: number): void {
    for (const r of this.#routers) r.markUp(this.#names[replica]!);
  }

  /** Counters summed over the routers (each counts its own decisions). */
  stats(): Record<string, number> {
    const sum: Record<string, number> = {};
    for (const r of this.#routers) {
      const { policy: _policy, ...counters } = r.counters();
      for (const [key, value] of Object.entries(counters)) sum[key] = (sum[key] ?? 0) + value;
    }
    return sum;
  }

  #release(id: string, stage: 'prefill' | 'done', nowMs: number): void {
    const at = this.#owner.get(id);
    if (at === undefined) return;
    this.#deliver(nowMs);
    const router = this.#routers[at]!;
    const known =
      stage === 'prefill' ? router.onFirstToken(id, nowMs) : router.onFinished(id, nowMs);
    if (known && this.#syncMs !== null) this.#send({ kind: stage, atMs: nowMs, from: at, id });
  }

  #send(record: SyncRecord): void {
    this.#records.push(record);
    if (this.#syncMs === 0) this.#deliver(record.atMs);
  }

  /** Applies every record due by `nowMs` to the routers other than its sender, in order. */
  #deliver(nowMs: number): void {
    const delayMs = this.#syncMs;
    if (delayMs === null) return;
    const records = this.#records;
    while (this.#head < records.length && records[this.#head]!.atMs + delayMs <= nowMs) {
      const record = records[this.#head++]!;
      const dueMs = record.atMs + delayMs;
      const peer = this.#peerIds[record.from]!;
      for (let i = 0; i < this.#routers.length; i++) {
        if (i === record.from) continue;
        const router = this.#routers[i]!;
        if (record.kind === 'route') {
          router.applyPeerRoute(
            {
              peer,
              requestId: record.id,
              replica: record.replica,
              promptTokens: record.promptTokens,
              uncachedTokens: record.uncachedTokens,
              blockSize: record.blockSize,
              blockKeys: record.keys,
              fromBlock: record.fromBlock,
              ...(record.lora !== undefined && { lora: record.lora }),
            },
            dueMs,
          );
        } else {
          router.applyPeerRelease(peer, record.id, record.kind);
        }
      }
    }
    if (this.#head > 4096 && this.#head * 2 > records.length) {
      this.#records = records.slice(this.#head);
      this.#head = 0;
    }
  }
}

/** The router's decision for a simulated request; null when no replica is healthy. */
export function routeOrNull(
  router: Router,
  req: SimRouteRequest,
  nowMs: number,
): RouteDecision | null {
  try {
    return router.route(
      {
        id: req.id,
        blockKeys: req.blockKeys,
        promptTokens: req.promptTokens,
        blockSize: req.blockSize,
        ...(req.lora !== undefined && { lora: req.lora }),
        // The simulated router names replica i `r${i}` (routerAdapter.ts, replicaNames).
        ...(req.avoidReplicas !== undefined && { avoid: req.avoidReplicas.map((i) => `r${i}`) }),
      },
      nowMs,
    );
  } catch (err) {
    if (err instanceof RouterError && err.code === 'ERR_NO_HEALTHY_REPLICA') return null;
    throw err;
  }
}
