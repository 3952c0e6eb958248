/**
 * Which workload a run replays, as plain data (what `--workload` / `--trace` flags produce), and
 * the one function that builds it: the simulator and the load generator call it alike, so the
 * same spec and seed give the same arrivals in both.
 */
import { type ArrivalShape, shapeWorkload } from './shape.ts';
import { TraceWorkload } from './trace.ts';
import type { SharedPrefixShape } from './types.ts';
import { makeWorkload, type WorkloadName } from './workloads.ts';
import type { GroupsBurst, Workload } from './types.ts';

export type WorkloadSpec = (
  | {
      kind: 'synthetic';
      name: WorkloadName;
      ratePerS?: number;
      adapters?: number;
      zipfS?: number;
      /** `shared-prefix`: inference-perf's shape; absent: its defaults. */
      sharedPrefix?: SharedPrefixShape;
      /** `groups`: every prompt once, all at time 0. */
      burst?: GroupsBurst;
    }
  | { kind: 'trace'; path: string; rateScale: number }
) & {
  /**
   * A rate ladder or a burst laid over the workload's prompts, in their order (`shape.ts`);
   * absent: the workload's own arrival times.
   */
  shape?: ArrivalShape;
};

export interface BuildWorkloadOptions {
  seed: number;
  /** Tokens per block of the prompts' block keys (arrivals and tokens do not depend on it). */
  blockSize: number;
  /** Arrivals stop here; undefined: the whole trace, or no end for a synthetic workload. */
  durationMs: number | undefined;
}

export function buildWorkload(spec: WorkloadSpec, o: BuildWorkloadOptions): Workload {
  if (spec.shape !== undefined) {
    // The shape sets the times: the workload gives as many prompts as the shape takes.
    const { shape, ...inner } = spec;
    return shapeWorkload(
      buildWorkload(inner, { ...o, durationMs: undefined }),
      shape,
      o.seed,
      o.durationMs,
    );
  }
  if (spec.kind === 'trace') {
    return new TraceWorkload({
      path: spec.path,
      seed: o.seed,
      blockSize: o.blockSize,
      rateScale: spec.rateScale,
      ...(o.durationMs !== undefined && { durationMs: o.durationMs }),
    });
  }
  return makeWorkload(spec.name, {
    seed: o.seed,
    durationMs: o.durationMs ?? Number.POSITIVE_INFINITY,
    blockSize: o.blockSize,
    ...(spec.ratePerS !== undefined && { ratePerS: spec.ratePerS }),
    ...(spec.adapters !== undefined && { adapters: spec.adapters }),
    ...(spec.zipfS !== undefined && { zipfS: spec.zipfS }),
    ...(spec.sharedPrefix !== undefined && { sharedPrefix: spec.sharedPrefix }),
    ...(spec.burst !== undefined && { burst: spec.burst }),
  });
}
