/**
 * KV event publisher, as vLLM's ZmqEventPublisher: a PUB socket sends each step's events as
 * `[topic, seq (8 bytes big-endian), payload]`, seq counting from 0 at each start; the last
 * `bufferBatches` payloads stay in a ring so a ROUTER socket can replay them. A DEALER asks with
 * `[empty, start_seq]` and gets one message per buffered batch from start_seq on, then an end
 * marker: `[empty, topic, seq, payload]` ... `[empty, "", 0xFF x 8, ""]` as vLLM >= 0.26 answers
 * (replay form `topic`, the default), or `[empty, seq, payload]` ... `[empty, 0xFF x 8, ""]` as
 * older vLLM and SGLang do (`no-topic`).
 *
 * Like vLLM, an endpoint with a wildcard (`tcp://*:5557`, `tcp://127.0.0.1:*`), `::`, ipc:// or
 * inproc:// is bound; any other endpoint is connected to.
 */
import { Publisher, Router } from 'zeromq';
import type { KvEvent } from '../../kv/events.ts';
import {
  encodeEventBatch,
  encodeSeq,
  type ReplayForm,
  replayBatchFrames,
  replayEndFrames,
  type WireFormat,
} from '../../kv/wire.ts';

export interface KvPublisherOptions {
  endpoint: string;
  replayEndpoint?: string | null;
  topic?: string;
  format?: WireFormat;
  /** How replay answers are framed (default `topic`, vLLM >= 0.26). */
  replayForm?: ReplayForm;
  dpRank?: number;
  /** Batches kept for replay (vLLM's buffer_steps). */
  bufferBatches?: number;
  /** Wall clock in seconds since the epoch, for batch timestamps. */
  nowS?: () => number;
  /** A LoRA adapter's integer id, for BlockStored's `lora_id` (absent: None). */
  loraIdOf?: (loraName: string) => number | null;
}

const DEFAULT_BUFFER_BATCHES = 10_000;
const SEND_HIGH_WATER_MARK = 100_000;

const shouldBind = (endpoint: string): boolean =>
  endpoint.includes('*') ||
  endpoint.includes('::') ||
  endpoint.startsWith('ipc://') ||
  endpoint.startsWith('inproc://');

/** An endpoint a peer on this host can connect to. */
function connectable(socket: Publisher | Router, endpoint: string): string {
  if (!shouldBind(endpoint)) return endpoint;
  return (socket.lastEndpoint ?? endpoint).replace('//0.0.0.0:', '//127.0.0.1:');
}

/** How long a bind retries a port that a just-closed socket of this process still holds. */
const BIND_RETRY_MS = 2_000;

async function attach(socket: Publisher | Router, endpoint: string): Promise<void> {
  if (!shouldBind(endpoint)) {
    socket.connect(endpoint);
    return;
  }
  const deadline = performance.now() + BIND_RETRY_MS;
  for (;;) {
    try {
      await socket.bind(endpoint);
      return;
    } catch (err) {
      const inUse = (err as { code?: string }).code === 'EADDRINUSE';
      if (!inUse || performance.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export class KvEventPublisher {
  readonly endpoint: string;
  readonly replayEndpoint: string | null;
  readonly #pub: Publisher;
  readonly #router: Router | null;
  readonly #topic: Buffer;
  readonly #format: WireFormat;
  readonly #loraIdOf: KvPublisherOptions['loraIdOf'];
  readonly #replayForm: ReplayForm;
  readonly #dpRank: number;
  readonly #capacity: number;
  readonly #nowS: () => number;
  /** Ring of recent batches, oldest first from #head. */
  readonly #ring: { seq: bigint; payload: Buffer }[] = [];
  #head = 0;
  #nextSeq = 0n;
  #queue: Buffer[][] = [];
  #sending = false;
  #closed = false;
  #replayLoop: Promise<void> | null = null;

  private constructor(
    pub: Publisher,
    router: Router | null,
    endpoint: string,
    replayEndpoint: string | null,
    options: KvPublisherOptions,
  ) {
    this.#pub = pub;
    this.#router = router;
    this.endpoint = endpoint;
    this.replayEndpoint = replayEndpoint;
    this.#topic = Buffer.from(options.topic ?? '', 'utf8');
    this.#format = options.format ?? 'map';
    this.#replayForm = options.replayForm ?? 'topic';
    this.#dpRank = options.dpRank ?? 0;
    this.#capacity = options.bufferBatches ?? DEFAULT_BUFFER_BATCHES;
    this.#nowS = options.nowS ?? (() => Date.now() / 1000);
    this.#loraIdOf = options.loraIdOf;
    if (router) this.#replayLoop = this.#serveReplay(router);
  }

  static async open(options: KvPublisherOptions): Promise<KvEventPublisher> {
    const pub = new Publisher({ linger: 0, sendHighWaterMark: SEND_HIGH_WATER_MARK });
    let router: Router | null = null;
    try {
      await attach(pub, options.endpoint);
      if (options.replayEndpoint) {
        router = new Router({ linger: 0 });
        await attach(router, options.replayEndpoint);
      }
    } catch (err) {
      pub.close();
      router?.close();
      throw err;
    }
    return new KvEventPublisher(
      pub,
      router,
      connectable(pub, options.endpoint),
      router && options.replayEndpoint ? connectable(router, options.replayEndpoint) : null,
      options,
    );
  }

  /** Sequence number the next batch will carry. */
  get nextSeq(): bigint {
    return this.#nextSeq;
  }

  /** Publishes one batch (one engine step's events); an empty list publishes nothing. */
  publish(events: readonly KvEvent[]): void {
    if (this.#closed || events.length === 0) return;
    const payload = encodeEventBatch(events, {
      tsS: this.#nowS(),
      dpRank: this.#dpRank,
      format: this.#format,
      ...(this.#loraIdOf && { loraIdOf: this.#loraIdOf }),
    });
    const seq = this.#nextSeq++;
    this.#remember(seq, payload);
    this.#queue.push([this.#topic, encodeSeq(seq), payload]);
    if (!this.#sending) void this.#drain();
  }

  #remember(seq: bigint, payload: Buffer): void {
    if (this.#ring.length < this.#capacity) this.#ring.push({ seq, payload });
    else {
      this.#ring[this.#head] = { seq, payload };
      this.#head = (this.#head + 1) % this.#capacity;
    }
  }

  /** Buffered batches from `startSeq` on, oldest first. */
  replayFrom(startSeq: bigint): { seq: bigint; payload: Buffer }[] {
    const out: { seq: bigint; payload: Buffer }[] = [];
    for (let i = 0; i < this.#ring.length; i++) {
      const entry = this.#ring[(this.#head + i) % this.#ring.length]!;
      if (entry.seq >= startSeq) out.push(entry);
    }
    return out;
  }

  // zeromq allows one pending send per socket: a JS queue keeps publish() synchronous.
  async #drain(): Promise<void> {
    this.#sending = true;
    try {
      while (this.#queue.length > 0 && !this.#closed) {
        const frames = this.#queue;
        this.#queue = [];
        for (const f of frames) {
          if (this.#closed) break;
          await this.#pub.send(f);
        }
      }
    } catch {
      // PUB drops at its high-water mark rather than failing; an error here means closed.
    } finally {
      this.#sending = false;
    }
  }

  async #serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        const [identity, ...rest] = frames;
        if (!identity) continue;
        // DEALER: [empty, start_seq]; a peer without the delimiter: [start_seq] (as vLLM).
        const delimited = rest.length === 2 && rest[0]!.length === 0;
        const request = delimited ? rest[1]! : rest.length === 1 ? rest[0]! : null;
        if (request?.length !== 8) continue;
        // Replies carry the empty delimiter only when the request did (a REQ peer strips it).
        const reply = (frames: Buffer[]) => [identity, ...(delimited ? frames : frames.slice(1))];
        const startSeq = request.readBigUInt64BE(0);
        for (const { seq, payload } of this.replayFrom(startSeq)) {
          await router.send(reply(replayBatchFrames(this.#replayForm, this.#topic, seq, payload)));
        }
        await router.send(reply(replayEndFrames(this.#replayForm)));
      }
    } catch {
      // The loop ends when the socket closes.
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // close() alone: unbinding first races libzmq's pipe shutdown against connected peers in
    // the same context (an assertion abort). The port is released shortly after, in ZMQ's I/O
    // thread; `attach` retries a bind that finds it still in use.
    this.#pub.close();
    this.#router?.close();
    await this.#replayLoop;
  }
}
