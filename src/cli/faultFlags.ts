/**
 * `--kill R@S` and `--revive R@S`, checked against the run they apply to: the replica must
 * exist, the time must fall within the run's arrivals (a fault after them changes nothing),
 * and a revival needs an earlier kill of that replica. Each refusal is one line naming the
 * flag and the accepted range.
 */
import { countArrivals } from '../sim/run.ts';
import type { FaultSpec } from '../sim/types.ts';
import { buildWorkload, type WorkloadSpec } from '../workload/spec.ts';
import { UsageError } from './args.ts';

export interface FaultRun {
  replicas: number;
  /** When arrivals stop, ms, and the flag or input that says so (for the message). */
  end: () => { ms: number; from: string };
}

const FAULT = /^(\d+)@(\d+(?:\.\d+)?)$/;

/** The faults of `--kill` and `--revive` values, kills first, each in the order given. */
export function readFaults(kills: string[], revives: string[], run: FaultRun): FaultSpec[] {
  const faults = [
    ...kills.map((raw) => parseFault('kill', raw, run)),
    ...revives.map((raw) => parseFault('revive', raw, run)),
  ];
  if (faults.length === 0) return [];
  const end = run.end();
  for (const f of faults) {
    if (f.atMs > end.ms) {
      throw new UsageError(
        `--${f.kind} ${f.raw}: ${seconds(f.atMs)} s is after the run's arrivals end ` +
          `(${seconds(end.ms)} s, ${end.from}); give a time from 0 to ${seconds(end.ms)} s`,
      );
    }
  }
  const ordered = [...faults].sort(
    (a, b) => a.atMs - b.atMs || (a.kind === b.kind ? 0 : a.kind === 'kill' ? -1 : 1),
  );
  const downSince = new Map<number, number>();
  for (const f of ordered) {
    const down = downSince.get(f.replica);
    if (f.kind === 'kill' && down !== undefined) {
      throw new UsageError(
        `--kill ${f.raw}: replica ${f.replica} is already down then (killed at ${seconds(down)} s); ` +
          `give a --revive ${f.replica}@S between the two kills`,
      );
    }
    if (f.kind === 'revive' && (down === undefined || down >= f.atMs)) {
      throw new UsageError(
        `--revive ${f.raw}: replica ${f.replica} is not down before ${seconds(f.atMs)} s; ` +
          `a revival needs an earlier --kill ${f.replica}@S`,
      );
    }
    if (f.kind === 'kill') downSince.set(f.replica, f.atMs);
    else downSince.delete(f.replica);
  }
  return faults.map(({ kind, replica, atMs }) => ({ kind, replica, atMs }));
}

function parseFault(
  kind: 'kill' | 'revive',
  raw: string,
  run: FaultRun,
): FaultSpec & { raw: string } {
  const m = FAULT.exec(raw.trim());
  if (!m) throw new UsageError(`--${kind} takes REPLICA@SECONDS (e.g. 3@120), got '${raw}'`);
  const replica = Number(m[1]);
  if (replica >= run.replicas) {
    throw new UsageError(
      `--${kind} ${raw}: replica ${replica} does not exist; --replicas ${run.replicas} gives ` +
        `replicas 0 to ${run.replicas - 1}`,
    );
  }
  return { kind, replica, atMs: Number(m[2]) * 1000, raw: raw.trim() };
}

const seconds = (ms: number): string =>
  (ms / 1000).toLocaleString('en-US', { maximumFractionDigits: 3 });

/** A trace's last arrival, ms: where its arrivals end when no --duration cuts them. */
export function traceEndMs(spec: WorkloadSpec, seed: number, blockSize: number): number {
  const workload = buildWorkload(spec, { seed, blockSize, durationMs: undefined });
  return countArrivals(workload, 0).lastMs;
}
