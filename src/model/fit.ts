/**
 * Fits a calibrated step curve (calibration.ts) to measurements. Each observation is the time of
 * one or more steps, optionally after a per-request overhead (a TTFT covers every prefill chunk
 * of its prompt). In the curve's terms a step of n tokens reading `bytes` takes
 *
 *   overheadMs + max(msPerToken x (n + halfTokens), msPerByte x bytes)
 *
 * with msPerToken = 2 x active params / (tp x peak x mfuMax) and msPerByte = 1 / (tp x HBM
 * bytes/s x mbu). Once each step is known to be compute-bound or memory-bound, that is linear in
 * five unknowns: the request overhead, the step overhead, msPerToken x halfTokens, msPerToken and
 * msPerByte. So the fit alternates: classify every step with the current coefficients, solve the
 * weighted linear least-squares problem over relative errors, classify again, until the classes
 * settle. `minimax` reweights the points (Lawson's algorithm) towards the smallest worst-case
 * error, for clean data such as a published profile's medians; `least-squares` suits noisy live
 * measurements. Unknowns the data cannot separate (collinear columns) are held at 0 and named in
 * `fixed`; overheads and halfTokens are kept >= 0. Pure: no I/O.
 */
import { Matrix, SingularValueDecomposition, solve } from 'ml-matrix';
import type { FitObjective, ProfileCurve, ProfilePoint, StepCurve } from './calibration.ts';
import { mixedStepMs, peakFlops, type ReplicaSpec, type StepWork, stepBytesRead } from './cost.ts';

export interface Observation {
  kind: ProfilePoint['kind'];
  label: string;
  /** The steps the measurement spans, in order. */
  steps: StepWork[];
  /** A per-request overhead precedes the steps (time to first token). */
  perRequest: boolean;
  measuredMs: number;
}

export interface FitOptions {
  objective: FitObjective;
  /** Hold the per-step overhead at this value instead of fitting it (kernel-time profiles: 0). */
  overheadMs?: number;
  /** Hold the request overhead at this measured value (src/calibrate/requestOverhead.ts). */
  requestOverheadMs?: number;
  /**
   * Errors of per-request points (TTFTs) are taken relative to max(measured, errorFloorMs): a
   * request timed from the client carries delays of a few ms whatever its length, which
   * relative errors would weigh most on the shortest prompts. Default 0 (purely relative).
   */
  errorFloorMs?: number;
}

export class FitError extends Error {
  readonly code = 'ERR_FIT';
}

/** Unknowns, in the order the least-squares columns hold them. */
const UNKNOWNS = ['requestOverheadMs', 'overheadMs', 'halfTokens', 'msPerToken', 'msPerByte'];
type Theta = [number, number, number, number, number];
/** Dropped first when columns are collinear: the overheads, then the small-step penalty. */
const DROP_ORDER = [0, 1, 2];
const LAWSON_ITERATIONS = 400;
const LEAST_SQUARES_ITERATIONS = 30;
const MIN_LAWSON_WEIGHT = 1e-9;
/** Small-step penalties (tokens) the alternating fit starts from. */
const START_HALF_TOKENS = [0, 64, 256, 1024];
/** The score ratio a start with a larger small-step penalty must beat. */
const CLEARLY_BETTER = 0.1;

/**
 * Fits `spec`'s replica (its model, GPU, TP and dtypes; its own mfu/mbu are the roofline
 * defaults the points are compared with) to the observations. Throws FitError when the data do
 * not determine a curve (too few distinct step sizes, no memory-bound step).
 */
export function fitCurve(
  spec: ReplicaSpec,
  observations: Observation[],
  options: FitOptions,
): ProfileCurve {
  if (observations.length < 3) {
    throw new FitError(`need at least 3 measured points, got ${observations.length}`);
  }
  for (const o of observations) {
    if (!(o.measuredMs > 0) || o.steps.length === 0) {
      throw new FitError(`${o.label}: a point needs steps and a positive time`);
    }
  }
  const fixed = new Map<number, number>();
  if (options.overheadMs !== undefined) fixed.set(1, options.overheadMs);
  if (options.requestOverheadMs !== undefined) fixed.set(0, options.requestOverheadMs);
  if (!observations.some((o) => o.perRequest)) fixed.set(0, 0);
  const floorMs = options.errorFloorMs ?? 0;
  const scales = observations.map((o) =>
    o.perRequest ? Math.max(o.measuredMs, floorMs) : o.measuredMs,
  );
  // Simplest first: no per-step overhead, then starts with larger small-step penalties
  // (alternating classification can settle on the wrong split of compute- and memory-bound
  // steps, so it starts from several). Noisy timings let an overhead or a penalty trade against
  // the other unknowns at about the same error, so a richer candidate wins only when it fits
  // clearly better.
  const candidates: [Map<number, number>, number][] = [];
  if (!fixed.has(1)) candidates.push([new Map([...fixed, [1, 0]]), 0]);
  for (const halfTokens of START_HALF_TOKENS) candidates.push([fixed, halfTokens]);
  let best: Solution | null = null;
  for (const [held, halfTokens] of candidates) {
    const start = rooflineTheta(spec);
    start[2] = start[3] * halfTokens;
    const problem: Problem = {
      spec,
      observations,
      scales,
      fixed: held,
      objective: options.objective,
    };
    const found = alternate(problem, start);
    if (found && (best === null || found.score < best.score * CLEARLY_BETTER)) best = found;
  }
  if (best === null) throw new FitError('no fit');
  const curve = curveResult(spec, observations, best.theta, best.fixed, options.objective);
  // A measured request overhead is held, not "held at 0": it is not named among those.
  if (options.requestOverheadMs !== undefined) {
    curve.fixed = curve.fixed.filter((name) => name !== 'requestOverheadMs');
  }
  return curve;
}

interface Problem {
  spec: ReplicaSpec;
  observations: Observation[];
  /** What each point's error is taken relative to. */
  scales: number[];
  fixed: Map<number, number>;
  objective: FitObjective;
}

interface Solution {
  theta: Theta;
  score: number;
  fixed: Set<number>;
}

/** Classify, solve, classify again... from `start`; the best solution seen, or null. */
function alternate(p: Problem, start: Theta): Solution | null {
  const { spec, observations, scales, objective } = p;
  let theta = start;
  let weights = observations.map(() => 1 / observations.length);
  let best: Solution | null = null;
  const iterations = objective === 'minimax' ? LAWSON_ITERATIONS : LEAST_SQUARES_ITERATIONS;
  let lastClasses = '';
  for (let i = 0; i < iterations; i++) {
    const classes = observations.map((o) => o.steps.map((s) => isCompute(spec, theta, s)));
    const key = JSON.stringify(classes);
    if (objective === 'least-squares' && key === lastClasses) break;
    lastClasses = key;
    const solved = solveWeighted(spec, observations, scales, classes, weights, p.fixed, theta);
    theta = solved.theta;
    // A rate at or below 0 is no curve: keep the best fit so far.
    if (!(theta[3] > 0 && theta[4] > 0)) break;
    const rel = observations.map((o, j) => (predictMs(spec, theta, o) - o.measuredMs) / scales[j]!);
    const score =
      objective === 'minimax'
        ? Math.max(...rel.map(Math.abs))
        : rel.reduce((sum, r) => sum + r * r, 0);
    if (best === null || score < best.score) best = { theta, score, fixed: solved.fixed };
    if (objective === 'minimax') {
      weights = weights.map((w, j) => w * Math.max(Math.abs(rel[j]!), 1e-12));
      const total = weights.reduce((a, b) => a + b, 0);
      // Floored, so that no point's weight underflows and drops its column out of the system.
      weights = weights.map((w) => Math.max(w / total, MIN_LAWSON_WEIGHT));
    }
  }
  return best;
}

/** The roofline's own coefficients in fit terms. */
function rooflineTheta(spec: ReplicaSpec): Theta {
  return [0, 0, 0, msPerTokenAt(spec, spec.mfu), msPerByteAt(spec, spec.mbu)];
}

const msPerTokenAt = (spec: ReplicaSpec, mfu: number): number =>
  ((2 * spec.model.activeParams) / (spec.tp * peakFlops(spec.gpu, spec.weightsDtype) * mfu)) * 1e3;
const msPerByteAt = (spec: ReplicaSpec, mbu: number): number =>
  1e3 / (spec.tp * spec.gpu.hbmBytesPerS * mbu);

function isCompute(spec: ReplicaSpec, t: Theta, step: StepWork): boolean {
  const tokens = step.prefillTokens + step.decodeTokens;
  return t[2] + t[3] * tokens >= t[4] * stepBytesRead(spec, step);
}

/** The curve for fit coefficients (msPerToken and msPerByte must be > 0). */
function curveOf(spec: ReplicaSpec, t: Theta): StepCurve {
  if (!(t[3] > 0) || !(t[4] > 0)) {
    throw new FitError(
      'the measurements do not determine the compute and memory rates: measure more step sizes, small and large',
    );
  }
  return {
    tp: spec.tp,
    mfuMax: msPerTokenAt(spec, 1) / t[3],
    halfTokens: t[2] / t[3],
    mbu: msPerByteAt(spec, 1) / t[4],
    overheadMs: t[1],
  };
}

const calibrated = (spec: ReplicaSpec, curve: StepCurve): ReplicaSpec => ({
  ...spec,
  calibration: {
    source: 'fit',
    measuredOn: {
      model: spec.model.name,
      gpu: spec.gpu.name,
      weightsDtype: spec.weightsDtype,
      kvDtype: spec.kvDtype,
    },
    curve,
  },
});

/** An observation's time under a spec (the cost model's own step time), plus the request overhead. */
function observedMs(spec: ReplicaSpec, o: Observation, requestOverheadMs: number): number {
  let ms = o.perRequest ? requestOverheadMs : 0;
  for (const step of o.steps) ms += mixedStepMs(spec, step);
  return ms;
}

const predictMs = (spec: ReplicaSpec, t: Theta, o: Observation): number =>
  observedMs(calibrated(spec, curveOf(spec, t)), o, t[0]);

/** Row of the linear system for one observation, given its steps' classes. */
function row(spec: ReplicaSpec, o: Observation, classes: boolean[]): number[] {
  const r = [o.perRequest ? 1 : 0, o.steps.length, 0, 0, 0];
  o.steps.forEach((step, i) => {
    if (classes[i]) {
      r[2]! += 1;
      r[3]! += step.prefillTokens + step.decodeTokens;
    } else {
      r[4]! += stepBytesRead(spec, step);
    }
  });
  return r;
}

/**
 * Weighted least squares over relative errors with `fixed` unknowns held; an overhead or
 * halfTokens that comes out negative is held at 0 and the system solved again, and so is one
 * that the data cannot separate from the others.
 */
function solveWeighted(
  spec: ReplicaSpec,
  observations: Observation[],
  scales: number[],
  classes: boolean[][],
  weights: number[],
  fixedIn: Map<number, number>,
  previous: Theta,
): { theta: Theta; fixed: Set<number> } {
  const fixed = new Map(fixedIn);
  const rows = observations.map((o, i) => row(spec, o, classes[i]!));
  for (;;) {
    const free = [0, 1, 2, 3, 4].filter((j) => !fixed.has(j) && rows.some((r) => r[j] !== 0));
    // A rate no step of this classification exercises keeps its previous value.
    for (const j of [0, 1, 2, 3, 4]) {
      if (!free.includes(j) && !fixed.has(j)) fixed.set(j, j >= 3 ? previous[j]! : 0);
    }
    const scale = free.map((j) => Math.hypot(...rows.map((r) => r[j]!)) || 1);
    const a: number[][] = [];
    const b: number[] = [];
    observations.forEach((o, i) => {
      const w = Math.sqrt(weights[i]!) / scales[i]!;
      const r = rows[i]!;
      let y = o.measuredMs;
      for (const [j, v] of fixed) y -= r[j]! * v;
      a.push(free.map((j, k) => (r[j]! / scale[k]!) * w));
      b.push(y * w);
    });
    const matrix = new Matrix(a);
    const svd = new SingularValueDecomposition(matrix, { autoTranspose: true });
    const sv = svd.diagonal;
    const deficient = sv.length < free.length || sv[sv.length - 1]! < sv[0]! * 1e-9;
    const droppable = DROP_ORDER.filter((j) => free.includes(j));
    if (deficient && droppable.length > 0) {
      fixed.set(droppable[0]!, 0);
      continue;
    }
    const x = solve(matrix, Matrix.columnVector(b), true).to1DArray();
    const theta = [0, 0, 0, 0, 0] as Theta;
    for (const [j, v] of fixed) theta[j] = v;
    free.forEach((j, k) => {
      theta[j] = x[k]! / scale[k]!;
    });
    const negative = DROP_ORDER.filter((j) => free.includes(j) && theta[j]! < 0);
    if (negative.length > 0) {
      const worst = negative.reduce((m, j) => (theta[j]! < theta[m]! ? j : m));
      fixed.set(worst, 0);
      continue;
    }
    return { theta, fixed: new Set([...fixed.keys()].filter((j) => j < 3)) };
  }
}

function curveResult(
  spec: ReplicaSpec,
  observations: Observation[],
  t: Theta,
  fixed: Set<number>,
  objective: FitObjective,
): ProfileCurve {
  const curve = curveOf(spec, t);
  const perRequest = observations.some((o) => o.perRequest);
  const fitted = calibrated(spec, curve);
  const pct = (ms: number, measured: number) => ((ms - measured) / measured) * 100;
  const points: ProfilePoint[] = observations.map((o) => {
    const fittedMs = observedMs(fitted, o, t[0]);
    const rooflineMs = observedMs(spec, o, 0);
    return {
      kind: o.kind,
      label: o.label,
      tokensPerStep: Math.max(...o.steps.map((s) => s.prefillTokens + s.decodeTokens)),
      totalTokens: o.steps.reduce((sum, s) => sum + s.prefillTokens + s.decodeTokens, 0),
      kvTokensRead: o.steps.reduce((sum, s) => sum + s.kvTokensRead, 0) / o.steps.length,
      measuredMs: o.measuredMs,
      fittedMs,
      errorPct: pct(fittedMs, o.measuredMs),
      rooflineMs,
      rooflineErrorPct: pct(rooflineMs, o.measuredMs),
    };
  });
  const abs = (xs: number[]) => xs.map(Math.abs);
  const errors = points.map((p) => p.errorPct);
  return {
    ...curve,
    requestOverheadMs: t[0],
    fixed: [...fixed]
      .filter((j) => perRequest || j !== 0)
      .sort()
      .map((j) => UNKNOWNS[j]!),
    objective,
    maxErrorPct: Math.max(...abs(errors)),
    rmsErrorPct: Math.sqrt(errors.reduce((s, e) => s + e * e, 0) / errors.length),
    rooflineMaxErrorPct: Math.max(...abs(points.map((p) => p.rooflineErrorPct))),
    points,
  };
}
