/**
 * `kvroute sim --fault-drop-events K` / `--fault-silent-reset-s N`: the router's self-audit in
 * the simulator. The policy runs three times on the same arrivals: without the fault, with it
 * and the audit only watching (no repair), and with it and the audit's repairs. Printed: TTFT,
 * hit rate, the audit's detection time (seconds and the faulty replica's requests, from the
 * fault's onset to its verdict), repairs and false alarms on the healthy replicas.
 */
import { DROP_EVENT_KINDS } from '../engine/server/faults.ts';
import { type AuditedRunKind, type SimFaults, simulateAudited } from '../sim/audit.ts';
import type { SimConfig } from '../sim/run.ts';
import { type Flags, UsageError } from './args.ts';
import { readEngineFaultFlags } from './engineFaultFlags.ts';
import { bool, num, oneOf, options, str } from './options/table.ts';

/**
 * The audit's options, one row each (sim's table): the engine's fault flags as the faulty
 * replicas take them (read by `readEngineFaultFlags`), and which replicas those are.
 */
// biome-ignore format: one option a line
export const SIM_AUDIT_OPTIONS = options({
  'fault-drop-events': oneOf(DROP_EVENT_KINDS, 'K', 'the faulty replicas never publish KV events of kind K: {values}', { section: 'audit (the router grading its predictions; see src/router/audit/)' }),
  'fault-silent-reset-s': num('N', 'the faulty replicas empty their cache every N s with no event', { above: 0 }),
  'fault-lie': bool('the faulty replicas lie consistently: every prompt published as stored on arrival, no BlockRemoved, cached_tokens = the prompt'),
  'fault-replicas': str('R,...', 'which replicas have the faults (default {default}). With a fault, the first policy runs three times on the same arrivals: no fault, fault with the audit watching, fault with its repairs', { default: 0 }),
});

/** The faults the flags give, null when none. */
export function readSimFaults(flags: Flags, replicas: number): SimFaults | null {
  const faults = readEngineFaultFlags(flags, false);
  if (!faults) {
    if (flags.has('fault-replicas')) {
      throw new UsageError(
        '--fault-replicas needs --fault-drop-events, --fault-silent-reset-s or --fault-lie',
      );
    }
    return null;
  }
  const raw = flags.string('fault-replicas') ?? '0';
  const list = raw.split(',').map((s) => s.trim());
  const ids = list.map((s) => Number(s));
  for (const [i, id] of ids.entries()) {
    if (!/^\d+$/.test(list[i]!) || id >= replicas) {
      throw new UsageError(
        `--fault-replicas takes replica numbers from 0 to ${replicas - 1} (--replicas ${replicas}), got '${raw}'`,
      );
    }
  }
  return {
    replicas: [...new Set(ids)],
    ...(faults.dropEvents !== undefined && { dropEvents: faults.dropEvents }),
    ...(faults.silentResetS !== undefined && { silentResetS: faults.silentResetS }),
    ...(faults.lie === true && { lie: true }),
  };
}

const KINDS: { kind: AuditedRunKind; label: string }[] = [
  { kind: 'no-fault', label: 'no fault' },
  { kind: 'audit-off', label: 'fault, audit off (watching)' },
  { kind: 'audit-on', label: 'fault, audit on (repairs)' },
];

export function runAuditComparison(base: SimConfig, faults: SimFaults, json: boolean): string {
  const rows = KINDS.map(({ kind, label }) => {
    const { run, audit } = simulateAudited(base, faults, kind);
    return { label, kind, run, audit };
  });
  if (json) {
    return JSON.stringify({
      faults,
      runs: rows.map((r) => ({
        run: r.label,
        ttftP50Ms: r.run.ttftMs.p50,
        ttftP99Ms: r.run.ttftMs.p99,
        hitRate: r.run.hitRate,
        audit: r.audit,
      })),
    });
  }
  const ms = (v: number) => `${Math.round(v).toLocaleString('en-US')} ms`;
  const pct = (v: number | null) => (v === null ? '-' : `${(v * 100).toFixed(1)} %`);
  const num = (v: number | null, digits = 1) => (v === null ? '-' : v.toFixed(digits));
  const head = [
    'run',
    'TTFT p50',
    'TTFT p99',
    'hit rate',
    'detected',
    'detection s (mean/max)',
    'requests (mean/max)',
    'fallbacks',
    'false alarms',
  ];
  const body = rows.map((r) => {
    const d = r.audit.detection;
    return [
      r.label,
      ms(r.run.ttftMs.p50),
      ms(r.run.ttftMs.p99),
      pct(r.run.hitRate),
      r.kind === 'no-fault' ? '-' : `${d.detected}/${d.onsets}`,
      r.kind === 'no-fault' ? '-' : `${num(d.meanS, 2)} / ${num(d.maxS, 2)}`,
      r.kind === 'no-fault' ? '-' : `${num(d.meanRequests)} / ${num(d.maxRequests, 0)}`,
      String(r.audit.repairs.fallbacks),
      String(r.audit.falseAlarms),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  const what = [
    faults.dropEvents !== undefined ? `drop ${faults.dropEvents} events` : null,
    faults.silentResetS !== undefined ? `silent reset every ${faults.silentResetS} s` : null,
    faults.lie === true ? 'lies consistently' : null,
  ]
    .filter(Boolean)
    .join(', ');
  return [
    `faults on replica ${faults.replicas.join(', ')}: ${what}; policy ${base.router.policy}, ${base.replicas} replicas`,
    line(head),
    ...body.map(line),
  ].join('\n');
}
