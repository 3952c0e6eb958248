/**
 * One bound ZMQ SUB socket that every engine's publisher connects to (`--kv-events-bind
 * tcp://*:P`), as llm-d deploys it: each vLLM pod's `--kv-events-config` names the scheduler's
 * endpoint (no `*`, so vLLM connects) and a topic `kv@<pod-ip>@<model>` that tells the pods
 * apart. Each message `[topic, seq, payload]` goes to the backend its topic names, whose
 * subscriber then orders, replays and applies it as if it had read its own socket.
 *
 * A topic names a backend when it is (1) that backend's `topic` key exactly, else (2) llm-d's
 * form `kv@<pod>@<model>` (three parts split on `@`, as llm-d's parseTopic) whose pod is the
 * backend URL's `host:port`, or its host alone when no other such backend has that host.
 * Anything else is an unknown topic: counted (per topic, the first 64 distinct), logged at most
 * once a minute with the count held back, and never indexed.
 */
import type { Logger } from 'pino';
import { Subscriber } from 'zeromq';
import { GatewayError } from './errors.ts';
import { RateLimitedLog } from './log.ts';

/** A single message larger than this is refused by ZMQ itself (one engine step's events). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** Distinct unknown topics counted one by one; the rest add to `otherUnknown`. */
const MAX_UNKNOWN_TOPICS = 64;
const UNKNOWN_LOG_MS = 60_000;

export type BatchSink = (seq: bigint, payload: Buffer) => void;

export interface CentralEventsStats {
  endpoint: string;
  /** Messages attributed to a backend. */
  batches: number;
  /** Messages whose topic names no backend (none indexed), by topic. */
  unknownTopics: Record<string, number>;
  /** Unknown-topic messages past the first 64 distinct topics. */
  otherUnknown: number;
  /** Messages that were not [topic, seq (8 bytes), payload]. */
  malformed: number;
}

interface Registration {
  topic: string | null;
  hostPort: string;
  host: string;
  sink: BatchSink;
}

/** llm-d's topic `kv@<pod>@<model>`: the pod part, or null for another form. */
export function podOfTopic(topic: string): string | null {
  const parts = topic.split('@');
  return parts.length === 3 && parts[0] === 'kv' ? parts[1]! : null;
}

/** host:port and host of a backend URL, brackets of an IPv6 literal dropped, lower case. */
export function hostKeysOf(url: string): { hostPort: string; host: string } {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  return { hostPort: `${host}:${port}`, host };
}

/** A ZMQ socket option set for an IPv6 literal endpoint (ZMQ sockets are IPv4-only otherwise). */
export function isIpv6Endpoint(endpoint: string): boolean {
  return /^tcp:\/\/\[/.test(endpoint);
}

/**
 * A bind failure as one line naming the flag: `No such device` from ZMQ for an IPv6 address
 * where IPv6 is off, the port in use, an address this host does not have.
 */
export function bindError(flag: string, endpoint: string, err: unknown): GatewayError {
  const code = (err as { code?: string }).code;
  const why = (err as Error).message ?? String(err);
  const hint =
    code === 'ENODEV' && isIpv6Endpoint(endpoint)
      ? ' (IPv6 looks off on this host: use an IPv4 address, e.g. tcp://*:PORT)'
      : '';
  return new GatewayError('ERR_CONFIG', `${flag} ${endpoint}: cannot bind: ${why}${hint}`, {
    param: flag,
  });
}

export class CentralEvents {
  readonly endpoint: string;
  readonly #socket: Subscriber;
  readonly #logger: Logger;
  readonly #log = new RateLimitedLog(UNKNOWN_LOG_MS);
  readonly #registrations = new Set<Registration>();
  readonly #unknown = new Map<string, number>();
  #otherUnknown = 0;
  #batches = 0;
  #malformed = 0;
  #loop: Promise<void>;

  private constructor(socket: Subscriber, endpoint: string, logger: Logger) {
    this.#socket = socket;
    this.endpoint = endpoint;
    this.#logger = logger;
    this.#loop = this.#read();
  }

  /** Binds `endpoint` (always: this is the side engines connect to); `flag` names it on error. */
  static async bind(
    endpoint: string,
    logger: Logger,
    flag = '--kv-events-bind',
  ): Promise<CentralEvents> {
    const socket = new Subscriber({
      linger: 0,
      maxMessageSize: MAX_MESSAGE_BYTES,
      ipv6: isIpv6Endpoint(endpoint),
    });
    try {
      await socket.bind(endpoint);
    } catch (err) {
      socket.close();
      throw bindError(flag, endpoint, err);
    }
    // Every topic: unknown ones are counted, not filtered out unseen.
    socket.subscribe();
    const bound = (socket.lastEndpoint ?? endpoint).replace('//0.0.0.0:', '//127.0.0.1:');
    return new CentralEvents(socket, bound, logger);
  }

  /**
   * Batches whose topic names this backend go to `sink` from now on (see the file's comment).
   * Returns the unregistration.
   */
  register(backend: { url: string; topic: string | null }, sink: BatchSink): () => void {
    const reg: Registration = { topic: backend.topic, ...hostKeysOf(backend.url), sink };
    this.#registrations.add(reg);
    return () => this.#registrations.delete(reg);
  }

  /** The backend a topic names, or null (unknown, or a host shared by several backends). */
  sinkOf(topic: string): BatchSink | null {
    for (const r of this.#registrations) if (r.topic === topic) return r.sink;
    const pod = podOfTopic(topic)
      ?.replace(/^\[|\]$/g, '')
      .toLowerCase();
    if (pod === undefined) return null;
    let byHost: Registration | null = null;
    let hosts = 0;
    for (const r of this.#registrations) {
      if (r.topic !== null) continue;
      if (r.hostPort === pod) return r.sink;
      if (r.host === pod) {
        byHost = r;
        hosts++;
      }
    }
    return hosts === 1 ? byHost!.sink : null;
  }

  stats(): CentralEventsStats {
    return {
      endpoint: this.endpoint,
      batches: this.#batches,
      unknownTopics: Object.fromEntries(this.#unknown),
      otherUnknown: this.#otherUnknown,
      malformed: this.#malformed,
    };
  }

  async #read(): Promise<void> {
    try {
      for await (const frames of this.#socket) {
        const [topicFrame, seqFrame, payload] = frames;
        if (frames.length !== 3 || seqFrame!.length !== 8) {
          this.#malformed++;
          continue;
        }
        const topic = topicFrame!.toString('utf8');
        const sink = this.sinkOf(topic);
        if (sink === null) {
          this.#countUnknown(topic);
          continue;
        }
        this.#batches++;
        sink(seqFrame!.readBigUInt64BE(0), payload!);
      }
    } catch {
      // The socket closed (shutdown).
    }
  }

  #countUnknown(topic: string): void {
    if (this.#unknown.has(topic) || this.#unknown.size < MAX_UNKNOWN_TOPICS) {
      this.#unknown.set(topic, (this.#unknown.get(topic) ?? 0) + 1);
    } else this.#otherUnknown++;
    this.#log.maybe('unknown', Date.now(), (heldBack) =>
      this.#logger.warn(
        { topic: topic.slice(0, 200), heldBack, endpoint: this.endpoint },
        'KV events with a topic that names no backend: not indexed (llm-d topic kv@<pod-ip>@<model>, the pod being a backend URL host, or a backend topic= key)',
      ),
    );
  }

  async close(): Promise<void> {
    this.#socket.close();
    await this.#loop;
  }
}
