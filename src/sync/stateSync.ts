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
 *
 * Peers are not trusted (NATS core names no sender): every message is size-checked and decoded
 * strictly (records.ts, bounds.ts), a peer's records are about its own entries only and bounded
 * in number per pool, peers are bounded in number, a snapshot is asked of each peer heard beating
 * on that peer's own subject and only its own entries are taken from it, and a goodbye is
 * honoured only with the secret whose hash the peer's heartbeats carried (goodbye.ts). What is
 * dropped is counted (`malformed`, `refused`).
 *
 * The online planner (`--planner`) shares its observed requests and its count on a subject of
 * its own (`sharePlanner`, plannerRecords.ts); peers' messages go to the attached planner, and a
 * peer that leaves is told to it too.
 */
import { randomUUID } from 'node:crypto';
import { connect, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { BlockKey } from '../kv/blockKey.ts';
import type { InFlightRecord, RouteDecision, Router, RouteRequest } from '../router/index.ts';
import { entryRoom, limitsOf, type SyncLimits, admitsPeer } from './bounds.ts';
import type { DiscoveryPolicy } from './discoveryPolicy.ts';
import { isGenuineGoodbye, makeGoodbye } from './goodbye.ts';
import {
  decodeHeartbeat,
  decodeRouteMessage,
  decodeSnapshot,
  encodeSnapshot,
  encodeState,
  routeRecord,
  type Stage,
} from './records.ts';
import { type NatsAuth, natsConnectOptions } from './natsAuth.ts';
import type { Observation } from '../planner/online/window.ts';
import {
  decodePlannerMessage,
  encodePlannerMessage,
  MAX_SHARED_OBSERVATIONS,
  type PlannerMessage,
} from './plannerRecords.ts';
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
  /** Credentials and TLS (`--nats-user`, `--nats-creds-file`, `--nats-tls-ca`...); absent: none. */
  auth?: NatsAuth;
  /** Bounds on what peers may make this gateway hold (`boundsOf` fills the defaults). */
  limits?: Partial<SyncLimits>;
  /** Which registered engines a gateway following discovery takes (`--discovery-allow`). */
  discovery?: DiscoveryPolicy;
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

/** The online planner, as the sync reaches it (`GatewayPlanner`). */
export interface PlannerPeerSink {
  peerMessage(peer: string, message: PlannerMessage, nowMs: number): void;
  peerGone(peer: string, nowMs: number): void;
}

export interface SyncStats {
  id: string;
  connected: boolean;
  peers: { id: string; lastSeenAgoMs: number }[];
  published: number;
  applied: number;
  /** Messages dropped unread: too large, not JSON, a field missing or out of range. */
  malformed: number;
  /**
   * Claims refused: from one peer too many, past a peer's entry bound, about another owner's
   * entries, a snapshot answered in another's name, a goodbye or heartbeat without the peer's proof.
   */
  refused: number;
  droppedPeers: number;
}

/** What this gateway knows of a peer. */
interface PeerState {
  /** When its last heartbeat came (Date.now()). */
  seenMs: number;
  /** The SHA-256 of its goodbye secret, pinned from the first heartbeat that carried one. */
  commitment?: string;
  /** Its snapshot was asked for since the last (re)connect. */
  asked: boolean;
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
  readonly #limits: SyncLimits;
  readonly #goodbye = makeGoodbye();
  #nc: NatsConnection | null = null;
  #connected = false;
  #closed = false;
  /** Model -> records of this turn, in order. */
  #queue = new Map<string | null, (Pending | [string, string])[]>();
  #scheduled = false;
  #peers = new Map<string, PeerState>();
  /** Snapshots asked for and not yet answered. */
  #snapshots = new Set<Promise<void>>();
  #timers: NodeJS.Timeout[] = [];
  #planner: PlannerPeerSink | null = null;
  #counts = { published: 0, applied: 0, malformed: 0, refused: 0, droppedPeers: 0 };

  constructor(config: SyncConfig, target: SyncTarget, logger: SyncLogger, id = randomUUID()) {
    this.id = id;
    this.config = config;
    this.#target = target;
    this.#logger = logger;
    this.#subjects = subjectsOf(config.cluster);
    this.#limits = limitsOf(config.limits);
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

  /** Peers' planner messages go to `sink` from now on (`--planner`). */
  attachPlanner(sink: PlannerPeerSink): void {
    this.#planner = sink;
  }

  /** This instance's new requests and count for `pool`, to its peers (in bounded messages). */
  sharePlanner(pool: string, observations: readonly Observation[], desired: number | null): void {
    if (!this.#connected) return;
    const now = Date.now();
    const subject = this.#subjects.planner(pool);
    let from = 0;
    do {
      const part = observations.slice(from, from + MAX_SHARED_OBSERVATIONS);
      this.#publish(subject, encodePlannerMessage(this.id, pool, part, desired, now));
      from += MAX_SHARED_OBSERVATIONS;
    } while (from < observations.length);
  }

  stats(): SyncStats {
    const now = Date.now();
    return {
      id: this.id,
      connected: this.#connected,
      peers: [...this.#peers].map(([id, p]) => ({ id, lastSeenAgoMs: now - p.seenMs })),
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
      nc.publish(
        this.#subjects.heartbeat,
        JSON.stringify({ g: this.id, bye: this.#goodbye.secret }),
      );
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
        ...natsConnectOptions(this.config.auth),
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
    on(this.#subjects.snapshot(this.id), (msg) => this.#onSnapshotRequest(msg));
    on(this.#subjects.allPlanner, (msg) => this.#onPlanner(msg));
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

  /**
   * After (re)connecting: heartbeat, this gateway's own state, and each peer's snapshot, asked of
   * every peer heard beating within two heartbeats (#onHeartbeat asks as they are heard).
   */
  async #resync(): Promise<void> {
    this.#beat();
    this.#publishState();
    for (const p of this.#peers.values()) p.asked = false;
    await delay(Math.min(2 * this.config.heartbeatMs, this.config.peerTimeoutMs));
    await Promise.allSettled([...this.#snapshots]);
  }

  #askSnapshot(peer: string): void {
    const pending: Promise<void> = this.#takeSnapshot(peer)
      .catch(() => {})
      .finally(() => this.#snapshots.delete(pending));
    this.#snapshots.add(pending);
  }

  /** `peer`'s own entries, asked of it on its own subject; an answer in another's name is refused. */
  async #takeSnapshot(peer: string): Promise<void> {
    const nc = this.#nc;
    if (nc === null || !this.#connected) return;
    let reply: Msg;
    try {
      reply = await nc.request(this.#subjects.snapshot(peer), JSON.stringify({ g: this.id }), {
        timeout: SNAPSHOT_TIMEOUT_MS,
      });
    } catch {
      return; // No responder (a peer of an older version, or gone) or no answer in time.
    }
    const snapshot = this.#tooLarge(reply) ? null : decodeSnapshot(reply.string());
    if (snapshot === null) {
      this.#counts.malformed++;
      return;
    }
    if (snapshot.sender !== peer || !this.#peers.has(peer)) {
      this.#counts.refused++;
      return;
    }
    const now = Date.now();
    let entries = 0;
    for (const pool of snapshot.pools) {
      const own = pool.entries.filter((e) => e.peer === null);
      this.#counts.refused += pool.entries.length - own.length;
      const router = this.#target.routerOf(pool.model);
      if (!router) continue;
      router.dropPeer(peer);
      entries += this.#applyState(router, peer, own, now);
    }
    this.#logger.info({ from: peer, entries }, 'NATS: took a peer’s snapshot of its entries');
  }

  /** A peer's whole set for one pool (its ledger there emptied first), up to its bound. */
  #applyState(router: Router, peer: string, entries: InFlightRecord[], nowMs: number): number {
    const room = entryRoom(router.peerEntries(peer), this.#limits);
    let applied = 0;
    for (const e of entries.slice(0, room)) {
      if (router.applyPeerRoute({ ...e, peer }, nowMs)) applied++;
    }
    this.#counts.refused += Math.max(0, entries.length - room);
    return applied;
  }

  #tooLarge(msg: Msg): boolean {
    return msg.data.length > this.#limits.maxMessageBytes;
  }

  /** Whether `peer`'s message is taken: a known peer, or a new one while there is room. */
  #admit(peer: string, nowMs: number): boolean {
    if (this.#peers.has(peer)) return true;
    if (!admitsPeer(false, this.#peers.size, this.#limits)) {
      this.#counts.refused++;
      return false;
    }
    this.#peers.set(peer, { seenMs: nowMs, asked: false });
    this.#logger.info({ peer }, 'NATS: peer gateway joined');
    return true;
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
    if (this.#connected) {
      this.#publish(
        this.#subjects.heartbeat,
        JSON.stringify({ g: this.id, k: this.#goodbye.commitment }),
      );
    }
    const now = Date.now();
    for (const [peer, p] of this.#peers) {
      if (now - p.seenMs > this.config.peerTimeoutMs) this.#dropPeer(peer, 'stopped beating');
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

  /** A peer's message decoded; null when it is malformed (counted) or this instance's own. */
  #fromPeer<T extends { sender: string }>(msg: Msg, decode: (data: string) => T | null): T | null {
    const m = this.#tooLarge(msg) ? null : decode(msg.string());
    if (m === null) {
      this.#counts.malformed++;
      return null;
    }
    return m.sender === this.id ? null : m;
  }

  #onRoutes(msg: Msg): void {
    const m = this.#fromPeer(msg, decodeRouteMessage);
    if (m === null) return;
    const now = Date.now();
    if (!this.#admit(m.sender, now)) return;
    const router = this.#target.routerOf(m.model);
    if (!router) return;
    if ('state' in m) {
      router.dropPeer(m.sender);
      this.#applyState(router, m.sender, m.state, now);
      return;
    }
    for (const r of m.routes) {
      if (r.kind === 'route' && entryRoom(router.peerEntries(m.sender), this.#limits) === 0) {
        this.#counts.refused++;
        continue;
      }
      const applied =
        r.kind === 'route'
          ? router.applyPeerRoute({ ...r.route, peer: m.sender }, now)
          : router.applyPeerRelease(m.sender, r.requestId, r.kind);
      if (applied) this.#counts.applied++;
    }
  }

  #onPlanner(msg: Msg): void {
    const now = Date.now();
    const m = this.#fromPeer(msg, (data) => decodePlannerMessage(data, now));
    if (m === null || !this.#admit(m.sender, now)) return;
    this.#planner?.peerMessage(m.sender, m, now);
  }

  #onHeartbeat(msg: Msg): void {
    const hb = this.#fromPeer(msg, decodeHeartbeat);
    if (hb === null) return;
    const known = this.#peers.get(hb.sender);
    if (hb.bye !== undefined) {
      // Only the peer itself knows the secret behind the commitment its heartbeats carried.
      if (known && hb.bye !== true && isGenuineGoodbye(known.commitment, hb.bye)) {
        this.#dropPeer(hb.sender, 'said goodbye');
      } else {
        this.#counts.refused++;
      }
      return;
    }
    if (known?.commitment !== undefined && hb.commitment !== known.commitment) {
      this.#counts.refused++; // A heartbeat in a known peer's name, without its commitment.
      return;
    }
    const now = Date.now();
    if (!this.#admit(hb.sender, now)) return;
    const peer = this.#peers.get(hb.sender)!;
    peer.seenMs = now;
    if (peer.commitment === undefined && hb.commitment !== undefined) {
      peer.commitment = hb.commitment;
    }
    if (!peer.asked && this.#connected) {
      peer.asked = true;
      this.#askSnapshot(hb.sender);
    }
  }

  #onSnapshotRequest(msg: Msg): void {
    // Its own entries only: each peer speaks for itself (a joiner asks every peer).
    const pools = this.#target.routers().map(({ model, router }) => ({
      model,
      entries: router.inFlight().filter((r) => r.peer === null),
    }));
    try {
      msg.respond(encodeSnapshot({ sender: this.id, pools }));
    } catch {
      // The connection went away meanwhile: the joiner asks again when it can.
    }
  }

  #dropPeer(peer: string, why: string): void {
    this.#peers.delete(peer);
    let dropped = 0;
    for (const { router } of this.#target.routers()) dropped += router.dropPeer(peer);
    this.#counts.droppedPeers++;
    this.#planner?.peerGone(peer, Date.now());
    this.#logger.info(
      { peer, dropped },
      `NATS: peer gateway ${why}; its in-flight entries are dropped`,
    );
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
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
