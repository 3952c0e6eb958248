/**
 * Routing state shared between gateways over NATS (`kvroute serve --nats URL`). Each gateway
 * publishes what changes a replica's state in its routers: every decision (request id, replica,
 * uncached tokens, the predicted prefix) and every release (prefill over, request ended), and
 * applies its peers' records to its own routers (`Router.applyPeerRoute`), so every gateway
 * sees every replica's whole queue. KV events are not shared: each gateway subscribes to every
 * engine itself.
 *
 * Off the request path: a decision is queued, and the queue is published every `FLUSH_MS` at
 * most, one message per model pool. (Each publish is a socket write of its own, ~50 us of the
 * event loop on a busy 2-core machine; one per turn added 0.3 ms to the gateway's p50 at 500
 * req/s in `npm run bench:gateway`. A few ms of delay change nothing: `kvroute sim --routers 4`
 * routes as well with 10 ms as with 1 ms.) Membership: heartbeats every
 * `heartbeatMs`; a peer silent for `peerTimeoutMs` has its entries dropped (no phantom queue
 * stays behind); one that stops cleanly says goodbye and is dropped at once. A gateway that
 * joins, or comes back after losing NATS, asks a peer for a snapshot of the shared state and
 * publishes its own in-flight set, which replaces what its peers held of it; every gateway does
 * that also every `stateEveryMs`, so a record lost on the way is mended. While NATS is away a
 * gateway routes on what it knows (its peers' entries time out like a dead peer's), logs that
 * once, and resynchronises when the connection is back.
 */
import { randomUUID } from 'node:crypto';
import { connect, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { BlockKey } from '../kv/blockKey.ts';
import type { InFlightRecord, RouteDecision, Router, RouteRequest } from '../router/index.ts';
import {
  decodeHeartbeat,
  decodeRouteMessage,
  decodeSnapshot,
  encodeSnapshot,
  encodeState,
  routeRecord,
  type Stage,
} from './records.ts';
import { type Subjects, subjectsOf } from './subjects.ts';

export const DEFAULT_HEARTBEAT_MS = 1_000;
export const DEFAULT_PEER_TIMEOUT_MS = 3_000;
export const DEFAULT_STATE_EVERY_MS = 10_000;
/** Records wait at most this long to be published together. */
export const FLUSH_MS = 5;
/** How long a snapshot request waits for a peer's answer. */
const SNAPSHOT_TIMEOUT_MS = 2_000;
/** Reconnect attempts are this far apart (and go on forever). */
const RECONNECT_WAIT_MS = 500;

export interface SyncConfig {
  /** NATS server URL(s), comma-separated: nats://HOST:4222. */
  url: string;
  /** Gateways of one cluster share state; subjects start with kvroute.<cluster>. */
  cluster: string;
  heartbeatMs: number;
  peerTimeoutMs: number;
  stateEveryMs: number;
}

/** The gateway's routers, one per model pool, as the sync reaches them. */
export interface SyncTarget {
  routerOf(model: string | null): Router | undefined;
  routers(): { model: string | null; router: Router }[];
}

/** The logger calls the sync makes (pino's shape). */
export interface SyncLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface SyncStats {
  id: string;
  connected: boolean;
  peers: { id: string; lastSeenAgoMs: number }[];
  published: number;
  applied: number;
  malformed: number;
  droppedPeers: number;
}

/** A decision waiting for the next flush: the record is built there, off the request path. */
interface Pending {
  requestId: string;
  replica: string;
  promptTokens: number;
  cachedTokens: number;
  blockSize: number;
  blockKeys: readonly BlockKey[];
  lora: string | undefined;
}

export class StateSync {
  readonly id: string;
  readonly config: SyncConfig;
  /** Resolves once connected and caught up with a peer's snapshot (or found none). */
  readonly ready: Promise<void>;
  readonly #target: SyncTarget;
  readonly #logger: SyncLogger;
  readonly #subjects: Subjects;
  #nc: NatsConnection | null = null;
  #connected = false;
  #closed = false;
  /** Model -> records of this turn, in order. */
  #queue = new Map<string | null, (Pending | [string, string])[]>();
  #scheduled = false;
  /** Peer id -> when it was last heard from (Date.now()). */
  #peers = new Map<string, number>();
  #timers: NodeJS.Timeout[] = [];
  #counts = { published: 0, applied: 0, malformed: 0, droppedPeers: 0 };

  constructor(config: SyncConfig, target: SyncTarget, logger: SyncLogger, id = randomUUID()) {
    this.id = id;
    this.config = config;
    this.#target = target;
    this.#logger = logger;
    this.#subjects = subjectsOf(config.cluster);
    this.ready = this.#start();
    // A failed start is logged there; nothing waits on `ready` in production.
    this.ready.catch(() => {});
  }

  /** A decision of this gateway (ModelPool's observer). */
  routed(model: string | null, decision: RouteDecision, request: RouteRequest): void {
    if (!this.#connected) return;
    this.#enqueue(model, {
      requestId: decision.requestId,
      replica: decision.replica,
      promptTokens: request.promptTokens,
      cachedTokens: decision.cachedTokens,
      blockSize: request.blockSize,
      blockKeys: request.blockKeys,
      lora: request.lora,
    });
  }

  /** One of this gateway's requests left prefill or ended. */
  released(model: string | null, requestId: string, stage: Stage): void {
    if (!this.#connected) return;
    this.#enqueue(model, [stage === 'prefill' ? 'f' : 'd', requestId]);
  }

  stats(): SyncStats {
    const now = Date.now();
    return {
      id: this.id,
      connected: this.#connected,
      peers: [...this.#peers].map(([id, seen]) => ({ id, lastSeenAgoMs: now - seen })),
      ...this.#counts,
    };
  }

  /** Says goodbye (peers drop this gateway's entries at once) and closes the connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const t of this.#timers) clearInterval(t);
    const nc = this.#nc;
    if (nc === null || nc.isClosed()) return;
    if (this.#connected) {
      this.#flush();
      nc.publish(this.#subjects.heartbeat, JSON.stringify({ g: this.id, bye: true }));
      await withTimeout(nc.drain(), 2_000).catch(() => {});
    }
    if (!nc.isClosed()) await nc.close();
  }

  async #start(): Promise<void> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: this.config.url.split(','),
        name: `kvroute gateway ${this.id}`,
        noEcho: true,
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: RECONNECT_WAIT_MS,
        // NATS may start after the gateway: keep trying, route alone meanwhile.
        waitOnFirstConnect: true,
      });
    } catch (err) {
      this.#logger.warn(
        { err, url: this.config.url },
        'NATS: cannot connect; routing on this gateway’s own state',
      );
      throw err;
    }
    if (this.#closed) {
      await nc.close();
      return;
    }
    this.#nc = nc;
    const on = (subject: string, handle: (msg: Msg) => void): void => {
      nc.subscribe(subject, {
        callback: (err, msg) => {
          if (err === null) handle(msg);
        },
      });
    };
    on(this.#subjects.allRoutes, (msg) => this.#onRoutes(msg));
    on(this.#subjects.heartbeat, (msg) => this.#onHeartbeat(msg));
    on(this.#subjects.snapshot, (msg) => this.#onSnapshotRequest(msg));
    void this.#watchStatus(nc);
    this.#connected = true;
    this.#logger.info(
      { url: this.config.url, cluster: this.config.cluster, id: this.id },
      'NATS: connected; sharing routing state',
    );
    this.#timers.push(
      setInterval(() => this.#beat(), this.config.heartbeatMs).unref(),
      setInterval(() => this.#publishState(), this.config.stateEveryMs).unref(),
    );
    await this.#resync();
  }

  /** After (re)connecting: heartbeat, a peer's snapshot, and this gateway's own state. */
  async #resync(): Promise<void> {
    this.#beat();
    this.#publishState();
    const nc = this.#nc!;
    let reply: Msg;
    try {
      reply = await nc.request(this.#subjects.snapshot, JSON.stringify({ g: this.id }), {
        timeout: SNAPSHOT_TIMEOUT_MS,
      });
    } catch {
      return; // No peer yet (no responders) or none answered: nothing to catch up with.
    }
    const snapshot = decodeSnapshot(reply.string());
    if (snapshot === null) {
      this.#counts.malformed++;
      return;
    }
    const now = Date.now();
    let entries = 0;
    for (const pool of snapshot.pools) {
      const router = this.#target.routerOf(pool.model);
      if (!router) continue;
      const byOwner = new Map<string, InFlightRecord[]>();
      for (const e of pool.entries) {
        const owner = e.peer ?? snapshot.sender;
        if (owner === this.id) continue;
        byOwner.set(owner, [...(byOwner.get(owner) ?? []), e]);
      }
      for (const [owner, list] of byOwner) {
        this.#seen(owner, now);
        router.dropPeer(owner);
        for (const e of list) if (router.applyPeerRoute({ ...e, peer: owner }, now)) entries++;
      }
    }
    this.#seen(snapshot.sender, now);
    this.#logger.info(
      { from: snapshot.sender, entries },
      'NATS: took a peer’s snapshot of the shared state',
    );
  }

  async #watchStatus(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' && this.#connected) {
        this.#connected = false;
        this.#queue.clear();
        this.#logger.warn(
          { url: this.config.url },
          'NATS: connection lost; routing on this gateway’s own state until it is back',
        );
      } else if (s.type === 'reconnect' && !this.#closed) {
        this.#connected = true;
        this.#logger.info({ url: this.config.url }, 'NATS: reconnected; resynchronising');
        void this.#resync();
      }
    }
  }

  #enqueue(model: string | null, record: Pending | [string, string]): void {
    let list = this.#queue.get(model);
    if (!list) {
      list = [];
      this.#queue.set(model, list);
    }
    list.push(record);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setTimeout(() => this.#flush(), FLUSH_MS);
    }
  }

  #flush(): void {
    this.#scheduled = false;
    const nc = this.#nc;
    if (nc === null || !this.#connected) {
      this.#queue.clear();
      return;
    }
    for (const [model, list] of this.#queue) {
      const records = list.map((r) =>
        Array.isArray(r)
          ? r
          : routeRecord(
              r.requestId,
              r.replica,
              r.promptTokens,
              r.cachedTokens,
              r.blockSize,
              r.blockKeys,
              r.lora,
            ),
      );
      this.#publish(
        this.#subjects.route(model),
        JSON.stringify({ g: this.id, m: model, r: records }),
      );
    }
    this.#queue.clear();
  }

  #publish(subject: string, data: string): void {
    try {
      this.#nc?.publish(subject, data);
      this.#counts.published++;
    } catch {
      // Closed or draining: the next resync sends the state again.
    }
  }

  /** Heartbeat, and the sweep of peers that stopped beating. */
  #beat(): void {
    if (this.#connected) this.#publish(this.#subjects.heartbeat, JSON.stringify({ g: this.id }));
    const now = Date.now();
    for (const [peer, seenMs] of this.#peers) {
      if (now - seenMs > this.config.peerTimeoutMs) this.#dropPeer(peer, 'stopped beating');
    }
  }

  /** Own in-flight entries per pool: peers replace what they held of this gateway with them. */
  #publishState(): void {
    if (!this.#connected) return;
    this.#flush();
    for (const { model, router } of this.#target.routers()) {
      const own = router.inFlight().filter((r) => r.peer === null);
      this.#publish(this.#subjects.route(model), encodeState(this.id, model, own));
    }
  }

  #onRoutes(msg: Msg): void {
    const m = decodeRouteMessage(msg.string());
    if (m === null) {
      this.#counts.malformed++;
      return;
    }
    if (m.sender === this.id) return;
    const now = Date.now();
    this.#seen(m.sender, now);
    const router = this.#target.routerOf(m.model);
    if (!router) return;
    if ('state' in m) {
      router.dropPeer(m.sender);
      for (const e of m.state) router.applyPeerRoute({ ...e, peer: m.sender }, now);
      return;
    }
    for (const r of m.routes) {
      const applied =
        r.kind === 'route'
          ? router.applyPeerRoute({ ...r.route, peer: m.sender }, now)
          : router.applyPeerRelease(m.sender, r.requestId, r.kind);
      if (applied) this.#counts.applied++;
    }
  }

  #onHeartbeat(msg: Msg): void {
    const hb = decodeHeartbeat(msg.string());
    if (hb === null) {
      this.#counts.malformed++;
      return;
    }
    if (hb.sender === this.id) return;
    if (hb.bye) this.#dropPeer(hb.sender, 'said goodbye');
    else this.#seen(hb.sender, Date.now());
  }

  #onSnapshotRequest(msg: Msg): void {
    const pools = this.#target.routers().map(({ model, router }) => ({
      model,
      entries: router.inFlight(),
    }));
    try {
      msg.respond(encodeSnapshot({ sender: this.id, pools }));
    } catch {
      // The connection went away meanwhile: the joiner asks again when it can.
    }
  }

  #seen(peer: string, nowMs: number): void {
    if (!this.#peers.has(peer)) this.#logger.info({ peer }, 'NATS: peer gateway joined');
    this.#peers.set(peer, nowMs);
  }

  #dropPeer(peer: string, why: string): void {
    this.#peers.delete(peer);
    let dropped = 0;
    for (const { router } of this.#target.routers()) dropped += router.dropPeer(peer);
    this.#counts.droppedPeers++;
    this.#logger.info(
      { peer, dropped },
      `NATS: peer gateway ${why}; its in-flight entries are dropped`,
    );
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
