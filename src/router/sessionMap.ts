/**
 * Session affinity's memory: session key -> the replica its last request went to, a bounded LRU.
 * Pure: no clock. An entry ages by routes, not by time: `idleRoutes` (optional) forgets a session
 * that no request has used while that many routes of any session were recorded, so a map that
 * never fills still lets go of conversations that ended. The least recently used entry leaves
 * first when the map is full.
 *
 * Replicas are held by name (stable across removal and re-addition); the router resolves the name
 * to an eligible replica or treats the session as new.
 */

/** Sessions remembered at once by default (about 100 bytes each). */
export const DEFAULT_SESSION_CAPACITY = 100_000;

export interface SessionMapOptions {
  /** Most sessions held; the least recently used leaves first (>= 1). */
  capacity?: number;
  /** Forget a session unused for more than this many recorded routes (absent: only the bound). */
  idleRoutes?: number;
}

interface Entry {
  replica: string;
  /** The route count when it was last recorded. */
  lastRoute: number;
}

export class SessionMap {
  readonly capacity: number;
  readonly idleRoutes: number | undefined;
  // A Map iterates in insertion order: re-inserting on use keeps the least recent first.
  readonly #entries = new Map<string, Entry>();
  #routes = 0;

  constructor(options: SessionMapOptions = {}) {
    const capacity = options.capacity ?? DEFAULT_SESSION_CAPACITY;
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`session capacity must be an integer >= 1, got ${capacity}`);
    }
    const idle = options.idleRoutes;
    if (idle !== undefined && (!Number.isInteger(idle) || idle < 1)) {
      throw new RangeError(`session idleRoutes must be an integer >= 1, got ${idle}`);
    }
    this.capacity = capacity;
    this.idleRoutes = idle;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The replica `key` last went to, or undefined (never seen, evicted or idle too long). */
  replicaOf(key: string): string | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (this.idleRoutes !== undefined && this.#routes - entry.lastRoute > this.idleRoutes) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.replica;
  }

  /** `key`'s request went to `replica`: it becomes the most recent; the least recent leaves if full. */
  record(key: string, replica: string): void {
    this.#routes++;
    this.#entries.delete(key);
    this.#entries.set(key, { replica, lastRoute: this.#routes });
    this.#dropIdle();
    if (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }

  /** Drops `key` (its conversation ended, or a test). */
  forget(key: string): void {
    this.#entries.delete(key);
  }

  /** The least recent entries past the idle bound leave (they are at the front). */
  #dropIdle(): void {
    const idle = this.idleRoutes;
    if (idle === undefined) return;
    for (const [key, entry] of this.#entries) {
      if (this.#routes - entry.lastRoute <= idle) return;
      this.#entries.delete(key);
    }
  }
}
