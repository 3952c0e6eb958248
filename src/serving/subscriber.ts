/**
 * Events mode: one ZMQ SUB per backend reading vLLM-format KV event batches (either wire form,
 * decoded by kv/wire.ts), applied in sequence order, one at a time per backend:
 * - a gap (seq jumps ahead) is filled from the backend's replay socket (either replay framing:
 *   vLLM >= 0.26's with a topic frame, or older vLLM's and SGLang's without);
 * - a sequence that goes back means the engine restarted: its blocks are cleared first;
 * - a reconnect of the SUB socket is checked against the replay buffer: if the batch we applied
 *   last is still there, byte for byte, it is the same engine and only the missed batches are
 *   applied; otherwise it restarted (and may have published its first batches before we
 *   reconnected), so its blocks are cleared and its buffer is replayed from the start.
 *
 * A replay holds up the live stream behind it, so each one is bounded: a first answer within
 * `firstReplyMs`, the whole answer within `maxMs`, `maxBatches` and `maxBytes` (batches are
 * applied as they arrive, never collected); a gap's replay stops as soon as its missing batches
 * are in. A replay socket that did not answer, or was cut off, is left alone for `backoffMs`:
 * gaps meanwhile count as unfilled at once and the feed carries on from the live stream. A gap
 * counts as filled only when every missing batch arrived.
 *
 * Events go to the router as the engine sent them (its own hashes); the router keys them on
 * their token ids, so any vLLM-compatible engine works, not only kvroute's.
 */
import { Dealer, Subscriber } from 'zeromq';
import {
  decodeEventBatch,
  decodeSeq,
  encodeSeq,
  readReplayReply,
  type WireEvent,
  WireError,
} from '../kv/wire.ts';
import type { ForeignKvEvent } from '../router/index.ts';

/** Bounds on one replay; the defaults suit vLLM's 10,000-batch replay buffer. */
export interface ReplayLimits {
  /** Wait at most this long for the first answer. */
  firstReplyMs: number;
  /** The whole answer, end marker included, within this long. */
  maxMs: number;
  /** Batches read at most (vLLM keeps buffer_steps = 10,000). */
  maxBatches: number;
  /** Payload bytes read at most. */
  maxBytes: number;
  /** After a replay that did not answer or was cut off, none for this long. */
  backoffMs: number;
}

export const DEFAULT_REPLAY_LIMITS: ReplayLimits = {
  firstReplyMs: 500,
  maxMs: 2_000,
  maxBatches: 10_000,
  maxBytes: 64 * 1024 * 1024,
  backoffMs: 5_000,
};

/**
 * When a publisher counts as broken: it "restarts" (its sequence goes back) more than
 * `maxRestarts` times within `windowMs`. A broken publisher's batches are not applied (nor
 * replayed) until it has sent batches in order, each one after the other, for `recoverMs`; then
 * it is trusted again as a fresh start (its blocks forgotten, its replay buffer read).
 */
export interface BrokenLimits {
  maxRestarts: number;
  windowMs: number;
  recoverMs: number;
}

export const DEFAULT_BROKEN_LIMITS: BrokenLimits = {
  maxRestarts: 3,
  windowMs: 1_000,
  recoverMs: 10_000,
};

/** A single message larger than this is refused by ZMQ itself (one engine step's events). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * Decodes another engine's payloads into router events (e.g. SGLang's: engines/sglang/feed.ts),
 * keeping whatever state that takes; `reset` when the engine restarted or was forgotten.
 */
export interface BatchDecoder {
  decode(payload: Uint8Array): {
    events: ForeignKvEvent[];
    malformedEvents: number;
    malformedReason: string | null;
  };
  reset(): void;
}

export interface SubscriberTarget {
  replica: number;
  /** The PUB endpoint to connect to; null: its batches are pushed in (`push`, a bound socket). */
  events: string | null;
  replay: string | null;
  /** Absent: vLLM's wire format (kv/wire.ts). */
  decoder?: BatchDecoder;
}

export interface SubscriberHooks {
  onEvents(replica: number, events: ForeignKvEvent[], nowMs: number): void;
  /** The engine restarted: forget everything it had cached. */
  onRestart(replica: number): void;
  /** A batch that could not be decoded (counted in stats either way). */
  onDecodeError?(replica: number, error: Error): void;
  /** Its publisher restarts too often to be believed: its events are ignored from now on. */
  onBroken?(replica: number, restartsInWindow: number): void;
  /** A broken publisher sent in order long enough: trusted again (as a fresh start). */
  onTrusted?(replica: number): void;
}

export interface SubscriberStats {
  lastSeq: string | null;
  batches: number;
  /** Gaps whose every missing batch came back from replay. */
  gapsFilled: number;
  /** Gaps left (partly) open: no replay socket, no answer, cut off, or the batches were gone. */
  gapsUnfilled: number;
  batchesReplayed: number;
  /** Payload bytes read from replay sockets (at most maxBytes per replay, plus one batch). */
  replayBytes: number;
  /** Replays that got no answer in time. */
  replayTimeouts: number;
  /** Replays stopped at a bound (time, batches, bytes) before their end marker. */
  replayCutoffs: number;
  /** Replays not attempted because the replay socket is in backoff. */
  replaysSkipped: number;
  restarts: number;
  reconnects: number;
  decodeErrors: number;
  /** Events refused on their values (kv/wire.ts: a bad block size or token ids); none indexed. */
  malformedEvents: number;
  /** Its SUB socket has connected at least once (always true for pushed batches). */
  connected: boolean;
  /** The publisher is broken (too many restarts) and its batches are ignored now. */
  distrusted: boolean;
  /** Times it was found broken. */
  brokenEpisodes: number;
  /** Batches not applied because the publisher was broken at the time. */
  batchesIgnored: number;
}

interface Batch {
  seq: bigint;
  payload: Buffer;
}

/** How a replay ended. */
type ReplayOutcome =
  | 'end' // the end marker arrived
  | 'covered' // every batch asked for arrived; the rest was not waited for
  | 'stopped' // the caller had seen enough
  | 'no-answer'
  | 'cutoff'
  | 'skipped' // in backoff
  | 'none'; // no replay socket

class Feed {
  lastSeq: bigint | null = null;
  /** Payload of the batch at lastSeq: proof of identity when the socket reconnects. */
  lastPayload: Buffer | null = null;
  batches = 0;
  gapsFilled = 0;
  gapsUnfilled = 0;
  batchesReplayed = 0;
  replayBytes = 0;
  replayTimeouts = 0;
  replayCutoffs = 0;
  replaysSkipped = 0;
  restarts = 0;
  reconnects = 0;
  decodeErrors = 0;
  malformedEvents = 0;
  connected = false;
  /** Times (performance.now() ms) of the latest restarts, at most maxRestarts + 1. */
  restartTimesMs: number[] = [];
  distrusted = false;
  brokenEpisodes = 0;
  batchesIgnored = 0;
  /** While distrusted: the last sequence seen, and since when they have come in order. */
  distrustSeq: bigint | null = null;
  inOrderSinceMs: number | null = null;
  /** No replay before this (performance.now() ms). */
  replayBackoffUntilMs = 0;
  socket: Subscriber | null = null;
  /** Everything that touches this feed's state runs on this chain, in order. */
  chain: Promise<void> = Promise.resolve();

  constructor(readonly target: SubscriberTarget) {}

  run(task: () => Promise<void> | void): Promise<void> {
    this.chain = this.chain.then(task).catch(() => {
      // One bad batch must not end the feed; the replica just knows less until the next.
      this.decodeErrors++;
    });
    return this.chain;
  }
}

export class EventSubscriber {
  readonly #hooks: SubscriberHooks;
  readonly #limits: ReplayLimits;
  readonly #broken: BrokenLimits;
  readonly #feeds = new Map<number, Feed>();
  #closed = false;
  #loops: Promise<void>[] = [];
  #dealers = new Set<Dealer>();

  constructor(
    targets: readonly SubscriberTarget[],
    hooks: SubscriberHooks,
    limits: Partial<ReplayLimits> = {},
    broken: Partial<BrokenLimits> = {},
  ) {
    this.#hooks = hooks;
    this.#limits = { ...DEFAULT_REPLAY_LIMITS, ...limits };
    this.#broken = { ...DEFAULT_BROKEN_LIMITS, ...broken };
    for (const t of targets) this.#feeds.set(t.replica, new Feed(t));
  }

  start(): void {
    for (const feed of this.#feeds.values()) {
      if (feed.target.events === null) {
        feed.connected = true;
        continue;
      }
      const socket = new Subscriber({ linger: 0, maxMessageSize: MAX_MESSAGE_BYTES });
      // Watch before connecting: the monitor only sees events after it exists.
      this.#loops.push(this.#watchConnections(feed, socket));
      socket.connect(feed.target.events);
      socket.subscribe();
      feed.socket = socket;
      this.#loops.push(this.#readBatches(feed, socket));
    }
  }

  stats(replica: number): SubscriberStats | null {
    const f = this.#feeds.get(replica);
    if (!f) return null;
    return {
      lastSeq: f.lastSeq === null ? null : f.lastSeq.toString(),
      batches: f.batches,
      gapsFilled: f.gapsFilled,
      gapsUnfilled: f.gapsUnfilled,
      batchesReplayed: f.batchesReplayed,
      replayBytes: f.replayBytes,
      replayTimeouts: f.replayTimeouts,
      replayCutoffs: f.replayCutoffs,
      replaysSkipped: f.replaysSkipped,
      restarts: f.restarts,
      reconnects: f.reconnects,
      decodeErrors: f.decodeErrors,
      malformedEvents: f.malformedEvents,
      connected: f.connected,
      distrusted: f.distrusted,
      brokenEpisodes: f.brokenEpisodes,
      batchesIgnored: f.batchesIgnored,
    };
  }

  /**
   * One batch that arrived elsewhere (a bound SUB socket that engines connect to, its topic
   * naming this replica), applied exactly as if this subscriber's own socket had read it.
   */
  push(replica: number, seq: bigint, payload: Buffer): void {
    const feed = this.#feeds.get(replica);
    if (!feed || this.#closed) return;
    void feed.run(() => this.#onBatch(feed, seq, payload));
  }

  /**
   * The router forgot this replica (it came back from down, cold): relearn what its current
   * incarnation holds from the replay buffer, in order behind anything already queued.
   */
  rebuild(replica: number): Promise<void> {
    const feed = this.#feeds.get(replica);
    if (!feed) return Promise.resolve();
    return feed.run(async () => {
      // A broken publisher's buffer is not believed either; it is read when it is trusted again.
      if (feed.distrusted) return;
      feed.lastSeq = null;
      feed.lastPayload = null;
      feed.target.decoder?.reset();
      // A replica back from down deserves a fresh try at its replay socket.
      feed.replayBackoffUntilMs = 0;
      await this.#replayInto(feed, 0n, null);
    });
  }

  async #readBatches(feed: Feed, socket: Subscriber): Promise<void> {
    try {
      for await (const frames of socket) {
        // [topic, seq, payload]; a producer without a topic frame sends two.
        const seqFrame = frames.length >= 3 ? frames[1] : frames[0];
        const payload = frames.length >= 3 ? frames[2] : frames[1];
        if (!seqFrame || !payload) continue;
        await feed.run(() => this.#onBatch(feed, decodeSeq(seqFrame), payload));
      }
    } catch {
      // The socket closed (shutdown); nothing else ends the loop.
    }
  }

  async #watchConnections(feed: Feed, socket: Subscriber): Promise<void> {
    let lost = false;
    try {
      for await (const event of socket.events) {
        if (event.type === 'connect') feed.connected = true;
        if (event.type === 'disconnect') lost = true;
        else if (event.type === 'connect' && lost) {
          lost = false;
          feed.reconnects++;
          void feed.run(() => this.#resync(feed));
        }
      }
    } catch {
      // Closed.
    }
  }

  async #onBatch(feed: Feed, seq: bigint, payload: Buffer): Promise<void> {
    if (feed.distrusted && !this.#behaves(feed, seq)) {
      feed.batchesIgnored++;
      return;
    }
    const last = feed.lastSeq;
    if (last !== null && seq <= last) {
      // The sequence restarts at 0 with the engine: what we knew of its cache is gone.
      this.#restarted(feed);
      if (this.#isBroken(feed)) {
        feed.batchesIgnored++;
        return;
      }
      await this.#replayInto(feed, 0n, seq);
    } else if (last === null && seq > 0n) {
      // Joined late: take what the replay buffer still holds of this incarnation.
      await this.#replayInto(feed, 0n, seq);
    } else if (last !== null && seq > last + 1n) {
      const filled = await this.#replayInto(feed, last + 1n, seq);
      if (filled) feed.gapsFilled++;
      else feed.gapsUnfilled++;
    }
    this.#apply(feed, { seq, payload });
  }

  async #resync(feed: Feed): Promise<void> {
    if (feed.lastSeq === null || this.#closed) return;
    const lastSeq = feed.lastSeq;
    let same: boolean | null = null;
    await this.#replay(feed, lastSeq, null, (b) => {
      if (same === null) {
        // The first batch back must be the one we applied last, byte for byte.
        same = b.seq === lastSeq && (feed.lastPayload?.equals(b.payload) ?? false);
        return same;
      }
      if (b.seq > feed.lastSeq!) this.#apply(feed, b);
      return true;
    });
    if (same) return;
    this.#restarted(feed);
    await this.#replayInto(feed, 0n, null);
  }

  #restarted(feed: Feed): void {
    feed.restarts++;
    feed.target.decoder?.reset();
    feed.lastSeq = null;
    feed.lastPayload = null;
    const times = feed.restartTimesMs;
    times.push(performance.now());
    if (times.length > this.#broken.maxRestarts + 1) times.shift();
    this.#hooks.onRestart(feed.target.replica);
  }

  /** More than maxRestarts restarts within windowMs: stop believing it (said once). */
  #isBroken(feed: Feed): boolean {
    const times = feed.restartTimesMs;
    const { maxRestarts, windowMs } = this.#broken;
    if (times.length <= maxRestarts || times.at(-1)! - times[0]! > windowMs) return false;
    feed.distrusted = true;
    feed.brokenEpisodes++;
    feed.distrustSeq = null;
    feed.inOrderSinceMs = null;
    feed.restartTimesMs = [];
    this.#hooks.onBroken?.(feed.target.replica, times.length);
    return true;
  }

  /**
   * While distrusted: true once batches have come one after the other (seq = previous + 1) for
   * recoverMs; the feed then starts afresh with this batch (a late join: replay, then apply).
   */
  #behaves(feed: Feed, seq: bigint): boolean {
    const nowMs = performance.now();
    const prev = feed.distrustSeq;
    feed.distrustSeq = seq;
    if (prev === null || seq !== prev + 1n) {
      feed.inOrderSinceMs = null;
      return false;
    }
    feed.inOrderSinceMs ??= nowMs;
    if (nowMs - feed.inOrderSinceMs < this.#broken.recoverMs) return false;
    feed.distrusted = false;
    feed.distrustSeq = null;
    feed.inOrderSinceMs = null;
    feed.lastSeq = null;
    feed.lastPayload = null;
    this.#hooks.onTrusted?.(feed.target.replica);
    return true;
  }

  /**
   * Applies buffered batches [fromSeq, toSeq) (toSeq null: all) from the replay socket, in order,
   * as they arrive. True when every batch of the range arrived (toSeq null: the end marker did).
   */
  async #replayInto(feed: Feed, fromSeq: bigint, toSeq: bigint | null): Promise<boolean> {
    if (toSeq !== null && fromSeq >= toSeq) return true;
    let next = fromSeq;
    let contiguous = true;
    const outcome = await this.#replay(feed, fromSeq, toSeq, (b) => {
      if (b.seq < next) return true; // a repeat: already applied
      if (b.seq > next) contiguous = false; // the buffer no longer holds some of the range
      this.#apply(feed, b);
      next = b.seq + 1n;
      return true;
    });
    if (toSeq === null) return outcome === 'end' && contiguous;
    return contiguous && next >= toSeq;
  }

  /**
   * Streams the replay socket's batches from `fromSeq` on into `onBatch` (false from it stops the
   * replay), within the limits. Batches at or past `toSeq` are not passed on, and once `toSeq - 1`
   * has arrived the rest is not waited for.
   */
  async #replay(
    feed: Feed,
    fromSeq: bigint,
    toSeq: bigint | null,
    onBatch: (b: Batch) => boolean,
  ): Promise<ReplayOutcome> {
    const endpoint = feed.target.replay;
    if (!endpoint || this.#closed) return 'none';
    const startMs = performance.now();
    if (startMs < feed.replayBackoffUntilMs) {
      feed.replaysSkipped++;
      return 'skipped';
    }
    const limits = this.#limits;
    const dealer = new Dealer({
      linger: 0,
      sendTimeout: limits.firstReplyMs,
      receiveTimeout: limits.firstReplyMs,
      maxMessageSize: MAX_MESSAGE_BYTES,
    });
    this.#dealers.add(dealer);
    let answered = false;
    let batches = 0;
    let bytes = 0;
    const outcome = await (async (): Promise<ReplayOutcome> => {
      try {
        dealer.connect(endpoint);
        await dealer.send([Buffer.alloc(0), encodeSeq(fromSeq)]);
        for (;;) {
          const leftMs = limits.maxMs - (performance.now() - startMs);
          if (leftMs <= 0) return 'cutoff';
          dealer.receiveTimeout = Math.max(
            1,
            Math.ceil(answered ? leftMs : Math.min(leftMs, limits.firstReplyMs)),
          );
          const reply = readReplayReply(await dealer.receive());
          answered = true;
          if (reply.kind === 'end') return 'end';
          batches++;
          bytes += reply.payload.length;
          feed.replayBytes += reply.payload.length;
          if (batches > limits.maxBatches || bytes > limits.maxBytes) return 'cutoff';
          if (reply.seq < fromSeq || (toSeq !== null && reply.seq >= toSeq)) continue;
          feed.batchesReplayed++;
          if (!onBatch({ seq: reply.seq, payload: reply.payload })) return 'stopped';
          if (toSeq !== null && reply.seq >= toSeq - 1n) return 'covered';
        }
      } catch {
        // A receive timeout, a malformed reply or a closed socket: the replay ends here.
        if (this.#closed) return 'stopped';
        return answered ? 'cutoff' : 'no-answer';
      }
    })();
    this.#dealers.delete(dealer);
    dealer.close();
    if (outcome === 'no-answer') feed.replayTimeouts++;
    if (outcome === 'cutoff') feed.replayCutoffs++;
    if (outcome === 'no-answer' || outcome === 'cutoff') {
      feed.replayBackoffUntilMs = performance.now() + limits.backoffMs;
    }
    return outcome;
  }

  #apply(feed: Feed, batch: Batch): void {
    feed.lastSeq = batch.seq;
    feed.lastPayload = batch.payload;
    let events: readonly (WireEvent | ForeignKvEvent)[];
    try {
      const decoded = feed.target.decoder
        ? feed.target.decoder.decode(batch.payload)
        : decodeEventBatch(batch.payload);
      events = decoded.events;
      if (decoded.malformedEvents > 0) {
        feed.malformedEvents += decoded.malformedEvents;
        this.#hooks.onDecodeError?.(
          feed.target.replica,
          new WireError(`${decoded.malformedEvents} event(s) refused: ${decoded.malformedReason}`),
        );
      }
    } catch (err) {
      feed.decodeErrors++;
      this.#hooks.onDecodeError?.(feed.target.replica, err as Error);
      return;
    }
    feed.batches++;
    // Blocks on the GPU and in a CPU tier (the router credits those at their reload time);
    // other media (vLLM's "Disk") are not indexed.
    const indexed = events.filter(
      (e) =>
        e.type === 'AllBlocksCleared' ||
        e.medium === null ||
        e.medium === undefined ||
        e.medium === 'GPU' ||
        e.medium === 'CPU',
    );
    if (indexed.length > 0) this.#hooks.onEvents(feed.target.replica, indexed, Date.now());
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const feed of this.#feeds.values()) feed.socket?.close();
    for (const dealer of this.#dealers) dealer.close();
    await Promise.allSettled(this.#loops);
  }
}
