/**
 * A stand-in for a vLLM engine's KV event sockets, framed as vLLM's ZmqEventPublisher frames
 * them (vllm/distributed/kv_events.py): PUB `[topic, seq (8B big-endian), payload]`; a ROUTER
 * that takes `[identity, b"", start_seq]` (exactly three frames, else ignored) and answers every
 * buffered batch from start_seq on, then the end marker:
 * - `topic` (vLLM >= 0.26, PR #45177): `[identity, b"", topic, seq, payload]` ...
 *   `[identity, b"", b"", END_SEQ, b""]`;
 * - `no-topic` (older vLLM, SGLang): `[identity, b"", seq, payload]` ...
 *   `[identity, b"", END_SEQ, b""]`.
 * Misbehaving replay peers for the bounds: `silent` reads requests and never answers;
 * `endless` answers every request with batches that never end (seq below what was asked).
 * Payloads are whatever the test built (from test/support/msgspec.ts).
 */
import { Publisher, Router } from 'zeromq';
import { END_SEQ, seqBytes } from './msgspec.ts';

export type ReplayBehaviour = 'topic' | 'no-topic' | 'silent' | 'endless';

export class FakeVllmPublisher {
  readonly requests: bigint[] = [];
  /** Messages the endless peer sent. */
  endlessSent = 0;
  readonly #pub: Publisher;
  readonly #router: Router;
  readonly #topic: Buffer;
  readonly #behaviour: ReplayBehaviour;
  readonly #buffer = new Map<bigint, Buffer>();
  #nextSeq = 0n;
  #closed = false;
  #serving: Promise<void>;

  private constructor(pub: Publisher, router: Router, behaviour: ReplayBehaviour, topic: string) {
    this.#pub = pub;
    this.#router = router;
    this.#behaviour = behaviour;
    this.#topic = Buffer.from(topic, 'utf8');
    this.#serving = this.#serve();
  }

  static async open(behaviour: ReplayBehaviour, topic = ''): Promise<FakeVllmPublisher> {
    const pub = new Publisher({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    const router = new Router({ linger: 0, sendHighWaterMark: 1_000_000 });
    await router.bind('tcp://127.0.0.1:*');
    return new FakeVllmPublisher(pub, router, behaviour, topic);
  }

  get endpoint(): string {
    return this.#pub.lastEndpoint!;
  }

  get replayEndpoint(): string {
    return this.#router.lastEndpoint!;
  }

  /** Buffers the next batch (as vLLM's deque) and sends it live unless `lost`; returns its seq. */
  async publish(payload: Buffer, lost = false): Promise<bigint> {
    const seq = this.#nextSeq++;
    this.#buffer.set(seq, payload);
    if (!lost) await this.resend(seq);
    return seq;
  }

  /** Sends a buffered batch live again (the SUB joins asynchronously). */
  async resend(seq: bigint): Promise<void> {
    await this.#pub.send([this.#topic, seqBytes(seq), this.#buffer.get(seq)!]);
  }

  async #serve(): Promise<void> {
    const empty = Buffer.alloc(0);
    try {
      for await (const frames of this.#router) {
        if (frames.length !== 3) continue; // vLLM: "Invalid replay request"
        const [identity, , start] = frames as [Buffer, Buffer, Buffer];
        const from = start.readBigUInt64BE(0);
        this.requests.push(from);
        if (this.#behaviour === 'silent') continue;
        if (this.#behaviour === 'endless') {
          void this.#stream(identity, from);
          continue;
        }
        const withTopic = this.#behaviour === 'topic';
        for (const [seq, payload] of this.#buffer) {
          if (seq < from) continue;
          const head = withTopic ? [identity, empty, this.#topic] : [identity, empty];
          await this.#router.send([...head, seqBytes(seq), payload]);
        }
        await this.#router.send(
          withTopic ? [identity, empty, empty, END_SEQ, empty] : [identity, empty, END_SEQ, empty],
        );
      }
    } catch {
      // Closed.
    }
  }

  /** 64 KiB batches with no end (a safety cap of 256 MiB aside), none of them the ones asked for. */
  async #stream(identity: Buffer, from: bigint): Promise<void> {
    const payload = Buffer.alloc(64 * 1024, 0x90);
    const seq = seqBytes(from > 0n ? from - 1n : 0n);
    while (!this.#closed && this.endlessSent < 4_096) {
      try {
        await this.#router.send([identity, Buffer.alloc(0), this.#topic, seq, payload]);
        this.endlessSent++;
      } catch {
        return;
      }
      // Yield so the event loop (and the peer in this same process) keeps running.
      if (this.endlessSent % 16 === 0) await new Promise((r) => setImmediate(r));
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#pub.close();
    this.#router.close();
    await this.#serving;
  }
}
