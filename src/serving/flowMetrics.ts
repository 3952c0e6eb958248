/**
 * Flow control's Prometheus metrics, in the gateway's (or the picker's) registry:
 *
 *   kvroute_flow_queued{pool,class,tenant}            gauge: requests waiting now
 *   kvroute_flow_wait_seconds{pool,class,tenant}      histogram: arrival to dispatch, dispatched requests
 *   kvroute_flow_dispatched_total{pool,class,tenant}  requests that waited and were sent on
 *   kvroute_flow_rejected_total{pool,class,tenant,reason}  queue-full, tenant-full (429), expired (503)
 *   kvroute_flow_cancelled_total{pool,class,tenant}   clients that left while waiting
 *
 * `pool` is the pool's base model (the gateway's `model` label, bounded the same way), `tenant`
 * the gateway's tenant label (a configured tenant, else `other`; none: `none`), so /metrics keeps
 * its rule that tenant names need the metrics or admin key once client keys exist (`auth.ts`).
 * A request that goes straight through (its pool not saturated, nobody waiting) is counted in
 * none of these: they describe the queue.
 */
import { Gauge, type Registry } from 'prom-client';
import { LabelledCounter, LabelledHistogram } from './metricSeries.ts';

/** Up to the flow queue's deadlines: waits of a few ms to minutes. */
const WAIT_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160];

export type FlowRejectReason = 'queue-full' | 'tenant-full' | 'expired';

/** One queued series as the queue counts it (labels already bounded). */
export interface FlowQueuedSample {
  pool: string;
  priorityClass: string;
  tenant: string;
  queued: number;
}

export class FlowMetrics {
  readonly wait: LabelledHistogram;
  readonly dispatched: LabelledCounter;
  readonly rejected: LabelledCounter;
  readonly cancelled: LabelledCounter;

  /** `queued()`: what waits now, read at scrape time. */
  constructor(registry: Registry, queued: () => FlowQueuedSample[]) {
    this.wait = new LabelledHistogram(
      'kvroute_flow_wait_seconds',
      'Time a request waited in the flow-control queue before it was sent on, by pool, class and tenant',
      WAIT_BUCKETS_S,
      ['pool', 'class', 'tenant'],
      registry,
    );
    this.dispatched = new LabelledCounter(
      'kvroute_flow_dispatched_total',
      'Requests that waited in the flow-control queue and were then sent on',
      ['pool', 'class', 'tenant'],
      registry,
    );
    this.rejected = new LabelledCounter(
      'kvroute_flow_rejected_total',
      'Requests refused by flow control: queue-full or tenant-full (429), expired: waited past the deadline (503)',
      ['pool', 'class', 'tenant', 'reason'],
      registry,
    );
    this.cancelled = new LabelledCounter(
      'kvroute_flow_cancelled_total',
      'Requests whose client left while they waited in the flow-control queue (nothing was sent)',
      ['pool', 'class', 'tenant'],
      registry,
    );
    // Series once seen stay, at 0 when nobody waits: a drained queue reads 0, not absent.
    const seen = new Set<string>();
    new Gauge({
      name: 'kvroute_flow_queued',
      help: 'Requests waiting in the flow-control queue now, by pool, class and tenant',
      labelNames: ['pool', 'class', 'tenant'],
      registers: [registry],
      collect() {
        this.reset();
        const now = new Map<string, { labels: Record<string, string>; queued: number }>();
        for (const s of queued()) {
          const key = `${s.pool}\u0000${s.priorityClass}\u0000${s.tenant}`;
          const labels = { pool: s.pool, class: s.priorityClass, tenant: s.tenant };
          const entry = now.get(key) ?? { labels, queued: 0 };
          entry.queued += s.queued;
          now.set(key, entry);
          seen.add(key);
        }
        for (const key of seen) {
          const entry = now.get(key);
          if (entry) this.set(entry.labels, entry.queued);
          else {
            const [pool, cls, tenant] = key.split('\u0000') as [string, string, string];
            this.set({ pool, class: cls, tenant }, 0);
          }
        }
      },
    });
  }
}
