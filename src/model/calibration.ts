/**
 * The calibrated cost model's coefficients and the profile that carries them. A calibrated
 * replica times a step of n computed tokens reading `bytes` of HBM as
 *
 *   stepMs = overheadMs + max(2 x activeParams x n / (tp x peak FLOP/s x MFU(n)),
 *                             bytes / (tp x HBM bytes/s x mbu))
 *   MFU(n) = mfuMax x n / (n + halfTokens)
 *
 * so small steps run at a lower MFU (halfTokens is the step size at half of mfuMax) and every
 * step pays a fixed overhead (kernel launches, scheduling, sampling). MBU is one constant: every
 * step reads all the weights, so a bytes-independent cost cannot be told apart from the fixed
 * overhead, which carries it; the effective MBU of a memory-bound step, mbu x bytes / (bytes +
 * overheadMs x tp x HBM bytes/s x mbu), is itself a saturating curve in the bytes read.
 * The coefficients are dimensionless efficiencies, so a profile measured on one model applies to
 * another on the same GPU. `cost.ts` applies them; this file holds the types, picks the curve
 * for a TP degree and checks a profile read from a file. No I/O.
 */
import { DTYPES, type Dtype, GPUS, MODELS } from './catalog.ts';
import { type StepTable, stepTableProblem } from './stepTable.ts';

/** One tensor-parallel degree's coefficients. */
export interface StepCurve {
  /** GPUs per replica the curve was measured at. */
  tp: number;
  /** MFU that large steps approach, 0..1 in practice. */
  mfuMax: number;
  /** Tokens per step at which MFU is half of mfuMax (>= 0). */
  halfTokens: number;
  /** HBM bandwidth utilization of memory-bound steps. */
  mbu: number;
  /** Fixed cost of every step, ms (>= 0). */
  overheadMs: number;
}

/** A measured point and how the fitted model and the roofline defaults predict it. */
export interface ProfilePoint {
  /** `step`: one step timed directly; `ttft`: a cold prompt's time to first token. */
  kind: 'step' | 'ttft' | 'itl';
  /** What was measured, in words (e.g. `num_tokens 512`, `prompt 8192 (4 chunks)`). */
  label: string;
  /** Tokens computed per step (prefill chunk or decode batch) of the step(s) measured. */
  tokensPerStep: number;
  /** Prompt tokens the point covers (its steps' tokens, summed). */
  totalTokens: number;
  /** KV tokens each step reads, on average. */
  kvTokensRead: number;
  measuredMs: number;
  fittedMs: number;
  /** (fitted - measured) / measured, percent. */
  errorPct: number;
  rooflineMs: number;
  rooflineErrorPct: number;
}

export interface ProfileCurve extends StepCurve {
  /** Per-request overhead fitted alongside (TTFT points only), ms; not part of the step model. */
  requestOverheadMs: number;
  /** Coefficients held at a given value because the data could not tell them apart. */
  fixed: string[];
  /** `least-squares` or `minimax`, both over relative errors. */
  objective: FitObjective;
  maxErrorPct: number;
  rmsErrorPct: number;
  rooflineMaxErrorPct: number;
  points: ProfilePoint[];
  /**
   * A measured table of step times (stepTable.ts). Where present it times every step in place
   * of the curve (an engine off the roofline: llama.cpp on a CPU); absent in older profiles.
   */
  table?: ProfileTable;
}

/** The table and how well it fits the points it was fitted to. */
export interface ProfileTable extends StepTable {
  /** Per-request overhead fitted with the table, ms; not part of a step. */
  requestOverheadMs: number;
  /**
   * ms per prompt token beyond it for a text prompt (the server tokenizes it before its first
   * step; calibrate's probes send token ids, so it is measured apart with text prompts). Absent:
   * 0, as older profiles read.
   */
  requestMsPerPromptToken?: number;
  fixed: string[];
  maxErrorPct: number;
  rmsErrorPct: number;
}

export type FitObjective = 'least-squares' | 'minimax';
export const FIT_OBJECTIVES: readonly FitObjective[] = ['least-squares', 'minimax'];

export const PROFILE_FORMAT = 'kvroute-profile/1';

/** The replica the measurements were taken on: catalog names and dtypes. */
export interface MeasuredOn {
  model: string;
  gpu: string;
  weightsDtype: Dtype;
  kvDtype: Dtype;
}

export interface CostProfile {
  format: typeof PROFILE_FORMAT;
  /** Where the measurements came from (a URL, a Vidur folder and commit...). */
  source: string;
  /** How they were taken and reduced, in words. */
  method: string;
  measuredOn: MeasuredOn;
  curves: ProfileCurve[];
}

/** What a calibrated ReplicaSpec carries: the curve for its TP and where it came from. */
export interface Calibration {
  source: string;
  measuredOn: MeasuredOn;
  curve: StepCurve;
  /** Measured step times that replace the curve's (absent: the curve times every step). */
  table?: StepTable;
  /**
   * What a request costs before its first step, ms (HTTP, tokenization, hand-off to the step
   * loop): the fitted request overhead of whatever times the steps (the table, else the curve),
   * absent where it is not positive. The simulator hands each request to its engine this much
   * after it arrives; its TTFT counts from the arrival.
   */
  requestOverheadMs?: number;
  /**
   * What each prompt token adds to that, ms: a text prompt's tokenization on the server (its
   * table's `requestMsPerPromptToken`; absent where not measured or not positive).
   */
  requestMsPerPromptToken?: number;
}

export class ProfileError extends Error {
  readonly code = 'ERR_PROFILE';
}

/** The profile's calibration for `tp` GPUs per replica; throws ProfileError when it has none. */
export function calibrationFor(profile: CostProfile, tp: number): Calibration {
  const found = profile.curves.find((c) => c.tp === tp);
  if (!found) {
    const tps = profile.curves.map((c) => c.tp).join(', ');
    throw new ProfileError(`the profile has curves for TP ${tps}; none for TP ${tp}`);
  }
  const { mfuMax, halfTokens, mbu, overheadMs, table } = found;
  const requestOverheadMs = (table ?? found).requestOverheadMs;
  return {
    source: profile.source,
    measuredOn: profile.measuredOn,
    curve: { tp, mfuMax, halfTokens, mbu, overheadMs },
    ...(requestOverheadMs > 0 && { requestOverheadMs }),
    ...((table?.requestMsPerPromptToken ?? 0) > 0 && {
      requestMsPerPromptToken: table!.requestMsPerPromptToken,
    }),
    ...(table && {
      table: {
        prefillTokens: table.prefillTokens,
        prefillMs: table.prefillMs,
        decodeSeqs: table.decodeSeqs,
        decodeMs: table.decodeMs,
        msPerContextPair: table.msPerContextPair,
        overheadMs: table.overheadMs,
        ...(table.perSequencePasses === true && { perSequencePasses: true }),
        ...(table.pairRateContextTokens !== undefined && {
          pairRateContextTokens: table.pairRateContextTokens,
        }),
        ...(table.msPerContextPairAt !== undefined && {
          msPerContextPairAt: table.msPerContextPairAt,
        }),
        ...(table.msPerPromptSample !== undefined && {
          msPerPromptSample: table.msPerPromptSample,
        }),
        ...(table.attentionRowTile !== undefined && { attentionRowTile: table.attentionRowTile }),
        ...(table.shortChunkPairFactor !== undefined && {
          shortChunkPairFactor: table.shortChunkPairFactor,
        }),
      },
    }),
  };
}

/** MFU of a step computing `tokens` tokens on the curve (mfuMax for an unbounded step). */
export function curveMfu(curve: StepCurve, tokens: number): number {
  if (tokens === Number.POSITIVE_INFINITY) return curve.mfuMax;
  return (curve.mfuMax * tokens) / (tokens + curve.halfTokens);
}

/**
 * A profile from parsed YAML or JSON, every field checked; throws ProfileError naming the first
 * field that is wrong. Points are kept as given (they are a record, not used to compute).
 */
export function profileFromData(data: unknown): CostProfile {
  const root = record(data, 'the profile');
  if (root.format !== PROFILE_FORMAT) {
    throw new ProfileError(`format must be '${PROFILE_FORMAT}', got ${show(root.format)}`);
  }
  const measured = record(root.measuredOn, 'measuredOn');
  const curvesRaw = root.curves;
  if (!Array.isArray(curvesRaw) || curvesRaw.length === 0) {
    throw new ProfileError('curves must be a non-empty list');
  }
  const curves = curvesRaw.map((raw, i) => readCurve(raw, `curves[${i}]`));
  const tps = curves.map((c) => c.tp);
  if (new Set(tps).size !== tps.length) throw new ProfileError('curves has a TP degree twice');
  return {
    format: PROFILE_FORMAT,
    source: text(root.source, 'source'),
    method: text(root.method, 'method'),
    measuredOn: {
      model: oneOf(measured.model, Object.keys(MODELS), 'measuredOn.model'),
      gpu: oneOf(measured.gpu, Object.keys(GPUS), 'measuredOn.gpu'),
      weightsDtype: oneOf(measured.weightsDtype, DTYPES, 'measuredOn.weightsDtype'),
      kvDtype: oneOf(measured.kvDtype, DTYPES, 'measuredOn.kvDtype'),
    },
    curves,
  };
}

function readCurve(raw: unknown, path: string): ProfileCurve {
  const c = record(raw, path);
  const tp = num(c.tp, `${path}.tp`, { min: 1, integer: true });
  const objective = oneOf(c.objective, FIT_OBJECTIVES, `${path}.objective`);
  const fixed = c.fixed ?? [];
  if (!Array.isArray(fixed) || !fixed.every((f) => typeof f === 'string')) {
    throw new ProfileError(`${path}.fixed must be a list of names`);
  }
  const points = c.points ?? [];
  if (!Array.isArray(points)) throw new ProfileError(`${path}.points must be a list`);
  return {
    tp,
    mfuMax: num(c.mfuMax, `${path}.mfuMax`, { min: 0, exclusive: true }),
    halfTokens: num(c.halfTokens, `${path}.halfTokens`, { min: 0 }),
    mbu: num(c.mbu, `${path}.mbu`, { min: 0, exclusive: true }),
    overheadMs: num(c.overheadMs, `${path}.overheadMs`, { min: 0 }),
    requestOverheadMs: num(c.requestOverheadMs ?? 0, `${path}.requestOverheadMs`, {}),
    fixed,
    objective,
    maxErrorPct: num(c.maxErrorPct, `${path}.maxErrorPct`, {}),
    rmsErrorPct: num(c.rmsErrorPct, `${path}.rmsErrorPct`, {}),
    rooflineMaxErrorPct: num(c.rooflineMaxErrorPct, `${path}.rooflineMaxErrorPct`, {}),
    points: points as ProfilePoint[],
    ...(c.table !== undefined && { table: readTable(c.table, `${path}.table`) }),
  };
}

function readTable(raw: unknown, path: string): ProfileTable {
  const t = record(raw, path);
  const fixed = t.fixed ?? [];
  if (!Array.isArray(fixed) || !fixed.every((f) => typeof f === 'string')) {
    throw new ProfileError(`${path}.fixed must be a list of names`);
  }
  const table: ProfileTable = {
    prefillTokens: t.prefillTokens as number[],
    prefillMs: t.prefillMs as number[],
    decodeSeqs: (t.decodeSeqs ?? []) as number[],
    decodeMs: (t.decodeMs ?? []) as number[],
    msPerContextPair: t.msPerContextPair as number,
    overheadMs: t.overheadMs as number,
    requestOverheadMs: num(t.requestOverheadMs ?? 0, `${path}.requestOverheadMs`, {}),
    fixed,
    maxErrorPct: num(t.maxErrorPct, `${path}.maxErrorPct`, {}),
    rmsErrorPct: num(t.rmsErrorPct, `${path}.rmsErrorPct`, {}),
  };
  if (t.perSequencePasses !== undefined) {
    if (typeof t.perSequencePasses !== 'boolean') {
      throw new ProfileError(`${path}.perSequencePasses must be true or false`);
    }
    if (t.perSequencePasses) table.perSequencePasses = true;
  }
  if (t.msPerPromptSample !== undefined) table.msPerPromptSample = t.msPerPromptSample as number;
  if (t.requestMsPerPromptToken !== undefined) {
    table.requestMsPerPromptToken = num(
      t.requestMsPerPromptToken,
      `${path}.requestMsPerPromptToken`,
      { min: 0 },
    );
  }
  if (t.attentionRowTile !== undefined) table.attentionRowTile = t.attentionRowTile as number;
  if (t.shortChunkPairFactor !== undefined) {
    table.shortChunkPairFactor = t.shortChunkPairFactor as number;
  }
  if (t.pairRateContextTokens !== undefined || t.msPerContextPairAt !== undefined) {
    table.pairRateContextTokens = t.pairRateContextTokens as number[];
    table.msPerContextPairAt = t.msPerContextPairAt as number[];
  }
  const problem = stepTableProblem(table);
  if (problem !== null) throw new ProfileError(`${path}: ${problem}`);
  return table;
}

const show = (v: unknown): string => (typeof v === 'string' ? `'${v}'` : String(v));

function record(v: unknown, path: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ProfileError(`${path} must be a mapping`);
  }
  return v as Record<string, unknown>;
}

function text(v: unknown, path: string): string {
  if (typeof v !== 'string' || v.length === 0) {
    throw new ProfileError(`${path} must be a non-empty string`);
  }
  return v;
}

function oneOf<T extends string>(v: unknown, allowed: readonly T[], path: string): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    throw new ProfileError(`${path} must be one of ${allowed.join(', ')}; got ${show(v)}`);
  }
  return v as T;
}

function num(
  v: unknown,
  path: string,
  o: { min?: number; exclusive?: boolean; integer?: boolean },
): number {
  const ok =
    typeof v === 'number' &&
    Number.isFinite(v) &&
    (!o.integer || Number.isInteger(v)) &&
    (o.min === undefined || (o.exclusive ? v > o.min : v >= o.min));
  if (!ok) {
    const bound = o.min === undefined ? '' : ` ${o.exclusive ? '>' : '>='} ${o.min}`;
    throw new ProfileError(
      `${path} must be ${o.integer ? 'an integer' : 'a number'}${bound}, got ${show(v)}`,
    );
  }
  return v as number;
}
