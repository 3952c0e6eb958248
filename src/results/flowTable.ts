/**
 * Flow control's per-tenant outcome (`kvroute sim --tenants`): every arrival ends served, 429
 * (refused at arrival: the queue's bounds or an admission bound), 503 (waited past
 * `--flow-max-wait-ms`) or failed; TTFT counts from arrival, queue wait included.
 */
import { grid, n0, n1 } from '../util/textTable.ts';

export interface TenantFlowResult {
  tenant: string;
  priorityClass: string;
  weight: number;
  arrivals: number;
  served: number;
  /** 429: refused at arrival. */
  rejected: number;
  /** 503: waited in the flow queue past its deadline. */
  expired: number;
  /** Any other end (no healthy replica, killed mid-stream, unfinished). */
  failed: number;
  /** Served requests after the warm-up, over which the percentiles are taken. */
  measured: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  queueWaitP50Ms: number;
  queueWaitP99Ms: number;
}

export interface FlowResult {
  flowControl: boolean;
  tenants: TenantFlowResult[];
}

export function formatFlow(rows: readonly { label: string; flow: FlowResult }[]): string {
  const head = [
    'run',
    'tenant',
    'class',
    'weight',
    'arrivals',
    'served',
    '429',
    '503',
    'failed',
    'TTFT p50',
    'p99 ms',
    'wait p50',
    'p99 ms',
  ];
  const body = rows.flatMap(({ label, flow }) =>
    flow.tenants.map((t) => [
      `${label}${flow.flowControl ? ' flow' : ''}`,
      t.tenant,
      t.priorityClass,
      String(t.weight),
      n0(t.arrivals),
      n0(t.served),
      n0(t.rejected),
      n0(t.expired),
      n0(t.failed),
      n0(t.ttftP50Ms),
      n0(t.ttftP99Ms),
      n1(t.queueWaitP50Ms),
      n1(t.queueWaitP99Ms),
    ]),
  );
  return [
    grid(head, body),
    'per tenant: arrivals end served, 429 (refused at arrival), 503 (waited past --flow-max-wait-ms) or failed; ' +
      'TTFT from arrival (queue wait included) and queue wait over the measured served requests',
  ].join('\n');
}
