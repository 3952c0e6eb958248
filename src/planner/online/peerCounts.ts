/**
 * The counts other planners of the cluster answered for one pool (`--planner` with `--nats`), so
 * that every instance exports the cluster's count: the highest of its own and its live peers'.
 * Every planner searches the same shared window, so their answers agree but for the moment each
 * one searched; the highest is the one whose window saw the most (a joiner's, still filling, is
 * lower). A peer's count is live for `staleMs` after it came (a few search intervals: each planner
 * republishes its count every round) or until the peer leaves. Pure: time is the caller's `nowMs`.
 */

export interface PeerCount {
  peer: string;
  desiredReplicas: number;
  /** When it came, the receiver's clock, ms. */
  atMs: number;
}

export class PeerCounts {
  readonly staleMs: number;
  readonly #counts = new Map<string, PeerCount>();

  constructor(staleMs: number) {
    if (!(staleMs > 0)) throw new RangeError(`staleMs must be > 0, got ${staleMs}`);
    this.staleMs = staleMs;
  }

  set(peer: string, desiredReplicas: number, nowMs: number): void {
    this.#counts.set(peer, { peer, desiredReplicas, atMs: nowMs });
  }

  /** The peer left (said goodbye, or stopped beating). */
  drop(peer: string): void {
    this.#counts.delete(peer);
  }

  /** The live counts at `nowMs` (stale ones forgotten). */
  live(nowMs: number): PeerCount[] {
    for (const [peer, c] of this.#counts) {
      if (nowMs - c.atMs > this.staleMs) this.#counts.delete(peer);
    }
    return [...this.#counts.values()];
  }

  /** The cluster's count: the highest of `own` and the live peers'; null when none is known. */
  fleet(own: number | null, nowMs: number): number | null {
    let best = own;
    for (const c of this.live(nowMs)) {
      if (best === null || c.desiredReplicas > best) best = c.desiredReplicas;
    }
    return best;
  }
}
