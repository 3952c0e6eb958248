/**
 * What a route's guards read of every replica, in arrays indexed by replica id: whether it is
 * down, when it last reported and its KV usage then. Every route judges the whole fleet. Read
 * from each replica's state and report objects, that pass cost a cache miss or two per replica
 * once the fleet's state outgrew the cache (a simulated fleet of 352 replicas steps hundreds of
 * engines between two routes); read side by side from these arrays, a few lines in all. The
 * router writes them wherever it changes the state they mirror.
 */
import { grown } from '../util/grown.ts';
import { type FilterThresholds, type Verdict, verdictOf } from './filters.ts';

export class ReplicaGauges {
  /** 1: removed or marked down. */
  down = new Uint8Array(0);
  /** 1 once a report came. */
  reported = new Uint8Array(0);
  /** When the last report came. */
  reportedAtMs = new Float64Array(0);
  /** The last report's KV usage (0 before one). */
  kvUsage = new Float64Array(0);

  /** Room for replicas [0, count); a new one is up and has not reported (all zeros). */
  ensureReplicas(count: number): void {
    if (count <= this.down.length) return;
    this.down = grown(this.down, new Uint8Array(count));
    this.reported = grown(this.reported, new Uint8Array(count));
    this.reportedAtMs = grown(this.reportedAtMs, new Float64Array(count));
    this.kvUsage = grown(this.kvUsage, new Float64Array(count));
  }

  verdict(replica: number, nowMs: number, limits: FilterThresholds): Verdict {
    return verdictOf(
      this.down[replica] === 1,
      this.reported[replica] === 1,
      this.reportedAtMs[replica]!,
      this.kvUsage[replica]!,
      nowMs,
      limits,
    );
  }
}
