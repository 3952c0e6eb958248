/**
 * KV event publisher, as vLLM's ZmqEventPublisher: a PUB socket sends each step's events as
 * `[topic, seq (8 bytes big-endian), payload]`, seq counting from 0 at each start; the last
 * `bufferBatches` payloads stay in a ring so a ROUTER socket can replay them. A DEALER asks with
 * `[empty, start_seq]` and gets one message per buffered batch from start_seq on, then an end
 * marker: `[empty, topic, seq, payload]` ... `[empty, "", 0xFF x 8, ""]` as vLLM >= 0.26 answers
 * (replay form `topic`, the default), or `[empty, seq, payload]` ... `[empty, 0xFF x 8, ""]` as
 * older vLLM and SGLang do (`no-topic`).
 *
 * Like vLLM (`ZmqEventPublisher._socket_setup`), a PUB endpoint with a wildcard (`tcp://*:5557`,
 * `tcp://127.0.0.1:*`), `::`, ipc:// or inproc:// is bound; any other endpoint is connected to
 * (a central subscriber that binds, as llm-d deploys it). `tcp://0.0.0.0:P` is connected to as
 * well, as vLLM's rule reads (SGLang's publisher binds it): the engine says so in one line. The
 * replay ROUTER is always bound, whatever its address, as vLLM binds it
 * (`self._replay.bind(self._replay_endpoint)`). An IPv6 literal (`tcp://[::1]:P`) turns on the
 * socket's IPv6 option; a bind that fails is one error line naming the flag.
 */
import { Publisher, Router } from 'zeromq';
import type { KvEvent } from '../../kv/events.ts';
import { EngineError } from '../types.ts';
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

export const shouldBind = (endpoint: string): boolean =>
  endpoint.includes('*') ||
  endpoint.includes('::') ||
  endpoint.startsWith('ipc://') ||
  endpoint.startsWith('inproc://');

/** An endpoint a peer on this host can connect to. */
function connectable(socket: Publisher | Router, endpoint: string): string {
  if (!shouldBind(endpoint)) return endpoint;
  return (socket.lastEndpoint ?? endpoint).replace('//0.0.0.0:', '//127.0.0.1:');
}

/** A bound socket's endpoint as a peer on this host connects to it. */
function bound(socket: Router, endpoint: string): string {
  return (socket.lastEndpoint ?? endpoint).replace('//0.0.0.0:', '//127.0.0.1:');
}

/** How long a bind retries a port that a just-closed socket of this process still holds. */
const BIND_RETRY_MS = 2_000;

const isIpv6 = (endpoint: string): boolean => /^tcp:\/\/\[/.test(endpoint);

async function attach(
  socket: Publisher | Router,
  endpoint: string,
  bind: boolean,
  flag: string,
): Promise<void> {
  if (!bind) {
    try {
      socket.connect(endpoint);
    } catch (err) {
      throw attachError(flag, endpoint, 'connect', err);
    }
    return;
  }
  const deadline = performance.now() + BIND_RETRY_MS;
  for (;;) {
    try {
      await socket.bind(endpoint);
      return;
    } catch (err) {
      const inUse = (err as { code?: string }).code === 'EADDRINUSE';
      if (!inUse || performance.now() > deadline) throw attachError(flag, endpoint, 'bind', err);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** One line naming the flag: `No such device` is ZMQ's answer to IPv6 where it is off. */
function attachError(flag: string, endpoint: string, verb: string, err: unknown): EngineError {
  const code = (err as { code?: string }).code;
  const hint =
    code === 'ENODEV' && isIpv6(endpoint)
      ? ' (IPv6 looks off on this host: use an IPv4 address, e.g. tcp://*:PORT)'
      : '';
  return new EngineError(
    'ERR_CONFIG',
    `${flag} ${endpoint}: cannot ${verb}: ${(err as Error).message ?? String(err)}${hint}`,
  );
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
    const pub = new Publisher({
      linger: 0,
      sendHighWaterMark: SEND_HIGH_WATER_MARK,
      ipv6: isIpv6(options.endpoint),
    });
    let router: Router | null = null;
    try {
      await attach(pub, options.endpoint, shouldBind(options.endpoint), '--kv-events');
      if (options.replayEndpoint) {
        router = new Router({ linger: 0, ipv6: isIpv6(options.replayEndpoint) });
        await attach(router, options.replayEndpoint, true, '--kv-replay');
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
      router && options.replayEndpoint ? bound(router, options.replayEndpoint) : null,
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
