/**
 * Engines found through NATS. `kvroute engine --nats URL --advertise URL` writes its entry,
 * `{url, events, replay, model}`, under its name in the key-value bucket
 * `kvroute_<cluster>_engines` (JetStream: `nats-server -js -sd DIR`), and writes it again every
 * `ttlMs / 3`. The bucket has a TTL (its stream's max age): an entry not refreshed for `ttlMs`
 * expires. Per-key TTLs need NATS 2.11; Debian's nats-server is 2.9, so the bucket's TTL it is.
 * An engine that stops cleanly deletes its entry.
 *
 * A gateway with `--nats` and no backend follows the bucket: a new entry is added as a backend
 * (cold, as through the admin API), a deleted one drains. An expired entry sends no event (the
 * server drops it silently), so the gateway drops entries it has not seen written for `ttlMs`.
 * Anyone who can write the bucket can write an entry: one is taken only under its own address's
 * key, inside the operator's allow-list, and up to a number of engines (discoveryPolicy.ts).
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { type KV, Kvm } from '@nats-io/kv';
import {
  allowListOf,
  DEFAULT_MAX_DISCOVERED_BACKENDS,
  type DiscoveryPolicy,
  refusal,
} from './discoveryPolicy.ts';
import { type NatsAuth, natsConnectOptions } from './natsAuth.ts';

export const DEFAULT_ENGINE_TTL_MS = 15_000;

/** An engine as it registers itself: what a gateway's `--backend` would say of it. */
export interface EngineEntry {
  url: string;
  events: string | null;
  replay: string | null;
  model: string | null;
}

export function bucketName(cluster: string): string {
  return `kvroute_${cluster}_engines`;
}

/** A bucket key for an engine URL (keys take letters, digits, `-`, `_`, `=`, `.`). */
export function engineKey(url: string): string {
  return url.replace(/^https?:\/\//, '').replace(/[^A-Za-z0-9_=-]/g, '_');
}

function natsOptions(url: string, name: string, auth: NatsAuth | undefined) {
  return {
    ...natsConnectOptions(auth),
    servers: url.split(','),
    name,
    reconnect: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
  };
}

async function openBucket(nc: NatsConnection, cluster: string, ttlMs: number): Promise<KV> {
  return new Kvm(nc).create(bucketName(cluster), { ttl: ttlMs, history: 1 });
}

export interface Registration {
  close(): Promise<void>;
}

/**
 * Registers an engine and keeps its entry fresh until `close` (which deletes it). Errors while
 * refreshing are reported to `onError` and retried at the next refresh.
 */
export async function registerEngine(
  options: { url: string; cluster: string; ttlMs?: number; entry: EngineEntry; auth?: NatsAuth },
  onError: (err: Error) => void = () => {},
): Promise<Registration> {
  const ttlMs = options.ttlMs ?? DEFAULT_ENGINE_TTL_MS;
  const nc = await connect(
    natsOptions(options.url, `kvroute engine ${options.entry.url}`, options.auth),
  );
  const kv = await openBucket(nc, options.cluster, ttlMs);
  const key = engineKey(options.entry.url);
  const value = JSON.stringify(options.entry);
  await kv.put(key, value);
  const timer = setInterval(
    () => void kv.put(key, value).catch((err: Error) => onError(err)),
    Math.max(100, Math.floor(ttlMs / 3)),
  );
  timer.unref();
  return {
    async close() {
      clearInterval(timer);
      await kv.delete(key).catch(() => {});
      await nc.drain().catch(() => {});
    },
  };
}

export interface EngineFollower {
  close(): Promise<void>;
}

/**
 * Follows the cluster's bucket: `onAdd` for each entry (present at start or written later, once
 * per URL until it goes), `onRemove` for each deleted or expired one.
 */
export async function followEngines(
  options: {
    url: string;
    cluster: string;
    ttlMs?: number;
    auth?: NatsAuth;
    policy?: DiscoveryPolicy;
  },
  handlers: {
    onAdd(entry: EngineEntry): void;
    onRemove(entry: EngineEntry): void;
    /** An entry written and not taken (malformed, or refused by the policy). */
    onRefuse?(key: string, why: string): void;
  },
): Promise<EngineFollower> {
  const ttlMs = options.ttlMs ?? DEFAULT_ENGINE_TTL_MS;
  const allowed = allowListOf(options.policy?.allow ?? []);
  const maxBackends = options.policy?.maxBackends ?? DEFAULT_MAX_DISCOVERED_BACKENDS;
  const nc = await connect(natsOptions(options.url, 'kvroute gateway (discovery)', options.auth));
  const kv = await openBucket(nc, options.cluster, ttlMs);
  /** Key -> the entry and when it was last written (Date.now()). */
  const known = new Map<string, { entry: EngineEntry; writtenMs: number }>();
  const remove = (key: string): void => {
    const k = known.get(key);
    if (!k) return;
    known.delete(key);
    handlers.onRemove(k.entry);
  };
  const watch = await kv.watch();
  void (async () => {
    for await (const e of watch) {
      if (e.operation !== 'PUT') {
        remove(e.key);
        continue;
      }
      const entry = readEntry(e.string());
      if (entry === null) {
        handlers.onRefuse?.(e.key, 'not an engine entry');
        continue;
      }
      const why = refusal(
        { key: e.key, ownKey: engineKey(entry.url), ...entry },
        allowed,
        known,
        maxBackends,
      );
      if (why !== null) {
        handlers.onRefuse?.(e.key, why);
        continue;
      }
      const had = known.get(e.key);
      known.set(e.key, { entry, writtenMs: Date.now() });
      if (had && had.entry.url !== entry.url) handlers.onRemove(had.entry);
      if (!had || had.entry.url !== entry.url) handlers.onAdd(entry);
    }
  })();
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [key, k] of known) if (now - k.writtenMs > ttlMs) remove(key);
    },
    Math.max(100, Math.floor(ttlMs / 3)),
  );
  sweep.unref();
  return {
    async close() {
      clearInterval(sweep);
      watch.stop();
      await nc.drain().catch(() => {});
    },
  };
}

function readEntry(text: string): EngineEntry | null {
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    if (typeof o.url !== 'string' || !/^https?:\/\//.test(o.url)) return null;
    const opt = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
    return { url: o.url, events: opt(o.events), replay: opt(o.replay), model: opt(o.model) };
  } catch {
    return null;
  }
}
