/**
 * Owners per prefix: which replicas hold each customer's shared prefix, followed through the
 * engines' own KV events (a replica owns a prefix while it holds the prefix's last full block
 * in its GPU pool; a copy in its CPU tier is not ownership, so CPU-medium events are skipped).
 * Sampled on the fleet's sample tick for the watched (hot) customer and as a mean over all.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { KvEvent } from '../kv/events.ts';
import type { Workload } from '../workload/types.ts';

/** Customers beyond this are not tracked (a trace's prefix set is open-ended). */
const MAX_TRACKED = 4096;
const FILTER_BITS = 1 << 16;

export class OwnerTracker {
  readonly #customerByKey = new Map<BlockKey, number>();
  /** Cheap pre-screen on the key's low bits, so most stored blocks cost one array read. */
  readonly #filter = new Uint8Array(FILTER_BITS);
  /** owned[replica][customer] = 1 while the replica holds the prefix. */
  readonly #owned: Uint8Array[];
  readonly #counts: Int32Array;
  readonly #watched: number | null;
  readonly watchedSeries: number[] = [];
  readonly meanSeries: number[] = [];

  constructor(workload: Workload, replicas: number) {
    const tracked = Math.min(workload.customers, MAX_TRACKED);
    for (let c = 0; c < tracked; c++) {
      const key = workload.prefixWatchKey(c);
      if (key === null) continue;
      this.#customerByKey.set(key, c);
      this.#filter[(key >>> 0) & (FILTER_BITS - 1)] = 1;
    }
    this.#owned = Array.from({ length: replicas }, () => new Uint8Array(tracked));
    this.#counts = new Int32Array(tracked);
    this.#watched = this.#customerByKey.size > 0 ? workload.watchedCustomer : null;
  }

  apply(replica: number, events: readonly KvEvent[]): void {
    if (this.#customerByKey.size === 0) return;
    for (const e of events) {
      if (e.type === 'AllBlocksCleared') this.clear(replica);
      else if (e.medium !== 'CPU') this.#mark(replica, e.blockKeys, e.type === 'BlockStored');
    }
  }

  #mark(replica: number, keys: readonly BlockKey[], held: boolean): void {
    const owned = this.#owned[replica]!;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      if (this.#filter[(key >>> 0) & (FILTER_BITS - 1)] === 0) continue;
      const c = this.#customerByKey.get(key);
      if (c === undefined) continue;
      const was = owned[c]!;
      const now = held ? 1 : 0;
      if (was !== now) {
        owned[c] = now;
        this.#counts[c]! += now - was;
      }
    }
  }

  /** Room for `replicas` replicas (a fleet that grows mid-run): the new ones own nothing. */
  ensureReplicas(replicas: number): void {
    const tracked = this.#counts.length;
    while (this.#owned.length < replicas) this.#owned.push(new Uint8Array(tracked));
  }

  /** The replica lost its cache (it died): it owns nothing. */
  clear(replica: number): void {
    const owned = this.#owned[replica]!;
    for (let c = 0; c < owned.length; c++) {
      if (owned[c]) {
        owned[c] = 0;
        this.#counts[c]!--;
      }
    }
  }

  /** Customers whose prefix `replica` holds. */
  ownedBy(replica: number): number[] {
    const out: number[] = [];
    this.#owned[replica]!.forEach((v, c) => {
      if (v) out.push(c);
    });
    return out;
  }

  owners(customer: number): number {
    return this.#counts[customer] ?? 0;
  }

  sample(): void {
    if (this.#watched === null) return;
    this.watchedSeries.push(this.owners(this.#watched));
    let sum = 0;
    for (let c = 0; c < this.#counts.length; c++) sum += this.#counts[c]!;
    this.meanSeries.push(this.#counts.length ? sum / this.#counts.length : 0);
  }

  get watched(): number | null {
    return this.#watched;
  }
}
