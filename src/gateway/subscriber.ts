/**
 * Events mode: one ZMQ SUB per backend reading vLLM-format KV event batches (either wire form,
 * decoded by kv/wire.ts), applied in sequence order, one at a time per backend:
 * - a gap (seq jumps ahead) is filled from the backend's replay socket;
 * - a sequence that goes back means the engine restarted: its blocks are cleared first;
 * - a reconnect of the SUB socket is checked against the replay buffer: if the batch we applied
 *   last is still there, byte for byte, it is the same engine and only the missed batches are
 *   applied; otherwise it restarted (and may have published its first batches before we
 *   reconnected), so its blocks are cleared and its buffer is replayed from the start.
 * Events go to the router as the engine sent them (its own hashes); the router keys them on
 * their token ids, so any vLLM-compatible engine works, not only kvroute's.
 */
import { Dealer, Subscriber } from 'zeromq';
import { decodeEventBatch, decodeSeq, encodeSeq, type WireEvent } from '../kv/wire.ts';
import type { ForeignKvEvent } from '../router/index.ts';

/** How long one replay answer may take before the gap is given up on. */
const REPLAY_TIMEOUT_MS = 1_000;

export interface SubscriberTarget {
  replica: number;
  events: string;
  replay: string | null;
}

export interface SubscriberHooks {
  onEvents(replica: number, events: ForeignKvEvent[], nowMs: number): void;
  /** The engine restarted: forget everything it had cached. */
  onRestart(replica: number): void;
  /** A batch that could not be decoded (counted in stats either way). */
  onDecodeError?(replica: number, error: Error): void;
}

export interface SubscriberStats {
  lastSeq: string | null;
  batches: number;
  gapsFilled: number;
  batchesReplayed: number;
  restarts: number;
  reconnects: number;
  decodeErrors: number;
}

interface Batch {
  seq: bigint;
  payload: Buffer;
}

class Feed {
  lastSeq: bigint | null = null;
  /** Payload of the batch at lastSeq: proof of identity when the socket reconnects. */
  lastPayload: Buffer | null = null;
  batches = 0;
  gapsFilled = 0;
  batchesReplayed = 0;
  restarts = 0;
  reconnects = 0;
  decodeErrors = 0;
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
  readonly #feeds = new Map<number, Feed>();
  #closed = false;
  #loops: Promise<void>[] = [];

  constructor(targets: readonly SubscriberTarget[], hooks: SubscriberHooks) {
    this.#hooks = hooks;
    for (const t of targets) this.#feeds.set(t.replica, new Feed(t));
  }

  start(): void {
    for (const feed of this.#feeds.values()) {
      const socket = new Subscriber({ linger: 0 });
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
      batchesReplayed: f.batchesReplayed,
      restarts: f.restarts,
      reconnects: f.reconnects,
      decodeErrors: f.decodeErrors,
    };
  }

  /**
   * The router forgot this replica (it came back from down, cold): relearn what its current
   * incarnation holds from the replay buffer, in order behind anything already queued.
   */
  rebuild(replica: number): void {
    const feed = this.#feeds.get(replica);
    if (!feed) return;
    void feed.run(async () => {
      feed.lastSeq = null;
      feed.lastPayload = null;
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
    const last = feed.lastSeq;
    if (last !== null && seq <= last) {
      // The sequence restarts at 0 with the engine: what we knew of its cache is gone.
      this.#restarted(feed);
      await this.#replayInto(feed, 0n, seq);
    } else if (last === null && seq > 0n) {
      // Joined late: take what the replay buffer still holds of this incarnation.
      await this.#replayInto(feed, 0n, seq);
    } else if (last !== null && seq > last + 1n) {
      await this.#replayInto(feed, last + 1n, seq);
      feed.gapsFilled++;
    }
    this.#apply(feed, { seq, payload });
  }

  async #resync(feed: Feed): Promise<void> {
    if (feed.lastSeq === null || this.#closed) return;
    const batches = feed.target.replay
      ? await this.#replay(feed.target.replay, feed.lastSeq)
      : null;
    const first = batches?.[0];
    const same =
      first !== undefined && first.seq === feed.lastSeq && feed.lastPayload?.equals(first.payload);
    if (same) {
      for (const b of batches!.slice(1)) this.#apply(feed, b, true);
      return;
    }
    this.#restarted(feed);
    await this.#replayInto(feed, 0n, null);
  }

  #restarted(feed: Feed): void {
    feed.restarts++;
    feed.lastSeq = null;
    feed.lastPayload = null;
    this.#hooks.onRestart(feed.target.replica);
  }

  /** Applies buffered batches [fromSeq, toSeq) (toSeq null: all) from the replay socket. */
  async #replayInto(feed: Feed, fromSeq: bigint, toSeq: bigint | null): Promise<void> {
    if (!feed.target.replay || (toSeq !== null && fromSeq >= toSeq) || this.#closed) return;
    const batches = await this.#replay(feed.target.replay, fromSeq);
    for (const b of batches ?? []) {
      if (toSeq !== null && b.seq >= toSeq) break;
      this.#apply(feed, b, true);
    }
  }

  /** Batches from `fromSeq` on, as the replay socket holds them; null when it did not answer. */
  async #replay(endpoint: string, fromSeq: bigint): Promise<Batch[] | null> {
    const dealer = new Dealer({ linger: 0, receiveTimeout: REPLAY_TIMEOUT_MS });
    const out: Batch[] = [];
    try {
      dealer.connect(endpoint);
      await dealer.send([Buffer.alloc(0), encodeSeq(fromSeq)]);
      for (;;) {
        const frames = await dealer.receive();
        // [empty, seq, payload] from a ROUTER; tolerate a missing empty delimiter.
        const [seqFrame, payload] = frames[0]?.length === 0 ? frames.slice(1) : frames;
        if (seqFrame?.length !== 8 || seqFrame.every((b) => b === 0xff)) break;
        const seq = decodeSeq(seqFrame);
        if (seq >= fromSeq && payload) out.push({ seq, payload });
      }
      return out;
    } catch {
      // No answer in time: the gap stays; later events still apply.
      return out.length > 0 ? out : null;
    } finally {
      dealer.close();
    }
  }

  #apply(feed: Feed, batch: Batch, replayed = false): void {
    feed.lastSeq = batch.seq;
    feed.lastPayload = batch.payload;
    if (replayed) feed.batchesReplayed++;
    let events: WireEvent[];
    try {
      events = decodeEventBatch(batch.payload).events;
    } catch (err) {
      feed.decodeErrors++;
      this.#hooks.onDecodeError?.(feed.target.replica, err as Error);
      return;
    }
    feed.batches++;
    // Only blocks on the GPU count as a cache hit for routing (offloaded tiers are slower).
    const gpu = events.filter(
      (e) => e.type === 'AllBlocksCleared' || e.medium === null || e.medium === 'GPU',
    );
    if (gpu.length > 0) this.#hooks.onEvents(feed.target.replica, gpu, Date.now());
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const feed of this.#feeds.values()) feed.socket?.close();
    await Promise.allSettled(this.#loops);
  }
}
